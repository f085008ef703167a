package onnx

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gathergrad/gather/table/driver"

	"google.golang.org/protobuf/proto"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/graphop"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/onnxpb"
)

// ExportOpset is the opset of the default domain Export writes.
const ExportOpset = 13

// A Graph is what Export writes: the nodes that are the model's inputs
// (given values at each run), its outputs and their names (the nodes'
// names where OutputNames is nil). Every other leaf the outputs depend on
// is written with its value, as an initializer under its node's name:
// learnables (a Model's Params, an nn.Embedding's table) and constants.
type Graph struct {
	Inputs      []*gorgonia.Node
	Outputs     []*gorgonia.Node
	OutputNames []string
	// Half stores the float32 leaves it names in a half format
	// (driver.Float16 or driver.BFloat16, rounded to nearest), each read
	// through a Cast to float: half the bytes, as PyTorch's .half() or
	// .bfloat16() weights.
	Half map[*gorgonia.Node]driver.Format
}

// Export writes g to path as an ONNX model of opset 13 that ONNX Runtime
// runs: the nodes of this module's Gather, GatherElements, nn.Linear
// (Gemm), nn.Concat, nn.LogSoftmax, nn.Sum (ReduceSum) and nn.Mean
// (ReduceMean), and Gorgonia's ops, recognised by their types:
// element-wise Add, Sub, Mul and Div (of one shape, by a scalar, or
// broadcast by gorgonia.BroadcastAdd and its kin, written as ONNX's own
// broadcasting), Neg, Exp, Log, Tanh, Sigmoid, Rectify (Relu), Reshape,
// Transpose, Sum (ReduceSum), Mean (a ReduceSum divided by a constant of
// the graph's sizes), and products: gorgonia.Mul of matrices (Gemm when
// transposed, else MatMul), of a matrix and a vector and of vectors, and
// BatchedMatMul (MatMul). Every node Export writes is one Import reads
// back. nn.EmbeddingBag,
// in every mode, by offsets or by rows of ids, with per-sample weights and
// a padding id, is written as a composition of standard operators
// (Gather, Mul, Unsqueeze, Shape, Expand, Cast, Equal, Not,
// GreaterOrEqual, Greater, Slice, ReduceSum, ReduceMax, MatMul, Max, Div,
// Where), which ONNX Runtime runs; its nodes' doc strings mark it, and
// Import reads it back as one nn.EmbeddingBag. Losses and
// optimiser state, which only training needs, are not written: name the
// outputs. A node of another op is an error naming it and its op, and
// nothing is written. Every value keeps the shape it has in g (the
// file's dimensions are fixed: a batch dimension is g's batch). The file
// is written whole or not at all (a temporary file, synced and renamed
// over path).
func Export(path string, g Graph) error {
	b, err := marshal(g)
	if err != nil {
		return err
	}
	return fileio.WriteAtomic(path, func(f *os.File) error {
		_, err := f.Write(b)
		return err
	})
}

// marshal returns g as the bytes of an ONNX model.
func marshal(g Graph) ([]byte, error) {
	if len(g.Outputs) == 0 || (g.OutputNames != nil && len(g.OutputNames) != len(g.Outputs)) {
		return nil, fmt.Errorf("onnx: Export needs outputs, and a name for each if any: %w", errs.ErrOption)
	}
	e := &exporter{names: map[*gorgonia.Node]string{}, inputs: map[*gorgonia.Node]bool{}, half: g.Half, gp: &onnxpb.GraphProto{Name: ptr("gathergrad")}}
	for _, n := range g.Inputs {
		e.inputs[n] = true
		e.names[n] = n.Name()
		vi, err := valueInfo(n.Name(), n)
		if err != nil {
			return nil, err
		}
		e.gp.Input = append(e.gp.Input, vi)
	}
	for k, n := range g.Outputs {
		name, err := e.visit(n)
		if err != nil {
			return nil, err
		}
		if g.OutputNames != nil && g.OutputNames[k] != name {
			e.gp.Node = append(e.gp.Node, &onnxpb.NodeProto{OpType: ptr("Identity"), Input: []string{name}, Output: []string{g.OutputNames[k]}, Name: ptr(g.OutputNames[k])})
			name = g.OutputNames[k]
		}
		vi, err := valueInfo(name, n)
		if err != nil {
			return nil, err
		}
		e.gp.Output = append(e.gp.Output, vi)
	}
	m := &onnxpb.ModelProto{
		IrVersion:    ptr(int64(8)),
		ProducerName: ptr("gathergrad"),
		OpsetImport:  []*onnxpb.OperatorSetIdProto{{Domain: ptr(""), Version: ptr(int64(ExportOpset))}},
		Graph:        e.gp,
	}
	return proto.Marshal(m)
}

