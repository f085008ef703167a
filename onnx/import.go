package onnx

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/onnxpb"
	"github.com/gathergrad/gather/nn"
)

// MaxFileBytes bounds the size of a model file ReadFile reads: 2 GiB, the
// most a protobuf message holds.
const MaxFileBytes = 2 << 30

// The opsets of the default domain Import reads: the operators of
// opsets 13 to 17 as this package implements them (their opset-13
// forms, which 14 to 17 kept for these operators).
const (
	MinOpset = 13
	MaxOpset = 17
)

// Options configure Import.
type Options struct {
	// Dims gives the size of each symbolic dimension (dim_param, such as
	// the "batch" a PyTorch export's dynamic_axes names) of the graph's
	// inputs: a Gorgonia graph has fixed shapes.
	Dims map[string]int
	// Sparse names initializers to import as row-sparse embedding tables
	// (nn.NewEmbedding with nn.WithSparse, started from the initializer's
	// values): each Gather of one along axis 0 is its Lookup, stepped
	// row by row (Model.Embeddings). An initializer named here that is
	// not a matrix, or that a node uses otherwise, is an error.
	Sparse []string
	// Padding names the padding row (PyTorch's padding_idx) of tables
	// among the initializers, by initializer name: each Gather of the
	// table along axis 0 sends that row no gradient, so that fine-tuning
	// leaves it as the file has it, as PyTorch's nn.Embedding does. A
	// negative row counts from the end. A PyTorch export writes a padded
	// nn.Embedding as a plain Gather, so the file cannot say it: name it
	// here. The tables may be dense or named in Sparse too; an initializer
	// named here that is not a float matrix, or a row outside it, is an
	// error.
	Padding map[string]int
}

// A Model is an ONNX model as a Gorgonia graph.
type Model struct {
	Graph *gorgonia.ExprGraph
	// Inputs are the graph's inputs, in the file's order, named as there,
	// without values: give each one (gorgonia.Let) before a run.
	Inputs []*gorgonia.Node
	// Outputs are the graph's outputs, in the file's order.
	Outputs []*gorgonia.Node
	// Params are the initializers of float values, named as in the file
	// (PyTorch's state_dict names): learnable nodes that Gorgonia's
	// solvers, nn and optim train and checkpoint.Nodes saves. Integer
	// initializers (shapes, indices) are constants of the graph.
	Params []*gorgonia.Node
	// Embeddings are the tables Options.Sparse named, by name: row-sparse
	// (Embedding.Step with an optim.Sparse), not among Params.
	Embeddings map[string]*nn.Embedding
	// Opset is the version of the default domain the file imports.
	Opset int64
}

// ReadFile imports the ONNX model file at path (Import). A file larger
// than MaxFileBytes is an error wrapping checkpoint.ErrFormat, read no
// further.
func ReadFile(path string, o Options) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > MaxFileBytes {
		return nil, fmt.Errorf("onnx: %s holds %d bytes, more than a model's %d: %w", path, fi.Size(), int64(MaxFileBytes), checkpoint.ErrFormat)
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("onnx: %s: %w", path, err)
	}
	m, err := Import(b, o)
	if err != nil {
		return nil, fmt.Errorf("onnx: %s: %w", path, err)
	}
	return m, nil
}

