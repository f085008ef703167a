package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
)

// Write and Read round-trip every dtype Write stores, scalars, empty
// tensors, views and transposes (as their logical values) and metadata.
func TestWriteReadRoundTrip(t *testing.T) {
	m := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}))
	view, err := m.Slice(nil, tensor.S(1, 3))
	require.NoError(t, err)
	tr := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6}))
	require.NoError(t, tr.T())
	in := map[string]tensor.Tensor{
		"f64":    m,
		"f32":    tensor.New(tensor.WithShape(3), tensor.WithBacking([]float32{1.5, -2, float32(math.Inf(1))})),
		"i64":    tensor.New(tensor.WithBacking([]int64{math.MinInt64, 0, math.MaxInt64})),
		"int":    tensor.New(tensor.WithBacking([]int{-1, 7})),
		"i32":    tensor.New(tensor.WithBacking([]int32{-3, 9})),
		"i16":    tensor.New(tensor.WithBacking([]int16{-3, 9})),
		"i8":     tensor.New(tensor.WithBacking([]int8{-3, 9})),
		"u8":     tensor.New(tensor.WithBacking([]uint8{0, 255})),
		"u16":    tensor.New(tensor.WithBacking([]uint16{0, 65535})),
		"u32":    tensor.New(tensor.WithBacking([]uint32{0, 1 << 31})),
		"u64":    tensor.New(tensor.WithBacking([]uint64{0, 1 << 63})),
		"bool":   tensor.New(tensor.WithBacking([]bool{true, false, true})),
		"scalar": tensor.New(tensor.FromScalar(2.5)),
		"empty":  tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(0, 4)),
		"view":   view.(*tensor.Dense),
		"T":      tr,
	}
	path := filepath.Join(t.TempDir(), "all.safetensors")
	meta := map[string]string{"format": "pt", "step": "12"}
	require.NoError(t, Write(path, in, meta))
	got, gotMeta, err := Read(path)
	require.NoError(t, err)
	assert.Equal(t, meta, gotMeta)
	require.Len(t, got, len(in))
	assert.Equal(t, []float64{1, 2, 3, 4, 5, 6}, got["f64"].Float64s())
	assert.Equal(t, tensor.Shape{2, 3}, got["f64"].Shape())
	assert.Equal(t, []int64{math.MinInt64, 0, math.MaxInt64}, got["i64"].Int64s())
	assert.Equal(t, []int64{-1, 7}, got["int"].Int64s(), "Int is stored as I64")
	assert.Equal(t, []int32{-3, 9}, got["i32"].Int32s())
	assert.Equal(t, []int16{-3, 9}, got["i16"].Int16s())
	assert.Equal(t, []int8{-3, 9}, got["i8"].Int8s())
	assert.Equal(t, []uint8{0, 255}, got["u8"].Uint8s())
	assert.Equal(t, []uint16{0, 65535}, got["u16"].Uint16s())
	assert.Equal(t, []uint32{0, 1 << 31}, got["u32"].Uint32s())
	assert.Equal(t, []uint64{0, 1 << 63}, got["u64"].Uint64s())
	assert.Equal(t, []bool{true, false, true}, got["bool"].Bools())
	assert.True(t, got["scalar"].Shape().IsScalar())
	assert.Equal(t, 2.5, got["scalar"].Data())
	assert.Equal(t, tensor.Shape{0, 4}, got["empty"].Shape())
	assert.Equal(t, []float64{2, 3, 5, 6}, got["view"].Float64s())
	assert.Equal(t, tensor.Shape{3, 2}, got["T"].Shape())
	assert.Equal(t, []float32{1, 4, 2, 5, 3, 6}, got["T"].Float32s())
	assert.Equal(t, []float64{1, 2, 3, 4, 5, 6}, m.Float64s(), "inputs are not modified")

	// The layout: an 8-byte length, a JSON header padded to 8 bytes, the
	// data in the order of the names.
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	n := binary.LittleEndian.Uint64(raw)
	assert.Zero(t, n%8)
	var header map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw[8:8+n], &header))
	// "T" sorts first: its data starts the data section.
	assert.JSONEq(t, `{"dtype":"F32","shape":[3,2],"data_offsets":[0,24]}`, string(header["T"]))
	var f64 struct {
		Dtype   string  `json:"dtype"`
		Shape   []int   `json:"shape"`
		Offsets []int64 `json:"data_offsets"`
	}
	require.NoError(t, json.Unmarshal(header["f64"], &f64))
	assert.Equal(t, "F64", f64.Dtype)
	assert.Equal(t, []int{2, 3}, f64.Shape)
	assert.Equal(t, int64(48), f64.Offsets[1]-f64.Offsets[0])
	// The metadata holds the checksums beside the caller's entries, which
	// Read returns alone (tested above).
	var stored map[string]string
	require.NoError(t, json.Unmarshal(header["__metadata__"], &stored))
	assert.Equal(t, "pt", stored["format"])
	assert.Equal(t, "12", stored["step"])
	assert.Contains(t, stored["gathergrad.crc32c"], `"f64":"`)
}

func TestWriteRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	for name, c := range map[string]struct {
		in   map[string]tensor.Tensor
		want error
	}{
		"empty name":    {map[string]tensor.Tensor{"": tensor.New(tensor.WithBacking([]float32{1}))}, gather.ErrOption},
		"metadata name": {map[string]tensor.Tensor{"__metadata__": tensor.New(tensor.WithBacking([]float32{1}))}, gather.ErrOption},
		"nil tensor":    {map[string]tensor.Tensor{"a": nil}, gather.ErrShape},
		"complex":       {map[string]tensor.Tensor{"c": tensor.New(tensor.WithBacking([]complex128{1}))}, gather.ErrDtype},
		"string":        {map[string]tensor.Tensor{"s": tensor.New(tensor.WithBacking([]string{"a"}))}, gather.ErrDtype},
	} {
		require.ErrorIs(t, Write(path, c.in, nil), c.want, name)
		_, err := os.Stat(path)
		require.True(t, errors.Is(err, os.ErrNotExist), "%s: a failed Write leaves no file", name)
	}
}

// header builds a file from a header given as JSON and its data.
func rawHeader(js string, data []byte) []byte {
	for len(js)%8 != 0 {
		js += " "
	}
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(js)))
	b.WriteString(js)
	b.Write(data)
	return b.Bytes()
}