// exporter writes one graph.
type exporter struct {
	names  map[*gorgonia.Node]string // the value name of each node written
	inputs map[*gorgonia.Node]bool
	half   map[*gorgonia.Node]driver.Format
	gp     *onnxpb.GraphProto
	next   int
}

// valueInfo describes n's value, named name.
func valueInfo(name string, n *gorgonia.Node) (*onnxpb.ValueInfoProto, error) {
	et, ok := elemType(n.Dtype())
	if !ok {
		return nil, fmt.Errorf("onnx: node %q: dtype %v: Export writes float32, float64, int64 and int32 values: %w", name, n.Dtype(), errs.ErrDtype)
	}
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range n.Shape() {
		shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(d)}})
	}
	return &onnxpb.ValueInfoProto{Name: &name, Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: ptr(int32(et)), Shape: shape}}}}, nil
}

// visit writes n and what it depends on, and returns n's value name.
func (e *exporter) visit(n *gorgonia.Node) (string, error) {
	if name, ok := e.names[n]; ok {
		return name, nil
	}
	op := n.Op()
	if op == nil || strings.HasPrefix(graphop.TypeName(op), "gorgonia.constant") {
		return e.initializer(n)
	}
	if o, ok := op.(graphop.Through); ok {
		name, err := e.visit(children(n)[o.Through()])
		if err != nil {
			return "", err
		}
		e.names[n] = name
		return name, nil
	}
	if x, ok := relu(n); ok {
		in, err := e.visit(x)
		if err != nil {
			return "", err
		}
		return e.node(n, "Relu", nil, in)
	}
	if v, ok := folded(n); ok {
		name, err := e.constant(v)
		if err != nil {
			return "", err
		}
		return e.finish(n, name)
	}
	if r, ok := op.(graphop.Reduce); ok {
		return e.reduce(n, r)
	}
	if k, ok := graphop.ElemBinary(op); ok && k <= graphop.BinDiv {
		return e.binary(n, k)
	}
	if graphop.TypeName(op) == "gorgonia.repeatOp" {
		return "", fmt.Errorf("onnx: node %q: a gorgonia.Repeat: Export writes the repeats of a broadcast (gorgonia.BroadcastAdd and its kin), not a repeat on its own: %w", n.Name(), errs.ErrOption)
	}
	in := make([]string, len(children(n)))
	for k, c := range children(n) {
		name, err := e.visit(c)
		if err != nil {
			return "", err
		}
		in[k] = name
	}
	if o, ok := op.(graphop.ONNXOp); ok {
		t, attrs := o.ONNX()
		return e.node(n, t, attrs, in...)
	}
	if o, ok := op.(graphop.Bag); ok {
		return e.bag(n, o.BagSpec(), in)
	}
	name, err := e.gorgonia(n, in)
	if err != nil {
		return "", fmt.Errorf("onnx: node %q: %w", n.Name(), err)
	}
	return name, nil
}

// initializer writes the value of the leaf n under its name.
func (e *exporter) initializer(n *gorgonia.Node) (string, error) {
	v, ok := n.Value().(*tensor.Dense)
	if !ok {
		if s, isScalar := n.Value().(gorgonia.Scalar); isScalar {
			v = tensor.New(tensor.FromScalar(s.Data()))
		} else {
			return "", fmt.Errorf("onnx: node %q is a leaf without a value, and not one of the inputs: %w", n.Name(), errs.ErrOption)
		}
	}
	name := n.Name()
	if n.Op() != nil { // a constant: named afresh
		name = e.fresh("const")
	}
	if f, ok := e.half[n]; ok {
		return e.halfInitializer(n, name, v, f)
	}
	t, err := encode(name, v)
	if err != nil {
		return "", err
	}
	e.gp.Initializer = append(e.gp.Initializer, t)
	e.names[n] = name
	return name, nil
}

