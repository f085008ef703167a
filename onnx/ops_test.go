package onnx

import (
	"math"
	"testing"

	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/onnxpb"
)

// oneNode returns an ONNX model of opset 13 of node over the input x
// ([2, 3] float) and the initializers inits, its output "y".
func oneNode(t *testing.T, node *onnxpb.NodeProto, inits map[string]*tensor.Dense, extra ...*onnxpb.NodeProto) []byte {
	t.Helper()
	x := &onnxpb.ValueInfoProto{Name: ptr("x"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
		ElemType: ptr(int32(onnxpb.TensorProto_FLOAT)), Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{
			{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 2}}, {Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 3}}}}}}}}
	g := &onnxpb.GraphProto{Name: ptr("t"), Input: []*onnxpb.ValueInfoProto{x}, Node: append(extra, node),
		Output: []*onnxpb.ValueInfoProto{{Name: ptr("y")}}}
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

func floatAttr(name string, v float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: &name, F: &v, Type: onnxpb.AttributeProto_FLOAT.Enum()}
}

func f32(shape []int, v ...float32) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
}

// The operators' attributes and forms, each in a model of its own, against
// values computed here: Gemm's alpha, beta, transA and transB with C
// broadcast; Reshape by a Constant with -1; ReduceSum's axes input and
// keepdims; ReduceMean's axes; Softmax; Sub and Div broadcast; MatMul;
// Transpose's perm; Flatten.
func TestOpForms(t *testing.T) {
	xv := []float32{1, -2, 3, 0.5, 4, -1} // x [2, 3]
	x := func(i, j int) float64 { return float64(xv[3*i+j]) }
	node := func(op string, in []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{OpType: &op, Name: ptr(op), Input: in, Output: []string{"y"}, Attribute: attrs}
	}
	b := f32([]int{2, 3}, 0.5, 1, -1, 2, 0, 1)
	bv := func(i, j int) float64 { return float64(b.Float32s()[3*i+j]) }
	cases := []struct {
		name  string
		model []byte
		shape tensor.Shape
		want  func(k int) float64
	}{
		{"Gemm", oneNode(t, node("Gemm", []string{"x", "b", "c"}, floatAttr("alpha", 2), floatAttr("beta", 0.5), intAttr("transB", 1)),
			map[string]*tensor.Dense{"b": b, "c": f32([]int{2}, 10, 20)}), tensor.Shape{2, 2},
			func(k int) float64 {
				i, j := k/2, k%2
				s := 0.0
				for d := range 3 {
					s += x(i, d) * bv(j, d)
				}
				return 2*s + 0.5*[]float64{10, 20}[j]
			}},
		{"Gemm transA", oneNode(t, node("Gemm", []string{"x", "b"}, intAttr("transA", 1)), map[string]*tensor.Dense{"b": b}), tensor.Shape{3, 3},
			func(k int) float64 {
				i, j := k/3, k%3
				return x(0, i)*bv(0, j) + x(1, i)*bv(1, j)
			}},
		{"Reshape", oneNode(t, node("Reshape", []string{"x", "shape"}), nil,
			&onnxpb.NodeProto{OpType: ptr("Constant"), Output: []string{"shape"}, Attribute: []*onnxpb.AttributeProto{{Name: ptr("value"), Type: onnxpb.AttributeProto_TENSOR.Enum(),
				T: must(encode("v", tensor.New(tensor.WithShape(2), tensor.WithBacking([]int64{3, -1}))))}}}), tensor.Shape{3, 2},
			func(k int) float64 { return float64(xv[k]) }},
		{"ReduceSum", oneNode(t, node("ReduceSum", []string{"x", "axes"}), map[string]*tensor.Dense{"axes": tensor.New(tensor.WithShape(1), tensor.WithBacking([]int64{-1}))}),
			tensor.Shape{2, 1}, func(k int) float64 { return x(k, 0) + x(k, 1) + x(k, 2) }},
		{"ReduceMean", oneNode(t, node("ReduceMean", []string{"x"}, intsAttr("axes", 0), intAttr("keepdims", 0)), nil),
			tensor.Shape{3}, func(k int) float64 { return (x(0, k) + x(1, k)) / 2 }},
		{"Softmax", oneNode(t, node("Softmax", []string{"x"}, intAttr("axis", 1)), nil), tensor.Shape{2, 3},
			func(k int) float64 {
				i, j := k/3, k%3
				return math.Exp(x(i, j)) / (math.Exp(x(i, 0)) + math.Exp(x(i, 1)) + math.Exp(x(i, 2)))
			}},
		{"Sub", oneNode(t, node("Sub", []string{"x", "c"}), map[string]*tensor.Dense{"c": f32([]int{3}, 1, 2, 3)}), tensor.Shape{2, 3},
			func(k int) float64 { return float64(xv[k]) - float64(k%3+1) }},
		{"Div", oneNode(t, node("Div", []string{"x", "c"}), map[string]*tensor.Dense{"c": tensor.New(tensor.FromScalar(float32(4)))}), tensor.Shape{2, 3},
			func(k int) float64 { return float64(xv[k]) / 4 }},
		{"MatMul", oneNode(t, node("MatMul", []string{"x", "w"}), map[string]*tensor.Dense{"w": f32([]int{3, 1}, 1, 1, 1)}), tensor.Shape{2, 1},
			func(k int) float64 { return x(k, 0) + x(k, 1) + x(k, 2) }},
		{"Transpose", oneNode(t, node("Transpose", []string{"x"}, intsAttr("perm", 1, 0)), nil), tensor.Shape{3, 2},
			func(k int) float64 { return x(k%2, k/2) }},
		{"Flatten", oneNode(t, node("Flatten", []string{"x"}, intAttr("axis", 0)), nil), tensor.Shape{1, 6},
			func(k int) float64 { return float64(xv[k]) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Import(c.model, Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := run(t, m, f32([]int{2, 3}, xv...))[0]
			if !got.Shape().Eq(c.shape) {
				t.Fatalf("shape %v, want %v", got.Shape(), c.shape)
			}
			for k, v := range got.Data().([]float32) {
				if w := c.want(k); math.Abs(float64(v)-w) > 1e-6 {
					t.Fatalf("value %d: %v, want %v (all: %v)", k, v, w, got.Data())
				}
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
