package checkpoint

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// One flipped bit anywhere in a tensor's data is an ErrFormat error that
// names the tensor, from Read and from Load, and Load changes nothing.
func TestFlippedBit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	big := make([]float32, (directMin+chunk)/4+3) // read straight into its part
	for i := range big {
		big[i] = float32(i)
	}
	in := map[string]tensor.Tensor{
		"a":   tensor.New(tensor.WithBacking([]float64{1, 2, 3})),
		"big": tensor.New(tensor.WithBacking(big)),
	}
	require.NoError(t, Write(path, in, nil))
	infos, _, err := Inspect(path)
	require.NoError(t, err)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, info := range infos {
		ats := []int64{0, info.Size / 2, info.Size - 1}
		if info.Size > directMin {
			ats = ats[1:2] // each case writes and loads the whole file
		}
		for _, at := range ats {
			bad := append([]byte(nil), raw...)
			bad[info.Offset+at] ^= 0x10
			p := filepath.Join(t.TempDir(), "bad.safetensors")
			require.NoError(t, os.WriteFile(p, bad, 0o644))
			_, _, err := Read(p)
			require.ErrorIs(t, err, ErrFormat, "%s at %d", info.Name, at)
			assert.Contains(t, err.Error(), `tensor "`+info.Name+`"`)

			g := gorgonia.NewGraph()
			a := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(3), gorgonia.WithName("a"), gorgonia.WithInit(gorgonia.Zeroes()))
			b := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(len(big)), gorgonia.WithName("big"), gorgonia.WithInit(gorgonia.Zeroes()))
			_, err = Load(p, Nodes(a, b))
			require.ErrorIs(t, err, ErrFormat, "%s at %d", info.Name, at)
			assert.Equal(t, []float64{0, 0, 0}, a.Value().Data())
			for _, v := range b.Value().Data().([]float32) {
				require.Zero(t, v, "Load changed a part")
			}
		}
	}
}

// NonStrict loads what the file and the parts share and reports the rest;
// Convert loads float64 into float32 (and back) only when asked.
func TestLoadWithOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	require.NoError(t, Write(path, map[string]tensor.Tensor{
		"w":   tensor.New(tensor.WithBacking([]float64{0.1, 0.2})),
		"old": tensor.New(tensor.WithBacking([]float32{1})),
	}, map[string]string{"epoch": "3"}))
	g := gorgonia.NewGraph()
	w := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(2), gorgonia.WithName("w"), gorgonia.WithInit(gorgonia.Zeroes()))
	added := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(2), gorgonia.WithName("new"), gorgonia.WithInit(gorgonia.Ones()))

	for _, c := range []struct {
		o     LoadOptions
		parts []Part
		msg   string
	}{
		{LoadOptions{}, []Part{Nodes(w, added)}, "w is F64 of shape [2] in the file, float32 of shape (2) in the model"},
		{LoadOptions{NonStrict: true}, []Part{Nodes(w, added)}, "w is F64 of shape [2] in the file"},
		{LoadOptions{Convert: true}, []Part{Nodes(w, added)}, `the file has no "new"`},
		{LoadOptions{Convert: true}, []Part{Nodes(w)}, `no part holds the file's "old"`},
	} {
		_, err := LoadWith(path, c.o, c.parts...)
		require.ErrorIs(t, err, ErrMismatch, "%+v", c.o)
		require.NotErrorIs(t, err, ErrFormat)
		assert.Contains(t, err.Error(), c.msg)
		assert.Equal(t, []float32{0, 0}, w.Value().Data(), "a failed load changed w")
	}
	r, err := LoadWith(path, LoadOptions{NonStrict: true, Convert: true}, Nodes(w, added))
	require.NoError(t, err)
	assert.Equal(t, []string{"new"}, r.Missing)
	assert.Equal(t, []string{"old"}, r.Unexpected)
	assert.Equal(t, map[string]string{"epoch": "3"}, r.Meta)
	assert.Equal(t, []float32{0.1, 0.2}, w.Value().Data())
	assert.Equal(t, []float32{1, 1}, added.Value().Data(), "a tensor the file lacks is left as it was")
}

// A large tensor loads into its part's own memory: Load allocates far less
// than the tensor's size.
func TestLoadLargeInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	const n = 32 << 20 / 4 // 32 MB of float32
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i % 977)
	}
	require.NoError(t, Write(path, map[string]tensor.Tensor{"t": tensor.New(tensor.WithBacking(v))}, nil))
	g := gorgonia.NewGraph()
	node := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(n), gorgonia.WithName("t"), gorgonia.WithInit(gorgonia.Zeroes()))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Load(path, Nodes(node))
	require.NoError(t, err)
	runtime.ReadMemStats(&after)
	assert.Equal(t, v, node.Value().Data())
	allocated := after.TotalAlloc - before.TotalAlloc
	assert.Less(t, allocated, uint64(2*chunk+1<<20), "Load allocated %d bytes for a %d-byte tensor", allocated, 4*n)
}

// part is a Part holding one tensor in place.
type part struct {
	name string
	t    *tensor.Dense
}

func (p part) State() (map[string]tensor.Tensor, error) {
	return map[string]tensor.Tensor{p.name: p.t}, nil
}
func (p part) SetState(m map[string]*tensor.Dense) error { return CopyInto(p.t, m[p.name]) }

// Int tensors saved and loaded back: I64 in the file, Int64 or Int in the
// model, restored, with or without Convert (which is about floats only).
func TestLoadInts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	n0 := func() tensor.Tensor { return tensor.New(tensor.WithBacking([]int64{3, 4})) }
	require.NoError(t, Write(path, map[string]tensor.Tensor{"n": n0()}, nil))
	for _, o := range []LoadOptions{{}, {Convert: true}} {
		g := gorgonia.NewGraph()
		n := gorgonia.NewVector(g, tensor.Int64, gorgonia.WithShape(2), gorgonia.WithName("n"), gorgonia.WithInit(gorgonia.Zeroes()))
		i := tensor.New(tensor.Of(tensor.Int), tensor.WithShape(2))
		_, err := LoadWith(path, o, Nodes(n), part{"n2", i})
		require.Error(t, err, "n2 is not in the file")
		require.NoError(t, Write(path, map[string]tensor.Tensor{"n": n0(), "n2": n0()}, nil))
		_, err = LoadWith(path, o, Nodes(n), part{"n2", i})
		require.NoError(t, err)
		assert.Equal(t, []int64{3, 4}, n.Value().Data())
		assert.Equal(t, []int{3, 4}, i.Ints())
		require.NoError(t, Write(path, map[string]tensor.Tensor{"n": n0()}, nil))
	}
}