// halfInitializer writes v, the value of the leaf n, as an initializer
// name of half values f, and a Cast of it to float, n's value.
func (e *exporter) halfInitializer(n *gorgonia.Node, name string, v *tensor.Dense, f driver.Format) (string, error) {
	et, hf := onnxpb.TensorProto_FLOAT16, kernel.Float16
	switch {
	case f == driver.BFloat16:
		et, hf = onnxpb.TensorProto_BFLOAT16, kernel.BFloat16
	case f != driver.Float16:
		return "", fmt.Errorf("onnx: node %q: Graph.Half gives %v; it takes Float16 or BFloat16: %w", name, f, errs.ErrOption)
	}
	x, ok := v.Data().([]float32)
	if !ok {
		return "", fmt.Errorf("onnx: node %q holds %v; Graph.Half stores float32 values: %w", name, v.Dtype(), errs.ErrDtype)
	}
	t := &onnxpb.TensorProto{Name: &name, DataType: ptr(int32(et)), RawData: make([]byte, 2*len(x))}
	for _, d := range v.Shape() {
		t.Dims = append(t.Dims, int64(d))
	}
	kernel.ToHalf(hf, t.RawData, x)
	e.gp.Initializer = append(e.gp.Initializer, t)
	return e.finish(n, e.emit("Cast", []*onnxpb.AttributeProto{intAttr("to", int64(onnxpb.TensorProto_FLOAT))}, name))
}

// constant writes v as an initializer of a name of its own.
func (e *exporter) constant(v *tensor.Dense) (string, error) {
	name := e.fresh("const")
	t, err := encode(name, v)
	if err != nil {
		return "", err
	}
	e.gp.Initializer = append(e.gp.Initializer, t)
	return name, nil
}

// node writes the node of n: op type t, attributes attrs, inputs in.
func (e *exporter) node(n *gorgonia.Node, t string, attrs map[string]int64, in ...string) (string, error) {
	var as []*onnxpb.AttributeProto
	for _, k := range sortedKeys(attrs) {
		as = append(as, intAttr(k, attrs[k]))
	}
	return e.finish(n, e.emit(t, as, in...))
}

// fresh returns a new value name starting with what.
func (e *exporter) fresh(what string) string {
	e.next++
	return fmt.Sprintf("%s_%d", what, e.next)
}

// relu returns x if n is Gorgonia's Rectify of x: x ⊙ (x >= 0).
func relu(n *gorgonia.Node) (*gorgonia.Node, bool) {
	if k, ok := graphop.ElemBinary(n.Op()); !ok || k != graphop.BinMul || len(children(n)) != 2 {
		return nil, false
	}
	x, c := children(n)[0], children(n)[1]
	if k, ok := graphop.ElemBinary(c.Op()); !ok || k != graphop.BinGte || len(children(c)) != 2 || children(c)[0] != x {
		return nil, false
	}
	z, ok := children(c)[1].Value().(gorgonia.Scalar)
	if !ok {
		return nil, false
	}
	switch v := z.Data().(type) {
	case float32:
		return x, v == 0
	case float64:
		return x, v == 0
	}
	return nil, false
}

// gorgonia writes the node of n, of a Gorgonia op, whose inputs have the
// value names in, or returns an error naming the op.
func (e *exporter) gorgonia(n *gorgonia.Node, in []string) (string, error) {
	op := n.Op()
	sym := op.String()
	switch graphop.TypeName(op) {
	case "gorgonia.elemUnaryOp":
		if t, ok := map[string]string{"neg": "Neg", "exp": "Exp", "ln": "Log", "tanh": "Tanh", "sigmoid": "Sigmoid"}[sym]; ok {
			return e.node(n, t, nil, in...)
		}
	case "gorgonia.reshapeOp":
		to := make([]int64, len(n.Shape()))
		for k, d := range n.Shape() {
			to[k] = int64(d)
		}
		shape, err := e.constant(tensor.New(tensor.WithShape(len(to)), tensor.WithBacking(to)))
		if err != nil {
			return "", err
		}
		return e.node(n, "Reshape", nil, in[0], shape)
	case "gorgonia.linAlgBinOp":
		return e.product(n, in)
	case "gorgonia.transposeOp":
		if perm, ok := graphop.Ints(op, "pattern"); ok {
			return e.finish(n, e.emit("Transpose", []*onnxpb.AttributeProto{intsAttr("perm", int64s(perm)...)}, in...))
		}
	case "gorgonia.sumOp":
		if axes, ok := graphop.Ints(op, "along"); ok {
			a, err := e.constant(tensor.New(tensor.WithShape(len(axes)), tensor.WithBacking(int64s(axes))))
			if err != nil {
				return "", err
			}
			return e.node(n, "ReduceSum", map[string]int64{"keepdims": 0}, in[0], a)
		}
	}
	return "", fmt.Errorf("op %s (%s): Export writes %s: %w", sym, graphop.TypeName(op), strings.Join(exportOps, ", "), errs.ErrOption)
}

