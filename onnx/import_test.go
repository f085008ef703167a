package onnx

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/onnxpb"
)

// readTensor reads a TensorProto file of ONNX's node tests.
func readTensor(t *testing.T, path string) *tensor.Dense {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p onnxpb.TensorProto
	if err := proto.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	v, err := decode(&p)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// run gives m's inputs the values in and returns its outputs' values.
func run(t *testing.T, m *Model, in ...*tensor.Dense) []tensor.Tensor {
	t.Helper()
	if len(in) != len(m.Inputs) {
		t.Fatalf("%d values for %d inputs", len(in), len(m.Inputs))
	}
	for k, n := range m.Inputs {
		if err := gorgonia.Let(n, in[k]); err != nil {
			t.Fatal(err)
		}
	}
	vm := gorgonia.NewTapeMachine(m.Graph)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	out := make([]tensor.Tensor, len(m.Outputs))
	for k, n := range m.Outputs {
		out[k] = n.Value().(tensor.Tensor)
	}
	return out
}

// ONNX's own node tests of Gather and GatherElements (onnx 1.12's
// backend test data, opset 13): each model imported and run on its
// inputs gives its output exactly.
func TestNodeTests(t *testing.T) {
	dirs, err := filepath.Glob("testdata/node/test_*")
	if err != nil || len(dirs) < 7 {
		t.Fatalf("%d node tests: %v", len(dirs), err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			m, err := ReadFile(filepath.Join(dir, "model.onnx"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			var in []*tensor.Dense
			for k := range len(m.Inputs) {
				in = append(in, readTensor(t, filepath.Join(dir, "test_data_set_0", "input_"+string(rune('0'+k))+".pb")))
			}
			want := readTensor(t, filepath.Join(dir, "test_data_set_0", "output_0.pb"))
			got := run(t, m, in...)[0]
			if !got.Shape().Eq(want.Shape()) || !equalData(got.Data(), want.Data()) {
				t.Fatalf("got %v %v, want %v %v", got.Shape(), got.Data(), want.Shape(), want.Data())
			}
		})
	}
}

// equalData reports whether a and b hold the same values.
func equalData(a, b any) bool {
	switch x := a.(type) {
	case []float32:
		y, ok := b.([]float32)
		return ok && slices.Equal(x, y)
	case []float64:
		y, ok := b.([]float64)
		return ok && slices.Equal(x, y)
	case []int64:
		y, ok := b.([]int64)
		return ok && slices.Equal(x, y)
	}
	return false
}

// A model of an operator Import does not read is an error naming the
// node, the operator and the opset; so is an opset outside 13 to 17, and
// bytes that are no model are ErrFormat.
func TestImportRefuses(t *testing.T) {
	b, err := os.ReadFile("testdata/node/test_gather_0/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(b, &mp); err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m *onnxpb.ModelProto)) []byte {
		m := proto.Clone(&mp).(*onnxpb.ModelProto)
		f(m)
		out, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	_, err = Import(edit(func(m *onnxpb.ModelProto) { m.Graph.Node[0].OpType = ptr("Loop"); m.Graph.Node[0].Name = ptr("bags") }), Options{})
	if !errors.Is(err, errs.ErrOption) || !containsAll(err.Error(), `"bags"`, "Loop", "opset 13", "GatherElements") {
		t.Fatalf("an unknown operator: %v", err)
	}
	_, err = Import(edit(func(m *onnxpb.ModelProto) { m.OpsetImport[0].Version = ptr(int64(11)) }), Options{})
	if !errors.Is(err, errs.ErrOption) || !containsAll(err.Error(), "opset 11") {
		t.Fatalf("opset 11: %v", err)
	}
	if _, err := Import([]byte("not a model at all"), Options{}); !errors.Is(err, checkpoint.ErrFormat) {
		t.Fatalf("garbage: %v", err)
	}
	_, err = Import(edit(func(m *onnxpb.ModelProto) { m.Graph.Node[0].Input[1] = "nowhere" }), Options{})
	if !errors.Is(err, checkpoint.ErrFormat) || !containsAll(err.Error(), `"nowhere"`) {
		t.Fatalf("an undefined input: %v", err)
	}
	_, err = Import(edit(func(m *onnxpb.ModelProto) {
		d := m.Graph.Input[0].Type.GetTensorType().Shape.Dim[0]
		d.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "batch"}
	}), Options{})
	if !errors.Is(err, errs.ErrOption) || !containsAll(err.Error(), `"batch"`) {
		t.Fatalf("a symbolic dimension without a size: %v", err)
	}
	m, err := Import(edit(func(m *onnxpb.ModelProto) {
		d := m.Graph.Input[0].Type.GetTensorType().Shape.Dim[0]
		d.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "batch"}
	}), Options{Dims: map[string]int{"batch": 7}})
	if err != nil || m.Inputs[0].Shape()[0] != 7 {
		t.Fatalf("a symbolic dimension of 7: %v", err)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
