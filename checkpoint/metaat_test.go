package checkpoint_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gathergrad/gather/checkpoint"
)

// rawHeader returns a safetensors file's start holding the JSON header js.
func rawHeader(js string) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, uint64(len(js))), js...)
}

func TestMetaAt(t *testing.T) {
	h, err := checkpoint.Header("t.rows", "F32", []int{2, 3}, map[string]string{"a": "x", "gathergrad.step": "00000000000000000042", "z": "y"})
	require.NoError(t, err)
	off, n, err := checkpoint.MetaAt(bytes.NewReader(h), "gathergrad.step")
	require.NoError(t, err)
	require.Equal(t, "00000000000000000042", string(h[off:off+int64(n)]))
	off, n, err = checkpoint.MetaAt(bytes.NewReader(h), "a")
	require.NoError(t, err)
	require.Equal(t, "x", string(h[off:off+int64(n)]))

	for name, file := range map[string][]byte{
		"missing":          rawHeader(`{"__metadata__":{"b":"1"}}`),
		"no metadata":      rawHeader(`{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`),
		"held twice":       rawHeader(`{"__metadata__":{"k":"1","k":"2"}}`),
		"escaped":          rawHeader(`{"__metadata__":{"k":"\u0031"}}`),
		"not a string":     rawHeader(`{"__metadata__":{"k":1}}`),
		"not an object":    rawHeader(`["k"]`),
		"truncated":        rawHeader(`{"__metadata__":{"k":"1"`),
		"length past file": binary.LittleEndian.AppendUint64(nil, 1<<20),
		"length past max":  binary.LittleEndian.AppendUint64(nil, checkpoint.MaxHeader+1),
		"short":            {1, 2},
	} {
		_, _, err := checkpoint.MetaAt(bytes.NewReader(file), "k")
		require.ErrorIs(t, err, checkpoint.ErrFormat, name)
	}
	// A key inside a tensor's entry is not metadata.
	_, _, err = checkpoint.MetaAt(bytes.NewReader(rawHeader(`{"t":{"k":"1"},"__metadata__":{}}`)), "k")
	require.ErrorIs(t, err, checkpoint.ErrFormat)
	// Another entry's value naming the key is skipped.
	file := rawHeader(`{"__metadata__":{"j":"\"k\":\"9\"","k":"7"}}`)
	off, n, err = checkpoint.MetaAt(bytes.NewReader(file), "k")
	require.NoError(t, err)
	require.Equal(t, "7", string(file[off:off+int64(n)]))
}

func FuzzMetaAt(f *testing.F) {
	f.Add(rawHeader(`{"__metadata__":{"k":"1"}}`))
	f.Add(rawHeader(`{"__metadata__":{"k":"\u0031"}}`))
	f.Fuzz(func(t *testing.T, file []byte) {
		off, n, err := checkpoint.MetaAt(bytes.NewReader(file), "k")
		if err == nil && (off < 8 || off+int64(n) > int64(len(file))) {
			t.Fatalf("value at %d, %d bytes, outside the file of %d", off, n, len(file))
		}
	})
}
