package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"gorgonia.org/tensor"
)

// FuzzRead reads arbitrary bytes as a safetensors file: it never panics,
// every error wraps ErrFormat, and what it reads writes and reads back the
// same.
func FuzzRead(f *testing.F) {
	f.Add(rawHeader(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}}`, make([]byte, 8)))
	f.Add(rawHeader(`{"b":{"dtype":"BOOL","shape":[2,1],"data_offsets":[0,2]},"h":{"dtype":"F16","shape":[],"data_offsets":[2,4]}}`, []byte{1, 0, 0, 0x3c}))
	f.Add(rawHeader(`{}`, nil))
	f.Add([]byte{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '})
	if b, err := os.ReadFile("testdata/numpy.safetensors"); err == nil {
		f.Add(b)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "in.safetensors")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		got, meta, err := Read(path)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error not wrapping ErrFormat: %v", err)
			}
			return
		}
		in := make(map[string]tensor.Tensor, len(got))
		for k, v := range got {
			in[k] = v
		}
		out := filepath.Join(dir, "out.safetensors")
		if err := Write(out, in, meta); err != nil {
			t.Fatalf("writing what Read returned: %v", err)
		}
		again, meta2, err := Read(out)
		if err != nil {
			t.Fatalf("reading what Write wrote: %v", err)
		}
		if len(again) != len(got) || len(meta2) != len(meta) {
			t.Fatalf("round trip: %d tensors and %d metadata, want %d and %d", len(again), len(meta2), len(got), len(meta))
		}
		for k, v := range got {
			w := again[k]
			if w == nil || w.Dtype() != v.Dtype() || !w.Shape().Eq(v.Shape()) || string(w.Header.Raw) != string(v.Header.Raw) {
				t.Fatalf("round trip changed %q", k)
			}
		}
	})
}