// A corpus of malformed files: each is an ErrFormat error, never a panic.
func TestReadMalformed(t *testing.T) {
	eight := make([]byte, 8)
	huge := make([]byte, 16)
	binary.LittleEndian.PutUint64(huge, 1<<62)
	cases := map[string][]byte{
		"empty":                    {},
		"truncated length":         {1, 2, 3},
		"header past the end":      append(binary.LittleEndian.AppendUint64(nil, 100), []byte("{}")...),
		"huge header length":       huge,
		"invalid JSON":             rawHeader(`{"a": {"dtype": "F32",`, nil),
		"not an object":            rawHeader(`[1, 2]`, nil),
		"unknown dtype":            rawHeader(`{"a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}}`, make([]byte, 16)),
		"negative shape":           rawHeader(`{"a":{"dtype":"F32","shape":[-1,2],"data_offsets":[0,8]}}`, eight),
		"overflowing shape":        rawHeader(`{"a":{"dtype":"F64","shape":[4294967296,4294967296,4],"data_offsets":[0,8]}}`, eight),
		"offsets past the data":    rawHeader(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, eight),
		"offsets reversed":         rawHeader(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, eight),
		"offsets disagree":         rawHeader(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}}`, eight),
		"overlapping":              rawHeader(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, eight),
		"a gap":                    rawHeader(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, eight),
		"data after the last":      rawHeader(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, eight),
		"duplicate name":           rawHeader(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, eight),
		"unknown field":            rawHeader(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`, eight[:4]),
		"three offsets":            rawHeader(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,4]}}`, eight[:4]),
		"metadata not strings":     rawHeader(`{"__metadata__":{"a":1}}`, nil),
		"bool byte 2":              rawHeader(`{"a":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}}`, []byte{2}),
		"text after the object":    rawHeader(`{}x`, nil),
		"fractional shape":         rawHeader(`{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}`, eight[:4]),
		"no data for no tensors":   rawHeader(`{}`, eight),
		"shape too big for memory": rawHeader(`{"a":{"dtype":"U8","shape":[9223372036854775807],"data_offsets":[0,8]}}`, eight),
	}
	dir := t.TempDir()
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
			require.NoError(t, os.WriteFile(path, b, 0o600))
			var err error
			require.NotPanics(t, func() { _, _, err = Read(path) })
			require.ErrorIs(t, err, ErrFormat)
		})
	}
}

// F16 and BF16 tensors are read as float32, exactly; a file another
// writer made (here by hand, as the format's documentation lays it out) is
// read.
func TestReadHalves(t *testing.T) {
	f16 := []uint16{0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x7c00, 0x3555}
	want16 := []float32{1, -2, 65504, float32(math.Ldexp(1, -24)), float32(math.Copysign(0, -1)), float32(math.Inf(1)), 0.33325195}
	bf := []uint16{0x3f80, 0xc049, 0x0001}
	wantBF := []float32{1, math.Float32frombits(0xc0490000), math.Float32frombits(0x00010000)}
	var data []byte
	for _, v := range append(append([]uint16{}, f16...), bf...) {
		data = binary.LittleEndian.AppendUint16(data, v)
	}
	js := `{"h":{"dtype":"F16","shape":[7],"data_offsets":[0,14]},"b":{"dtype":"BF16","shape":[3],"data_offsets":[14,20]}}`
	path := filepath.Join(t.TempDir(), "half.safetensors")
	require.NoError(t, os.WriteFile(path, rawHeader(js, data), 0o600))
	got, meta, err := Read(path)
	require.NoError(t, err)
	assert.Nil(t, meta)
	assert.Equal(t, want16, got["h"].Float32s())
	assert.True(t, math.Signbit(float64(got["h"].Float32s()[4])))
	assert.Equal(t, wantBF, got["b"].Float32s())
}

// A failed Write leaves the previous file; a temporary file a killed
// save left is removed by the next save to that path.
func TestWriteIsAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	one := map[string]tensor.Tensor{"a": tensor.New(tensor.WithBacking([]float32{1}))}
	require.NoError(t, Write(path, one, nil))
	stale := filepath.Join(dir, ".model.safetensors.tmp-123")
	require.NoError(t, os.WriteFile(stale, []byte("torn"), 0o600))
	other := filepath.Join(dir, ".other.safetensors.tmp-1")
	require.NoError(t, os.WriteFile(other, []byte("keep"), 0o600))

	bad := map[string]tensor.Tensor{"a": tensor.New(tensor.WithBacking([]complex64{1}))}
	require.Error(t, Write(path, bad, nil))
	got, _, err := Read(path)
	require.NoError(t, err)
	assert.Equal(t, []float32{1}, got["a"].Float32s())

	require.NoError(t, Write(path, map[string]tensor.Tensor{"a": tensor.New(tensor.WithBacking([]float32{2}))}, nil))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"model.safetensors", ".other.safetensors.tmp-1"}, names)
}

// Save and Load restore dense learnables in place; a Load that fails for
// any reason leaves every part as it was.
func TestSaveLoadNodes(t *testing.T) {
	g := gorgonia.NewGraph()
	w := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(2, 2), gorgonia.WithName("w"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, 4}))))
	b := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(2), gorgonia.WithName("b"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]float32{5, 6}))))
	s := gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("s"), gorgonia.WithValue(0.5))
	path := filepath.Join(t.TempDir(), "m.safetensors")
	require.NoError(t, Save(path, map[string]string{"epoch": "3"}, Nodes(w, b, s)))

	wv := w.Value().(*tensor.Dense)
	copy(wv.Float32s(), []float32{9, 9, 9, 9})
	require.NoError(t, gorgonia.Let(s, 7.0))
	meta, err := Load(path, Nodes(w, b, s))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"epoch": "3"}, meta)
	assert.Same(t, wv, w.Value(), "restored in place")
	assert.Equal(t, []float32{1, 2, 3, 4}, wv.Float32s())
	assert.Equal(t, 0.5, s.Value().Data())

	// Failures: nothing changes.
	copy(wv.Float32s(), []float32{9, 9, 9, 9})
	bv := b.Value().(*tensor.Dense)
	copy(bv.Float32s(), []float32{8, 8})
	g2 := gorgonia.NewGraph()
	other := gorgonia.NewMatrix(g2, tensor.Float32, gorgonia.WithShape(3, 2), gorgonia.WithName("w"), gorgonia.WithInit(gorgonia.Zeroes()))
	missing := gorgonia.NewVector(g2, tensor.Float32, gorgonia.WithShape(2), gorgonia.WithName("c"), gorgonia.WithInit(gorgonia.Zeroes()))
	f64 := gorgonia.NewVector(g2, tensor.Float64, gorgonia.WithShape(2), gorgonia.WithName("b"), gorgonia.WithInit(gorgonia.Zeroes()))
	for name, c := range map[string]struct {
		parts []Part
		msgs  []string
	}{
		"unknown tensor": {[]Part{Nodes(w, b)}, []string{`no part holds the file's "s"`}},
		"missing tensor": {[]Part{Nodes(w, b, s, missing)}, []string{`the file has no "c"`}},
		"wrong shape":    {[]Part{Nodes(other, b, s)}, []string{"w is F32 of shape [2 2] in the file"}},
		"wrong dtype":    {[]Part{Nodes(w, f64, s)}, []string{"b is F32 of shape [2] in the file, float64"}},
		"each of them": {[]Part{Nodes(other, f64, missing)}, []string{"w is F32 of shape [2 2] in the file",
			"b is F32 of shape [2] in the file, float64", `the file has no "c"`, `no part holds the file's "s"`}},
	} {
		_, err := Load(path, c.parts...)
		require.ErrorIs(t, err, ErrMismatch, name)
		require.NotErrorIs(t, err, ErrFormat, name)
		for _, msg := range c.msgs {
			assert.Contains(t, err.Error(), msg, name)
		}
		assert.Equal(t, []float32{9, 9, 9, 9}, wv.Float32s(), name)
		assert.Equal(t, []float32{8, 8}, bv.Float32s(), name)
	}
	require.ErrorIs(t, Save(path, nil, Nodes(w), Nodes(w)), gather.ErrOption, "two parts naming one tensor")
}

