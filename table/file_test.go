package table_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/table"
	"github.com/gathergrad/gather/wordvec"
)

// No write replaces the file of an open table: Create, checkpoint.Write
// and Save, and wordvec.Write onto its path are ErrInUse, and the file
// and the open table are untouched. Once the table is closed they work.
func TestWritesOntoOpenTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.safetensors")
	require.NoError(t, table.Create(path, "words", 64, 4, tensor.Float32, table.WithSeed(3)))
	f, err := table.Open(path, "words")
	require.NoError(t, err)
	w, err := f.Weight()
	require.NoError(t, err)
	w.Float32s()[0] = 42
	require.NoError(t, f.Sync())
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	other := map[string]tensor.Tensor{"x": tensor.New(tensor.WithBacking([]float32{1, 2}))}
	require.ErrorIs(t, table.Create(path, "words", 64, 4, tensor.Float32, table.WithReplace()), table.ErrInUse)
	require.ErrorIs(t, checkpoint.Write(path, other, nil), checkpoint.ErrInUse)
	require.ErrorIs(t, checkpoint.Save(path, nil, checkpoint.Nodes()), table.ErrInUse)
	vecs := tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float32{1, 2}))
	require.ErrorIs(t, wordvec.Write(path, []string{"a"}, vecs, false), table.ErrInUse)
	_, err = table.Open(path, "words")
	require.ErrorIs(t, err, table.ErrInUse)

	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(before, after), "the table's file changed")
	w.Float32s()[1] = 7 // the open table still trains into its file
	require.NoError(t, f.Close())
	got, _, err := checkpoint.Read(path)
	require.NoError(t, err)
	require.Equal(t, []float32{42, 7}, got["words.weight"].Float32s()[:2])

	require.NoError(t, checkpoint.Write(path, other, nil))
	require.NoError(t, table.Create(path, "words", 8, 2, tensor.Float32, table.WithReplace()))
}

// Create does not replace an existing file unless asked to.
func TestCreateExisting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.safetensors")
	require.NoError(t, os.WriteFile(path, []byte("mine"), 0o644))
	require.ErrorIs(t, table.Create(path, "words", 8, 2, tensor.Float32), os.ErrExist)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "mine", string(b))
	require.NoError(t, table.Create(path, "words", 8, 2, tensor.Float32, table.WithReplace()))
}

// A table open in another process holds its file too: a write onto it
// from here is ErrInUse and leaves it as it was.
func TestWriteOntoTableOfAnotherProcess(t *testing.T) {
	if path := os.Getenv("GATHER_HOLD_TABLE"); path != "" {
		f, err := table.Open(path, "words")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fmt.Println("open")
		// Hold the table until the parent closes our standard input.
		io.Copy(io.Discard, os.Stdin)
		return
	}
	path := filepath.Join(t.TempDir(), "t.safetensors")
	require.NoError(t, table.Create(path, "words", 64, 4, tensor.Float32, table.WithSeed(3)))
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	cmd := exec.Command(os.Args[0], "-test.run", "^TestWriteOntoTableOfAnotherProcess$", "-test.count", "1")
	cmd.Env = append(os.Environ(), "GATHER_HOLD_TABLE="+path)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "open\n", line)

	require.ErrorIs(t, checkpoint.Write(path, map[string]tensor.Tensor{"x": tensor.New(tensor.WithBacking([]float32{1}))}, nil), table.ErrInUse)
	require.ErrorIs(t, table.Create(path, "words", 8, 2, tensor.Float32, table.WithReplace()), table.ErrInUse)
	_, err = table.Open(path, "words")
	require.ErrorIs(t, err, table.ErrInUse)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(before, after), "the other process's table file changed")

	require.NoError(t, stdin.Close())
	require.NoError(t, cmd.Wait())
	require.NoError(t, checkpoint.Write(path, map[string]tensor.Tensor{"x": tensor.New(tensor.WithBacking([]float32{1}))}, nil), "free once the other process has closed it")
}
