package onnx

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// FuzzImport gives Import any bytes, seeded with ONNX's node tests (the
// conformance suite's too, where installed) and PyTorch's exports: an error or a graph, never a panic or a huge
// allocation; a graph it builds (of values small enough to run here)
// runs on inputs of zeros to values or an error, never a panic.
func FuzzImport(f *testing.F) {
	paths, _ := filepath.Glob("testdata/*/*/model.onnx")
	// ONNX's conformance suite's node tests, where installed.
	suite, _ := filepath.Glob(filepath.Join(suiteDir, "node", "*", "model.onnx"))
	paths = append(paths, suite...)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Import(b, Options{Dims: map[string]int{"batch": 3}})
		if err != nil {
			return
		}
		if m.Graph == nil {
			t.Fatal("a model without a graph")
		}
		if err := runZeros(m); err != nil {
			t.Fatal(err)
		}
	})
}

// runZeros runs m on inputs of zeros, unless its values hold more than
// 1<<16 elements in all, and returns an error for a panic.
func runZeros(m *Model) (err error) {
	total := 0
	for _, n := range m.Graph.AllNodes() {
		total += n.Shape().TotalSize()
	}
	if total > 1<<16 {
		return nil
	}
	for _, n := range m.Inputs {
		if n.Value() != nil {
			continue
		}
		v := tensor.New(tensor.Of(n.Dtype()), tensor.WithShape(n.Shape().Clone()...))
		if n.IsScalar() {
			if err := gorgonia.Let(n, zeroScalar(n.Dtype())); err != nil {
				return nil
			}
			continue
		}
		if err := gorgonia.Let(n, v); err != nil {
			return nil
		}
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("running the imported graph panicked: %v", r)
		}
	}()
	vm := gorgonia.NewTapeMachine(m.Graph)
	defer vm.Close()
	_ = vm.RunAll() // an error is an answer; a panic is not
	return nil
}

func zeroScalar(dt tensor.Dtype) any {
	switch dt {
	case tensor.Float32:
		return float32(0)
	case tensor.Float64:
		return float64(0)
	case tensor.Int32:
		return int32(0)
	}
	return int64(0)
}
