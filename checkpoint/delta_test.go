package checkpoint

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/gathergrad/gather/table/driver"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
)

// A delta reads back as written; a malformed one is refused before
// anything is written; a file that is not a delta, or whose bytes were
// changed, is an ErrFormat error.
func TestDeltaFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "d.safetensors")
	d := &driver.Delta{Table: "items", Base: 7, Seq: 3, Dim: 2, Time: 1_764_000_000_123_456_789, Rows: []int64{1, 4, 9}, Values: []float32{1, 2, 3, 4, 5, 6},
		AssignedRows: []int64{4, 1}, AssignedIDs: []int64{-77, 1 << 60}}
	require.NoError(t, WriteDelta(path, d))
	got, err := ReadDelta(path)
	require.NoError(t, err)
	assert.Equal(t, d, got)

	empty := &driver.Delta{Table: "items", Base: 7, Seq: 4, Dim: 2}
	require.NoError(t, WriteDelta(path, empty))
	got, err = ReadDelta(path)
	require.NoError(t, err)
	assert.Equal(t, empty, got)

	for name, bad := range map[string]*driver.Delta{
		"no name":  {Base: 1, Seq: 1, Dim: 2},
		"seq 0":    {Table: "x", Dim: 2},
		"dim 0":    {Table: "x", Seq: 1},
		"values":   {Table: "x", Seq: 1, Dim: 2, Rows: []int64{1}, Values: []float32{1}},
		"unsorted": {Table: "x", Seq: 1, Dim: 1, Rows: []int64{2, 1}, Values: []float32{1, 2}},
		"repeated": {Table: "x", Seq: 1, Dim: 1, Rows: []int64{2, 2}, Values: []float32{1, 2}},
		"negative": {Table: "x", Seq: 1, Dim: 1, Rows: []int64{-1}, Values: []float32{1}},
	} {
		assert.ErrorIs(t, WriteDelta(filepath.Join(dir, name), bad), errs.ErrShape, name)
		_, err := os.Stat(filepath.Join(dir, name))
		assert.True(t, os.IsNotExist(err), "%s: nothing written", name)
	}

	// A checkpoint is not a delta.
	other := filepath.Join(dir, "other.safetensors")
	require.NoError(t, Write(other, map[string]tensor.Tensor{"w": tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, 2}))}, nil))
	_, err = ReadDelta(other)
	assert.ErrorIs(t, err, ErrFormat)

	// A byte of the values changed: its CRC-32C says so.
	require.NoError(t, WriteDelta(path, d))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[len(b)-1] ^= 0x40
	require.NoError(t, os.WriteFile(path, b, 0o644))
	_, err = ReadDelta(path)
	assert.ErrorIs(t, err, ErrFormat)
}

// Several tables' deltas and the dense parameters read back from one
// file as written; deltas of two versions, a table twice or a dense name
// that is a table's tensor are refused and nothing is written; ReadDelta
// refuses a file of more than one delta.
func TestDeltasFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "1-2.safetensors")
	users := &driver.Delta{Table: "users", Base: 1, Seq: 2, Dim: 2, Time: 5, Rows: []int64{0, 3}, Values: []float32{1, 2, 3, 4}}
	items := &driver.Delta{Table: "items", Base: 1, Seq: 2, Dim: 3, Time: 4, Rows: []int64{2}, Values: []float32{5, 6, 7},
		AssignedRows: []int64{2}, AssignedIDs: []int64{-9}}
	w := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{0.5, -1, 2, 3}))
	require.NoError(t, WriteDeltas(path, []*driver.Delta{users, items}, map[string]tensor.Tensor{"layer.w": w}))
	ds, dense, err := ReadDeltas(path)
	require.NoError(t, err)
	assert.Equal(t, []*driver.Delta{users, items}, ds)
	require.Len(t, dense, 1)
	assert.Equal(t, w.Data(), dense["layer.w"].Data())
	assert.Equal(t, w.Shape(), dense["layer.w"].Shape())
	_, err = ReadDelta(path)
	assert.ErrorIs(t, err, ErrFormat)

	// The bytes EncodeDeltas returns are the file's; DecodeDeltas reads
	// them as ReadDeltas reads it, and finds a changed byte.
	b, err := EncodeDeltas([]*driver.Delta{users, items}, map[string]tensor.Tensor{"layer.w": w})
	require.NoError(t, err)
	file, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, file, b)
	ds, dense, err = DecodeDeltas(b, "published")
	require.NoError(t, err)
	assert.Equal(t, []*driver.Delta{users, items}, ds)
	assert.Equal(t, w.Data(), dense["layer.w"].Data())
	b[len(b)-1] ^= 1
	_, _, err = DecodeDeltas(b, "published")
	assert.ErrorIs(t, err, ErrFormat)
	assert.Contains(t, err.Error(), "published")

	other := *items
	other.Seq = 3
	for name, c := range map[string]struct {
		ds    []*driver.Delta
		dense map[string]tensor.Tensor
	}{
		"none":           {},
		"versions":       {ds: []*driver.Delta{users, &other}},
		"twice":          {ds: []*driver.Delta{users, users}},
		"dense rows":     {ds: []*driver.Delta{users}, dense: map[string]tensor.Tensor{"users.rows": w}},
		"dense assigned": {ds: []*driver.Delta{items}, dense: map[string]tensor.Tensor{"items.assigned": w}},
	} {
		assert.ErrorIs(t, WriteDeltas(filepath.Join(dir, name), c.ds, c.dense), errs.ErrShape, name)
		_, err := os.Stat(filepath.Join(dir, name))
		assert.True(t, os.IsNotExist(err), "%s: nothing written", name)
	}
}

