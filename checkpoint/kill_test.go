package checkpoint

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// A process saving over and over, killed at random moments: after each
// kill the file reads back whole, holding one of the saves, and the next
// save removes the temporary file the killed one left.
func TestSaveSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	r := rand.New(rand.NewPCG(5, 6))
	for kill := range 8 {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestSaveSurvivesKillChild$", "-test.count", "1")
		cmd.Env = append(os.Environ(), "GATHER_SAVE_LOOP="+path)
		require.NoError(t, cmd.Start())
		time.Sleep(time.Duration(20+r.IntN(150)) * time.Millisecond)
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
		got, meta, err := Read(path)
		if os.IsNotExist(err) {
			continue // killed before its first save finished
		}
		require.NoError(t, err, "after kill %d", kill)
		v := got["w"].Float32s()
		round, err := strconv.Atoi(meta["round"])
		require.NoError(t, err)
		for i, x := range v {
			require.Equal(t, float32(round), x, "after kill %d: element %d", kill, i)
		}
	}
	// A save now cleans up whatever the kills left.
	require.NoError(t, Write(path, map[string]tensor.Tensor{"w": tensor.New(tensor.WithBacking([]float32{1}))}, nil))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
}

// TestSaveSurvivesKillChild saves 2M values, each save with its round
// number in every element, until it is killed.
func TestSaveSurvivesKillChild(t *testing.T) {
	path := os.Getenv("GATHER_SAVE_LOOP")
	if path == "" {
		t.Skip("run by TestSaveSurvivesKill")
	}
	v := make([]float32, 2<<20)
	for round := 0; ; round++ {
		for i := range v {
			v[i] = float32(round)
		}
		w := tensor.New(tensor.WithBacking(v))
		if err := Write(path, map[string]tensor.Tensor{"w": w}, map[string]string{"round": strconv.Itoa(round)}); err != nil {
			t.Fatal(err)
		}
	}
}