// Import builds the graph of b, an ONNX model (a ModelProto), in a new
// Gorgonia graph, with this module's Gather and GatherElements and
// Gorgonia's ops (Ops lists the operators it reads). Bytes that are not a
// model, a tensor whose values do not fit its shape, or a graph whose
// nodes name values it does not define are errors wrapping
// checkpoint.ErrFormat; an operator it does not read, or an attribute of
// a value it does not implement, is an error wrapping gather.ErrOption
// naming the node, its operator and the opset.
func Import(b []byte, o Options) (*Model, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("onnx: no bytes: an empty file is not a model: %w", checkpoint.ErrFormat)
	}
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(b, &mp); err != nil {
		return nil, fmt.Errorf("onnx: not a model: %v: %w", err, checkpoint.ErrFormat)
	}
	opset := int64(-1)
	for _, s := range mp.GetOpsetImport() {
		if d := s.GetDomain(); d == "" || d == "ai.onnx" {
			opset = s.GetVersion()
		}
	}
	if opset < 0 || mp.GetGraph() == nil {
		return nil, fmt.Errorf("onnx: not a model: no graph or no opset of the default domain: %w", checkpoint.ErrFormat)
	}
	if opset < MinOpset || opset > MaxOpset {
		return nil, fmt.Errorf("onnx: the model imports opset %d of the default domain; Import reads %d to %d: %w", opset, MinOpset, MaxOpset, errs.ErrOption)
	}
	gp := mp.GetGraph()
	// An operator Import does not read is named before any of the
	// values it would have read (a Loop's body, a BOOL constant).
	for _, np := range gp.GetNode() {
		if doc := np.GetDocString(); doc == bagPart || strings.HasPrefix(doc, bagMark) {
			continue
		}
		if err := readable(np, opset); err != nil {
			return nil, err
		}
	}
	bd := &builder{g: gorgonia.NewGraph(), values: map[string]*gorgonia.Node{}, consts: map[string]*tensor.Dense{}, opset: opset,
		sparse: map[*gorgonia.Node]*nn.Embedding{}, padding: map[*gorgonia.Node]int{}}
	m := &Model{Graph: bd.g, Opset: opset}
	for _, t := range gp.GetInitializer() {
		if t.GetDocString() == bagPart {
			continue // a constant of a bag's composition, which is read as one op
		}
		v, err := decode(t)
		if err != nil {
			return nil, err
		}
		if _, dup := bd.consts[t.GetName()]; dup || t.GetName() == "" {
			return nil, fmt.Errorf("onnx: initializer %q is unnamed or named twice: %w", t.GetName(), checkpoint.ErrFormat)
		}
		bd.consts[t.GetName()] = v
		if slices.Contains(o.Sparse, t.GetName()) {
			emb, err := sparseTable(bd.g, t.GetName(), v, o)
			if err != nil {
				return nil, err
			}
			bd.values[t.GetName()] = emb.Table
			bd.sparse[emb.Table] = emb
			if m.Embeddings == nil {
				m.Embeddings = map[string]*nn.Embedding{}
			}
			m.Embeddings[t.GetName()] = emb
			continue
		}
		n := bd.node(t.GetName(), v)
		if v.Dtype() == tensor.Float32 || v.Dtype() == tensor.Float64 {
			m.Params = append(m.Params, n)
		}
		if p, ok := o.Padding[t.GetName()]; ok {
			row, err := paddingRow(t.GetName(), v, p)
			if err != nil {
				return nil, err
			}
			bd.padding[n] = row
		}
	}
	for name := range o.Padding {
		if _, ok := bd.consts[name]; !ok {
			return nil, fmt.Errorf("onnx: Options.Padding names %q, which is no initializer: %w", name, errs.ErrOption)
		}
	}
	for _, name := range o.Sparse {
		if _, ok := m.Embeddings[name]; !ok {
			return nil, fmt.Errorf("onnx: Options.Sparse names %q, which is no initializer: %w", name, errs.ErrOption)
		}
	}
	for _, in := range gp.GetInput() {
		if _, init := bd.consts[in.GetName()]; init {
			// An initializer is the default value of an input of its name:
			// the input's node holds it until Let gives it another.
			n := bd.values[in.GetName()]
			if _, sparse := bd.sparse[n]; sparse {
				continue // a table stepped row by row is no input
			}
			if et := in.GetType().GetTensorType().GetElemType(); et != 0 {
				_, half := halfOf(et)
				if want, ok := elemType(n.Dtype()); !(ok && int32(want) == et) && !(half && n.Dtype() == tensor.Float32) {
					return nil, fmt.Errorf("onnx: input %q is of element type %v, its initializer %v: %w", in.GetName(), onnxpb.TensorProto_DataType(et), n.Dtype(), checkpoint.ErrFormat)
				}
			}
			m.Inputs = append(m.Inputs, n)
			continue
		}
		n, err := bd.input(in, o)
		if err != nil {
			return nil, err
		}
		m.Inputs = append(m.Inputs, n)
	}
	for _, np := range gp.GetNode() {
		var err error
		switch doc := np.GetDocString(); {
		case doc == bagPart:
			continue
		case strings.HasPrefix(doc, bagMark):
			err = bd.bag(np, strings.TrimPrefix(doc, bagMark))
		default:
			err = bd.apply(np)
		}
		if err != nil {
			return nil, err
		}
	}
	if len(gp.GetOutput()) == 0 {
		return nil, fmt.Errorf("onnx: the graph has no outputs: %w", checkpoint.ErrFormat)
	}
	for _, out := range gp.GetOutput() {
		n, ok := bd.values[out.GetName()]
		if !ok {
			return nil, fmt.Errorf("onnx: the graph's output %q is no node's: %w", out.GetName(), checkpoint.ErrFormat)
		}
		m.Outputs = append(m.Outputs, n)
	}
	return m, nil
}

