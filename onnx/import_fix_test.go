package onnx

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/onnxpb"
)

// model returns an ONNX model of opset 13 of nodes over the float inputs
// named in ins (of shapes shapes), with initializers inits, its output
// "y".
func model(t *testing.T, ins []string, shapes [][]int64, inits map[string]*tensor.Dense, nodes ...*onnxpb.NodeProto) []byte {
	t.Helper()
	g := &onnxpb.GraphProto{Name: ptr("t"), Node: nodes, Output: []*onnxpb.ValueInfoProto{{Name: ptr("y")}}}
	for k, name := range ins {
		var dims []*onnxpb.TensorShapeProto_Dimension
		for _, d := range shapes[k] {
			dims = append(dims, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
		g.Input = append(g.Input, &onnxpb.ValueInfoProto{Name: ptr(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: ptr(int32(onnxpb.TensorProto_FLOAT)), Shape: &onnxpb.TensorShapeProto{Dim: dims}}}}})
	}
	for name, v := range inits {
		p, err := encode(name, v)
		if err != nil {
			t.Fatal(err)
		}
		g.Initializer = append(g.Initializer, p)
	}
	b, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: ptr(int64(8)), OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: ptr(int64(13))}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func nodeOf(op string, in []string, out string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{OpType: &op, Name: ptr(op), Input: in, Output: []string{out}, Attribute: attrs}
}

func arange(shape ...int) *tensor.Dense {
	n := tensor.Shape(shape).TotalSize()
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i)
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
}

// ReduceSum and ReduceMean over the middle axes of a rank-4 input (a
// global average pooling) give numpy's values, and over a [1, 2, 1, 1]
// input they run.
func TestImportReduceMiddleAxes(t *testing.T) {
	axes := tensor.New(tensor.WithShape(2), tensor.WithBacking([]int64{2, 3}))
	b := model(t, []string{"x"}, [][]int64{{2, 3, 4, 5}}, map[string]*tensor.Dense{"axes": axes},
		nodeOf("ReduceSum", []string{"x", "axes"}, "y", intAttr("keepdims", 0)))
	m, err := Import(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := run(t, m, arange(2, 3, 4, 5))[0].Data().([]float32)
	want := []float32{190, 590, 990, 1390, 1790, 2190}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sum over (2, 3): %v, want %v", got, want)
		}
	}
	b = model(t, []string{"x"}, [][]int64{{2, 3, 4, 5}}, nil, nodeOf("ReduceMean", []string{"x"}, "y", intsAttr("axes", -2, -1)))
	if m, err = Import(b, Options{}); err != nil {
		t.Fatal(err)
	}
	out := run(t, m, arange(2, 3, 4, 5))[0]
	if !out.Shape().Eq(tensor.Shape{2, 3, 1, 1}) {
		t.Fatalf("mean keepdims: shape %v", out.Shape())
	}
	for i, v := range out.Data().([]float32) {
		if v != want[i]/20 {
			t.Fatalf("mean over (2, 3): %v, want %v/20", out.Data(), want)
		}
	}
	b = model(t, []string{"x"}, [][]int64{{1, 2, 1, 1}}, nil, nodeOf("ReduceMean", []string{"x"}, "y", intsAttr("axes", 2, 3), intAttr("keepdims", 0)))
	if m, err = Import(b, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := run(t, m, arange(1, 2, 1, 1))[0].Data().([]float32); got[0] != 0 || got[1] != 1 {
		t.Fatalf("mean of [1, 2, 1, 1] over (2, 3): %v", got)
	}
}

