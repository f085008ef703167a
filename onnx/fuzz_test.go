package onnx

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzImport gives Import any bytes, seeded with ONNX's node tests and
// PyTorch's exports: an error or a graph, never a panic or a huge
// allocation.
func FuzzImport(f *testing.F) {
	paths, _ := filepath.Glob("testdata/*/*/model.onnx")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Import(b, Options{Dims: map[string]int{"batch": 3}})
		if err == nil && m.Graph == nil {
			t.Fatal("a model without a graph")
		}
	})
}