// builder builds one graph.
type builder struct {
	g       *gorgonia.ExprGraph
	values  map[string]*gorgonia.Node        // every value defined so far, by ONNX name
	consts  map[string]*tensor.Dense         // the values known when the graph is built (initializers, Constant)
	sparse  map[*gorgonia.Node]*nn.Embedding // Options.Sparse's tables, by their Table nodes
	padding map[*gorgonia.Node]int           // the padding rows of Options.Padding's dense tables
	opset   int64
}

// sparseTable returns the row-sparse embedding named name of g, started
// from v.
func sparseTable(g *gorgonia.ExprGraph, name string, v *tensor.Dense, o Options) (*nn.Embedding, error) {
	if v.Dims() != 2 || (v.Dtype() != tensor.Float32 && v.Dtype() != tensor.Float64) {
		return nil, fmt.Errorf("onnx: initializer %q is %v %v; a sparse table is a float matrix: %w", name, v.Dtype(), v.Shape(), errs.ErrOption)
	}
	opts := []nn.NewEmbeddingOption{nn.WithSparse(), nn.WithWeights(v)}
	if p, ok := o.Padding[name]; ok {
		opts = append(opts, nn.WithPadding(p))
	}
	return nn.NewEmbedding(g, name, v.Shape()[0], v.Shape()[1], v.Dtype(), opts...)
}

// paddingRow returns the row Options.Padding names for the initializer
// name of value v, in [0, rows), or an error.
func paddingRow(name string, v *tensor.Dense, p int) (int, error) {
	if v.Dims() != 2 || (v.Dtype() != tensor.Float32 && v.Dtype() != tensor.Float64) {
		return 0, fmt.Errorf("onnx: Options.Padding names initializer %q, %v %v; a padded table is a float matrix: %w", name, v.Dtype(), v.Shape(), errs.ErrOption)
	}
	rows := v.Shape()[0]
	if p < -rows || p >= rows {
		return 0, fmt.Errorf("onnx: Options.Padding gives initializer %q, of %d rows, the padding row %d: %w", name, rows, p, errs.ErrIndexOutOfRange)
	}
	if p < 0 {
		p += rows
	}
	return p, nil
}

// node adds a node named name holding v, the value of that name.
func (b *builder) node(name string, v *tensor.Dense) *gorgonia.Node {
	n := b.leaf(name, v)
	b.values[name] = n
	return n
}

