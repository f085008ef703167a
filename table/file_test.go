package table_test

import (
	"bytes"
	"os"
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