// A file NumPy wrote (testdata/numpy_write.py, tensors in an order of its
// own) reads back exactly, and Write's output of the same tensors holds
// the same bytes per tensor.
func TestReadNumPyFile(t *testing.T) {
	got, meta, err := Read("testdata/numpy.safetensors")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"source": "numpy"}, meta)
	want := make([]float32, 12)
	for i := range want {
		want[i] = float32(i) / 8
	}
	assert.Equal(t, want, got["emb.weight"].Float32s())
	assert.Equal(t, tensor.Shape{4, 3}, got["emb.weight"].Shape())
	assert.Equal(t, []float64{1.5, -2.25}, got["f64"].Float64s())
	assert.Equal(t, tensor.Shape{1, 2}, got["f64"].Shape())
	assert.Equal(t, []int64{3, -1, 7}, got["ids"].Int64s())
	assert.Equal(t, []int32{-5, 6}, got["i32"].Int32s())
	assert.Equal(t, []uint8{0, 200, 255}, got["bytes"].Uint8s())
	assert.Equal(t, []bool{true, false}, got["mask"].Bools())
	assert.Equal(t, []float32{1, -0.5, 65504, 1.1920929e-07}, got["half"].Float32s())
	assert.Equal(t, float32(3.25), got["scalar"].Data())
	assert.True(t, got["scalar"].Shape().IsScalar())
}