// Flatten counts a negative axis from the back, as ONNX does: axis -1 of
// [2, 3, 4] is [6, 4].
func TestImportFlattenNegative(t *testing.T) {
	for _, c := range []struct {
		axis  int64
		shape tensor.Shape
	}{{-1, tensor.Shape{6, 4}}, {-2, tensor.Shape{2, 12}}, {-3, tensor.Shape{1, 24}}, {3, tensor.Shape{24, 1}}} {
		m, err := Import(model(t, []string{"x"}, [][]int64{{2, 3, 4}}, nil, nodeOf("Flatten", []string{"x"}, "y", intAttr("axis", c.axis))), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !m.Outputs[0].Shape().Eq(c.shape) {
			t.Errorf("axis %d: %v, want %v", c.axis, m.Outputs[0].Shape(), c.shape)
		}
	}
	_, err := Import(model(t, []string{"x"}, [][]int64{{2, 3, 4}}, nil, nodeOf("Flatten", []string{"x"}, "y", intAttr("axis", -4))), Options{})
	if !errors.Is(err, errs.ErrAxisOutOfRange) || !containsAll(err.Error(), "axis -4", "rank 3") {
		t.Fatalf("axis -4: %v", err)
	}
}

// An attribute Import does not read is refused, named with its operator:
// ReduceSum's axes are an input from opset 13, not an attribute.
func TestImportRefusesAttribute(t *testing.T) {
	for _, n := range []*onnxpb.NodeProto{
		nodeOf("ReduceSum", []string{"x"}, "y", intsAttr("axes", 1)),
		nodeOf("Relu", []string{"x"}, "y", intAttr("alpha", 1)),
		nodeOf("Gemm", []string{"x", "x"}, "y", intAttr("transB", 1), intAttr("broadcast", 1)),
	} {
		_, err := Import(model(t, []string{"x"}, [][]int64{{2, 2}}, nil, n), Options{})
		if !errors.Is(err, errs.ErrOption) || !containsAll(err.Error(), n.GetOpType(), "attribute", n.Attribute[len(n.Attribute)-1].GetName()) {
			t.Errorf("%s with %s: %v", n.GetOpType(), n.Attribute[len(n.Attribute)-1].GetName(), err)
		}
	}
}

// An initializer named as a graph input is that input's default: the
// model runs with it, and Let gives the input another value.
func TestImportInputDefault(t *testing.T) {
	b := model(t, []string{"x", "w"}, [][]int64{{2, 2}, {2, 2}}, map[string]*tensor.Dense{"w": f32([]int{2, 2}, 1, 2, 3, 4)},
		nodeOf("Add", []string{"x", "w"}, "y"))
	m, err := Import(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Inputs) != 2 || m.Inputs[1].Name() != "w" {
		t.Fatalf("inputs %v, want x and w", m.Inputs)
	}
	if err := gorgonia.Let(m.Inputs[0], f32([]int{2, 2}, 10, 10, 10, 10)); err != nil {
		t.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(m.Graph)
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	vm.Close()
	if got := m.Outputs[0].Value().Data().([]float32); got[0] != 11 || got[3] != 14 {
		t.Fatalf("with the default: %v", got)
	}
	got := run(t, m, f32([]int{2, 2}, 10, 10, 10, 10), f32([]int{2, 2}, 0, 0, 0, 1))[0].Data().([]float32)
	if got[0] != 10 || got[3] != 11 {
		t.Fatalf("with another value: %v", got)
	}
}

// Options.Padding names a table's padding row: its Gather sends that row
// no gradient, dense or sparse; a name that is no initializer, a table
// that is not a matrix and a row outside it are errors.
func TestImportPadding(t *testing.T) {
	table := f32([]int{4, 2}, 1, 2, 3, 4, 5, 6, 7, 8)
	ids := tensor.New(tensor.WithShape(3), tensor.WithBacking([]int64{0, 3, 1}))
	build := func() []byte {
		b := model(t, nil, nil, map[string]*tensor.Dense{"emb": table, "ids": ids}, nodeOf("Gather", []string{"emb", "ids"}, "y"))
		return b
	}
	for _, pad := range []int{3, -1} {
		m, err := Import(build(), Options{Padding: map[string]int{"emb": pad}})
		if err != nil {
			t.Fatal(err)
		}
		cost, err := gorgonia.Sum(m.Outputs[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gorgonia.Grad(cost, m.Params[0]); err != nil {
			t.Fatal(err)
		}
		vm := gorgonia.NewTapeMachine(m.Graph)
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		vm.Close()
		gv, _ := m.Params[0].Grad()
		g := gv.Data().([]float32)
		want := []float32{1, 1, 1, 1, 0, 0, 0, 0}
		for i := range want {
			if math.Abs(float64(g[i]-want[i])) > 0 {
				t.Fatalf("padding %d: gradient %v, want %v", pad, g, want)
			}
		}
	}
	m, err := Import(build(), Options{Sparse: []string{"emb"}, Padding: map[string]int{"emb": 3}})
	if err != nil {
		t.Fatal(err)
	}
	emb := m.Embeddings["emb"]
	cost, err := gorgonia.Sum(m.Outputs[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gorgonia.Grad(cost, emb.GradNodes()...); err != nil {
		t.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(m.Graph)
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	vm.Close()
	rg, err := emb.RowGrad()
	if err != nil {
		t.Fatal(err)
	}
	if len(rg.Rows) != 2 || rg.Rows[0] != 0 || rg.Rows[1] != 1 {
		t.Fatalf("the sparse table's gradient rows are %v, want 0 and 1 (3 is padding)", rg.Rows)
	}
	for _, c := range []struct {
		pad  map[string]int
		want error
		text string
	}{
		{map[string]int{"nothing": 0}, errs.ErrOption, `"nothing"`},
		{map[string]int{"ids": 0}, errs.ErrOption, `"ids"`},
		{map[string]int{"emb": 4}, errs.ErrIndexOutOfRange, "padding row 4"},
		{map[string]int{"emb": -5}, errs.ErrIndexOutOfRange, "padding row -5"},
	} {
		if _, err := Import(build(), Options{Padding: c.pad}); !errors.Is(err, c.want) || !containsAll(err.Error(), c.text) {
			t.Errorf("%v: %v", c.pad, err)
		}
	}
}

// Errors say what is wrong: an empty file is ErrFormat; a Loop (PyTorch's
// EmbeddingBag export) is an operator Import does not read, named with
// its opset, before the BOOL constant its body uses; a size of 0 or -3 in
// Options.Dims is named with its value.
func TestImportErrorsTellTheTruth(t *testing.T) {
	if _, err := Import(nil, Options{}); !errors.Is(err, checkpoint.ErrFormat) || !containsAll(err.Error(), "empty") {
		t.Errorf("an empty file: %v", err)
	}
	boolConst := &onnxpb.NodeProto{OpType: ptr("Constant"), Name: ptr("cond"), Output: []string{"cond"}, Attribute: []*onnxpb.AttributeProto{{
		Name: ptr("value"), Type: onnxpb.AttributeProto_TENSOR.Enum(),
		T: &onnxpb.TensorProto{Name: ptr("c"), DataType: ptr(int32(onnxpb.TensorProto_BOOL)), Int32Data: []int32{1}}}}}
	loop := nodeOf("Loop", []string{"", "cond"}, "y")
	_, err := Import(model(t, []string{"x"}, [][]int64{{2}}, nil, boolConst, loop), Options{})
	if !errors.Is(err, errs.ErrOption) || errors.Is(err, checkpoint.ErrFormat) || !containsAll(err.Error(), "Loop", "opset 13") {
		t.Errorf("a Loop: %v", err)
	}
	b := model(t, []string{"x"}, [][]int64{{2}}, nil, nodeOf("Relu", []string{"x"}, "y"))
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(b, &mp); err != nil {
		t.Fatal(err)
	}
	mp.Graph.Input[0].Type.GetTensorType().Shape.Dim[0].Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "batch"}
	b, _ = proto.Marshal(&mp)
	for _, v := range []int{0, -3} {
		_, err := Import(b, Options{Dims: map[string]int{"batch": v}})
		if !errors.Is(err, errs.ErrOption) || !containsAll(err.Error(), `"batch"`, fmt.Sprintf("size %d", v), "positive") {
			t.Errorf("Dims %d: %v", v, err)
		}
	}
}