// leaf returns a new node named name holding v.
func (b *builder) leaf(name string, v *tensor.Dense) *gorgonia.Node {
	if v.Dims() == 0 {
		// A Gorgonia scalar holds a scalar value (*gorgonia.F32...), which
		// its scalar ops require, not a tensor of no dimensions.
		return gorgonia.NewScalar(b.g, v.Dtype(), gorgonia.WithName(name), gorgonia.WithValue(v.Data()))
	}
	return gorgonia.NewTensor(b.g, v.Dtype(), v.Dims(), gorgonia.WithShape(v.Shape()...), gorgonia.WithName(name), gorgonia.WithValue(v))
}

// input adds the graph input in, its symbolic dimensions sized by o.Dims.
func (b *builder) input(in *onnxpb.ValueInfoProto, o Options) (*gorgonia.Node, error) {
	name := in.GetName()
	tt := in.GetType().GetTensorType()
	if name == "" {
		return nil, fmt.Errorf("onnx: an input without a name: %w", checkpoint.ErrFormat)
	}
	if tt == nil {
		var kind string
		switch in.GetType().GetValue().(type) {
		case *onnxpb.TypeProto_OptionalType:
			kind = "an optional"
		case *onnxpb.TypeProto_SequenceType:
			kind = "a sequence"
		case *onnxpb.TypeProto_MapType:
			kind = "a map"
		case *onnxpb.TypeProto_SparseTensorType:
			kind = "a sparse tensor"
		default:
			return nil, fmt.Errorf("onnx: input %q has no type: %w", name, checkpoint.ErrFormat)
		}
		return nil, fmt.Errorf("onnx: input %q is %s, not a tensor: Import reads tensor inputs: %w", name, kind, errs.ErrOption)
	}
	dt, ok := dtypeOf(tt.GetElemType())
	if !ok {
		return nil, fmt.Errorf("onnx: input %q: element type %v: Import reads float, double, int64 and int32: %w", name, onnxpb.TensorProto_DataType(tt.GetElemType()), errs.ErrOption)
	}
	if tt.GetShape() == nil {
		return nil, fmt.Errorf("onnx: input %q has no shape: %w", name, errs.ErrOption)
	}
	dims := make([]int64, 0, len(tt.GetShape().GetDim()))
	for _, d := range tt.GetShape().GetDim() {
		switch {
		case d.GetDimParam() != "":
			v, ok := o.Dims[d.GetDimParam()]
			if !ok {
				return nil, fmt.Errorf("onnx: input %q: dimension %q needs a size (Options.Dims): %w", name, d.GetDimParam(), errs.ErrOption)
			}
			if v <= 0 {
				return nil, fmt.Errorf("onnx: input %q: Options.Dims gives dimension %q the size %d; a size is positive: %w", name, d.GetDimParam(), v, errs.ErrOption)
			}
			dims = append(dims, int64(v))
		case d.Value != nil:
			dims = append(dims, d.GetDimValue())
		default:
			return nil, fmt.Errorf("onnx: input %q: a dimension with neither size nor name: %w", name, errs.ErrOption)
		}
	}
	if _, err := shapeSize("input "+name, dims); err != nil {
		return nil, err
	}
	if _, dup := b.values[name]; dup {
		return nil, fmt.Errorf("onnx: input %q is named twice: %w", name, checkpoint.ErrFormat)
	}
	var n *gorgonia.Node
	if len(dims) == 0 {
		n = gorgonia.NewScalar(b.g, dt, gorgonia.WithName(name))
	} else {
		shape := make(tensor.Shape, len(dims))
		for k, d := range dims {
			shape[k] = int(d)
		}
		n = gorgonia.NewTensor(b.g, dt, len(shape), gorgonia.WithShape(shape...), gorgonia.WithName(name))
	}
	b.values[name] = n
	return n, nil
}