// exportOps are the ops Export writes, for its errors.
var exportOps = []string{"Gather", "GatherElements", "nn.EmbeddingBag", "nn.Linear", "nn.Concat", "nn.LogSoftmax", "nn.Sum", "nn.Mean",
	"+", "-", "⊙", "÷ (broadcast or not)", "neg", "exp", "ln", "tanh", "sigmoid", "Rectify", "Reshape",
	"Transpose", "Sum", "Mean", "Mul and BatchedMatMul (but outer products)"}

// int64s returns v as int64s.
func int64s(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// binary writes n, a Gorgonia element-wise Add, Sub, HadamardProd or
// HadamardDiv (op k): of its inputs as they are, or, where they are the
// repeats a Broadcast op made, of what was repeated, which ONNX
// broadcasts as numpy does.
func (e *exporter) binary(n *gorgonia.Node, k int) (string, error) {
	in := make([]string, 2)
	for i, c := range children(n) {
		base := c
		for graphop.TypeName(base.Op()) == "gorgonia.repeatOp" {
			base = children(base)[0]
		}
		if base != c && !broadcastsTo(base.Shape(), n.Shape()) {
			return "", fmt.Errorf("onnx: node %q: a repeat of %v to %v, which is not a broadcast (sizes 1 repeated): %w", n.Name(), base.Shape(), c.Shape(), errs.ErrOption)
		}
		name, err := e.visit(base)
		if err != nil {
			return "", err
		}
		in[i] = name
	}
	return e.node(n, [...]string{"Add", "Sub", "Mul", "Div"}[k], nil, in...)
}

// broadcastsTo reports whether a value of shape s broadcasts to shape to
// by repeating its axes of size 1 (or is a scalar).
func broadcastsTo(s, to tensor.Shape) bool {
	if s.IsScalar() || s.TotalSize() == 1 && len(s) <= len(to) {
		return true
	}
	if len(s) != len(to) {
		return false
	}
	for k := range s {
		if s[k] != to[k] && s[k] != 1 {
			return false
		}
	}
	return true
}

// product writes n, a Gorgonia matrix product (Mul, BatchedMatMul), as
// MatMul, its transposed inputs through Transpose, or Gemm for matrices.
func (e *exporter) product(n *gorgonia.Node, in []string) (string, error) {
	kind, ta, tb, ok := graphop.LinAlg(n.Op())
	a, b := children(n)[0], children(n)[1]
	if !ok || kind == graphop.OuterProd {
		return "", fmt.Errorf("onnx: node %q: the product %s: Export writes matrix, matrix-vector, dot and batched products: %w", n.Name(), n.Op(), errs.ErrOption)
	}
	if kind == graphop.MatMul && (ta || tb) {
		return e.node(n, "Gemm", map[string]int64{"transA": b2i(ta), "transB": b2i(tb)}, in...)
	}
	for i, t := range []bool{ta, tb} {
		x := []*gorgonia.Node{a, b}[i]
		if !t || x.Dims() < 2 {
			continue
		}
		perm := make([]int64, x.Dims())
		for k := range perm {
			perm[k] = int64(k)
		}
		perm[len(perm)-1], perm[len(perm)-2] = perm[len(perm)-2], perm[len(perm)-1]
		in[i] = e.emit("Transpose", []*onnxpb.AttributeProto{intsAttr("perm", perm...)}, in[i])
	}
	return e.node(n, "MatMul", nil, in...)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// reduce writes n, nn.Sum's or nn.Mean's node, as ReduceSum (its axes a
// constant input) or ReduceMean (its axes an attribute).
func (e *exporter) reduce(n *gorgonia.Node, r graphop.Reduce) (string, error) {
	x, err := e.visit(children(n)[0])
	if err != nil {
		return "", err
	}
	mean, axes, keep := r.Reduction()
	attrs := []*onnxpb.AttributeProto{intAttr("keepdims", b2i(keep))}
	if mean {
		return e.finish(n, e.emit("ReduceMean", append(attrs, intsAttr("axes", int64s(axes)...)), x))
	}
	a, err := e.constant(tensor.New(tensor.WithShape(len(axes)), tensor.WithBacking(int64s(axes))))
	if err != nil {
		return "", err
	}
	return e.finish(n, e.emit("ReduceSum", attrs, x, a))
}

// folded returns the value of n if it is a float scalar known from the
// graph's shapes and constants alone: a gorgonia.SizeOf, a constant, or
// the Add, Sub, HadamardProd or HadamardDiv of two such (gorgonia.Mean's
// count of elements over several axes is a product of sizes).
func folded(n *gorgonia.Node) (*tensor.Dense, bool) {
	v, ok := constScalar(n, 0)
	if !ok || n.Op() == nil || !n.IsScalar() {
		return nil, false
	}
	if graphop.TypeName(n.Op()) != "gorgonia.sizeOp" {
		if _, bin := graphop.ElemBinary(n.Op()); !bin {
			return nil, false
		}
	}
	switch n.Dtype() {
	case tensor.Float32:
		return tensor.New(tensor.FromScalar(float32(v))), true
	case tensor.Float64:
		return tensor.New(tensor.FromScalar(v)), true
	}
	return nil, false
}

// constScalar returns the value of the float scalar n if the graph's shapes
// and constants alone give it, looking depth nodes deep at most.
func constScalar(n *gorgonia.Node, depth int) (float64, bool) {
	if depth > 16 || !n.IsScalar() || (n.Dtype() != tensor.Float32 && n.Dtype() != tensor.Float64) {
		return 0, false
	}
	op := n.Op()
	switch {
	case op == nil:
		return 0, false // a leaf: an input or a learnable, not a constant
	case strings.HasPrefix(graphop.TypeName(op), "gorgonia.constant"):
		s, ok := n.Value().(gorgonia.Scalar)
		if !ok {
			return 0, false
		}
		switch v := s.Data().(type) {
		case float32:
			return float64(v), true
		case float64:
			return v, true
		}
		return 0, false
	case graphop.TypeName(op) == "gorgonia.sizeOp":
		axis, ok := graphop.Int(op, "axis")
		c := children(n)
		if !ok || len(c) != 1 || axis < 0 || axis >= c[0].Dims() {
			return 0, false
		}
		return float64(c[0].Shape()[axis]), true
	}
	k, ok := graphop.ElemBinary(op)
	c := children(n)
	if !ok || k > graphop.BinDiv || len(c) != 2 {
		return 0, false
	}
	a, ok := constScalar(c[0], depth+1)
	if !ok {
		return 0, false
	}
	b, ok := constScalar(c[1], depth+1)
	if !ok {
		return 0, false
	}
	if n.Dtype() == tensor.Float32 { // as the graph computes it
		x, y := float32(a), float32(b)
		return float64([...]float32{x + y, x - y, x * y, x / y}[k]), true
	}
	return [...]float64{a + b, a - b, a * b, a / b}[k], true
}

// parseInts returns the integers of s between prefix and suffix,
// separated by spaces or commas.
func parseInts(s, prefix, suffix string) ([]int64, bool) {
	body, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return nil, false
	}
	if body, ok = strings.CutSuffix(body, suffix); !ok {
		return nil, false
	}
	var out []int64
	for _, f := range strings.FieldsFunc(body, func(r rune) bool { return r == ' ' || r == ',' }) {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, false
		}
		out = append(out, v)
	}
	return out, true
}

// children returns the inputs of n's op, in order.
func children(n *gorgonia.Node) []*gorgonia.Node {
	var out []*gorgonia.Node
	it := n.Graph().From(n.ID())
	for it.Next() {
		out = append(out, it.Node().(*gorgonia.Node))
	}
	return out
}