// FuzzReadDelta: any bytes read as deltas (ReadDeltas, ReadDelta) are
// deltas that Check, or an error; never a panic.
func FuzzReadDelta(f *testing.F) {
	dir := f.TempDir()
	seed := filepath.Join(dir, "seed")
	d := &driver.Delta{Table: "t", Base: 1, Seq: 1, Dim: 2, Rows: []int64{0, 3}, Values: []float32{1, 2, 3, 4}, AssignedRows: []int64{3}, AssignedIDs: []int64{8}}
	u := &driver.Delta{Table: "u", Base: 1, Seq: 1, Dim: 1, Rows: []int64{1}, Values: []float32{5}}
	w := tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, 2}))
	if err := WriteDeltas(seed, []*driver.Delta{d, u}, map[string]tensor.Tensor{"w": w}); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(seed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "d")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		ds, _, err := ReadDeltas(path)
		decoded, _, derr := DecodeDeltas(b, "fuzz")
		if (err == nil) != (derr == nil) || len(ds) != len(decoded) {
			t.Fatalf("the file read %d deltas (%v), its bytes %d (%v)", len(ds), err, len(decoded), derr)
		}
		for _, d := range ds {
			if err := d.Check(); err != nil {
				t.Fatalf("read a delta that does not Check: %v", err)
			}
		}
		if err == nil && len(ds) == 0 {
			t.Fatal("read a file of no delta")
		}
		if d, err := ReadDelta(path); err == nil {
			if err := d.Check(); err != nil {
				t.Fatalf("read a delta that does not Check: %v", err)
			}
		}
	})
}

// A delta file's header is under a checksum: its sequence number, base,
// table name or a tensor's shape changed in place (the bytes' length
// kept) is an ErrFormat error, in a file and in bytes.
func TestDeltaHeaderChecked(t *testing.T) {
	d := &driver.Delta{Table: "items", Base: 7, Seq: 3, Dim: 2, Time: 5, Rows: []int64{1, 4}, Values: []float32{1, 2, 3, 4}}
	b, err := EncodeDeltas([]*driver.Delta{d}, nil)
	require.NoError(t, err)
	_, _, err = DecodeDeltas(b, "delta")
	require.NoError(t, err)
	for _, c := range []struct{ from, to string }{
		{`"gathergrad.delta.seq":"3"`, `"gathergrad.delta.seq":"9"`},
		{`"gathergrad.delta.base":"7"`, `"gathergrad.delta.base":"8"`},
		{`\"table\":\"items\",\"time\"`, `\"table\":\"items\",\"tim_\"`},
		{`"shape":[2,2]`, `"shape":[1,4]`},
	} {
		bad := bytes.Replace(b, []byte(c.from), []byte(c.to), -1)
		require.NotEqual(t, b, bad, "%s is in the header", c.from)
		path := filepath.Join(t.TempDir(), "d.safetensors")
		require.NoError(t, os.WriteFile(path, bad, 0o644))
		_, err := ReadDelta(path)
		assert.ErrorIs(t, err, ErrFormat, "%s -> %s", c.from, c.to)
		_, _, err = DecodeDeltas(bad, "delta")
		assert.ErrorIs(t, err, ErrFormat, "%s -> %s", c.from, c.to)
	}
}
