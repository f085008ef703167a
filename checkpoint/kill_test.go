package checkpoint

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/killtest"
)

// A process saving over and over, killed at random moments (every third
// kill once a save has its temporary file): after each kill the file
// reads back whole, holding the last save that returned or the one under
// way, and the next save removes the temporary file a killed one left.
// At least one kill must land mid-save.
func TestSaveSurvivesKill(t *testing.T) {
	if dir := os.Getenv("GATHER_SAVE_LOOP"); dir != "" {
		saveLoop(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	temps := func(dir string) []string {
		names, _ := filepath.Glob(filepath.Join(dir, ".model.safetensors.tmp-*"))
		return names
	}
	// A kill is mid-save if it left the save's temporary file.
	inside := func(dir string) bool { return len(temps(dir)) > 0 }
	killtest.Run(t, killtest.Config{Test: "TestSaveSurvivesKill", Env: "GATHER_SAVE_LOOP", Kills: 9, Seed: 5, Window: "saving", Inside: inside},
		func(string) {}, func(k killtest.Kill) {
			path := filepath.Join(k.Dir, "model.safetensors")
			got, meta, err := Read(path)
			require.NoError(t, err, "after kill %d", k.N)
			round, err := strconv.Atoi(meta["round"])
			require.NoError(t, err)
			if k.State == "saving" {
				require.Contains(t, []int{k.Step - 1, k.Step}, round, "after kill %d (saving round %d)", k.N, k.Step)
			} else {
				require.Equal(t, k.Step, round, "after kill %d (saved round %d)", k.N, k.Step)
			}
			for i, x := range got["w"].Float32s() {
				require.Equal(t, float32(round), x, "after kill %d: element %d", k.N, i)
			}
			// A save now cleans up whatever the kill left.
			require.NoError(t, Write(path, map[string]tensor.Tensor{"w": tensor.New(tensor.WithBacking([]float32{1}))}, nil))
			require.Empty(t, temps(k.Dir))
		})
}

// saveLoop saves 256K values to dir/model.safetensors until it is killed,
// each save with its round number in every element, and marks each
// round "saving" before its save and "saved" after it.
func saveLoop(t *testing.T, dir string) {
	path := filepath.Join(dir, "model.safetensors")
	v := make([]float32, 1<<18)
	for round := 0; ; round++ {
		for i := range v {
			v[i] = float32(round)
		}
		if round > 0 {
			require.NoError(t, killtest.Mark(dir, "saving", round))
		}
		w := tensor.New(tensor.WithBacking(v))
		require.NoError(t, Write(path, map[string]tensor.Tensor{"w": w}, map[string]string{"round": strconv.Itoa(round)}))
		require.NoError(t, killtest.Mark(dir, "saved", round))
	}
}