// apply adds the node np.
func (b *builder) apply(np *onnxpb.NodeProto) error {
	name := np.GetName()
	if name == "" && len(np.GetOutput()) > 0 {
		name = np.GetOutput()[0]
	}
	if err := readable(np, b.opset); err != nil {
		return err
	}
	op := ops[np.GetOpType()]
	for _, a := range np.GetAttribute() {
		if !slices.Contains(op.attrs, a.GetName()) {
			reads := "no attribute"
			if len(op.attrs) > 0 {
				reads = strings.Join(op.attrs, ", ")
			}
			return fmt.Errorf("onnx: node %q: operator %s (opset %d) with attribute %q: Import reads %s of %s: %w",
				name, np.GetOpType(), b.opset, a.GetName(), reads, np.GetOpType(), errs.ErrOption)
		}
	}
	in := make([]*gorgonia.Node, len(np.GetInput()))
	for k, x := range np.GetInput() {
		if x == "" {
			continue // an optional input left out
		}
		n, ok := b.values[x]
		if !ok {
			return fmt.Errorf("onnx: node %q (%s): input %q is defined by no earlier node: %w", name, np.GetOpType(), x, checkpoint.ErrFormat)
		}
		if _, sparse := b.sparse[n]; sparse && (np.GetOpType() != "Gather" || k != 0) {
			return fmt.Errorf("onnx: node %q (%s) reads %q, a sparse table (Options.Sparse), which only Gather's data may be: %w", name, np.GetOpType(), x, errs.ErrOption)
		}
		in[k] = n
	}
	if len(in) < op.inputs {
		return fmt.Errorf("onnx: node %q (%s): %d inputs, not at least %d: %w", name, np.GetOpType(), len(in), op.inputs, checkpoint.ErrFormat)
	}
	for k := range op.inputs {
		if in[k] == nil {
			return fmt.Errorf("onnx: node %q (%s): input %d is required: %w", name, np.GetOpType(), k, checkpoint.ErrFormat)
		}
	}
	if len(np.GetOutput()) != 1 {
		return fmt.Errorf("onnx: node %q (%s): %d outputs; Import reads nodes of one: %w", name, np.GetOpType(), len(np.GetOutput()), errs.ErrOption)
	}
	if _, dup := b.values[np.GetOutput()[0]]; dup {
		return fmt.Errorf("onnx: node %q (%s): its output %q is defined twice: %w", name, np.GetOpType(), np.GetOutput()[0], checkpoint.ErrFormat)
	}
	c := &call{b: b, np: np, name: name, in: in}
	out, err := op.build(c)
	if err != nil {
		if strings.HasPrefix(err.Error(), "onnx: ") {
			return err
		}
		return fmt.Errorf("onnx: node %q (%s): %w", name, np.GetOpType(), err)
	}
	b.values[np.GetOutput()[0]] = out
	if v, ok := c.constOut(); ok {
		b.consts[np.GetOutput()[0]] = v
	}
	return nil
}

// nodeName returns the name of np in errors: its own, else its first
// output's.
func nodeName(np *onnxpb.NodeProto) string {
	if name := np.GetName(); name != "" || len(np.GetOutput()) == 0 {
		return name
	}
	return np.GetOutput()[0]
}

// readable reports an error wrapping gather.ErrOption unless np's
// operator is one Import reads, of the default domain: the error names
// the node, its operator and the opset.
func readable(np *onnxpb.NodeProto, opset int64) error {
	name := nodeName(np)
	if d := np.GetDomain(); d != "" && d != "ai.onnx" {
		return fmt.Errorf("onnx: node %q: operator %s of domain %q: Import reads the default domain: %w", name, np.GetOpType(), d, errs.ErrOption)
	}
	if _, ok := ops[np.GetOpType()]; !ok {
		return fmt.Errorf("onnx: node %q: operator %s (opset %d) is not one Import reads (%s): %w",
			name, np.GetOpType(), opset, strings.Join(Ops(), ", "), errs.ErrOption)
	}
	return nil
}
