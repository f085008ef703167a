package gather

import (
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
)

// An operator is what Gather and GatherElements do differently. The code
// they share (building the node, reading the arguments, checking an
// output, the gradients in both machines) calls it.
type operator interface {
	// String returns the op's name as errors and IndexError.Op give it.
	String() string
	// title returns the name the Gorgonia op's String starts with.
	title() string
	// take writes (with add, adds into) out, of the output's shape, from
	// data and ix along axis, and returns the flat position in ix of the
	// first index out of range, or -1; with add, indices are checked
	// already. fresh says that out was allocated for this call.
	take(out, data *tensor.Dense, ix operand.Indices, axis int, fresh, add bool) int
	// add adds c times a's gradient into a's destination at the positions
	// take reads, leaving out the slice pad (< 0 for none); with zero, it
	// first sets the destination to zero.
	add(a addPlan, c float64, pad int, zero bool)
	// slices reports whether the op picks whole slices, which is what a
	// padding index and gradient scaling by frequency apply to.
	slices() bool
}

// The two operators.
var (
	opGather         operator = gatherer{}
	opGatherElements operator = elementPicker{}
)

// outputShape returns kind's output shape for data and indices of the
// given shapes along axis, checking that they fit together (gatherShape,
// elementsShape); built in buf or aliasing indices, so clone it to keep it.
// It tells the operators apart by their types, not through a method of
// operator, so that buf stays on the caller's stack.
func outputShape(buf tensor.Shape, kind operator, data, indices tensor.Shape, axis int) (tensor.Shape, error) {
	if _, ok := kind.(gatherer); ok {
		return gatherShape(kind.String(), buf, data, indices, axis)
	}
	return elementsShape(kind.String(), data, indices, axis)
}

// gatherOp is the Gorgonia op of Gather and of GatherElements, which its
// operator tells apart: the arguments fixed when the node is built. An op
// value may be shared by goroutines.
type gatherOp struct {
	opkit.Diff
	kind       operator     // opGather or opGatherElements
	axis       int          // normalised to [0, rank-1]
	dataType   tensor.Dtype // dtype of data and of the output
	indexType  tensor.Dtype
	dataShape  tensor.Shape
	indexShape tensor.Shape
	outShape   tensor.Shape
	cfg        config
}

// ONNX returns the op as ONNX's Gather or GatherElements. Its options
// change only its gradient, which ONNX does not hold.
func (o *gatherOp) ONNX() (string, map[string]int64) {
	t := "GatherElements"
	if _, ok := o.kind.(gatherer); ok {
		t = "Gather"
	}
	return t, map[string]int64{"axis": int64(o.axis)}
}

// newOp checks the arguments of Gather or GatherElements and returns its op.
func newOp(kind operator, data, indices *gorgonia.Node, axis int, cfg config) (*gatherOp, error) {
	if data == nil || indices == nil {
		return nil, fmt.Errorf("%s: data and indices must be nodes, got data=%v, indices=%v: %w", kind, data, indices, ErrShape)
	}
	if operand.WordOf(data.Dtype()) == operand.WordNone {
		return nil, fmt.Errorf("%s: data dtype %v is not supported: %w", kind, data.Dtype(), ErrDtype)
	}
	if err := operand.CheckIndexDtype(kind.String(), "indices", indices.Dtype()); err != nil {
		return nil, err
	}
	ds, is := data.Shape().Clone(), indices.Shape().Clone()
	ax, err := normAxis(kind.String(), axis, len(ds))
	if err != nil {
		return nil, err
	}
	if _, err := operand.Size(kind.String(), "data", ds); err != nil {
		return nil, err
	}
	out, err := outputShape(nil, kind, ds, is, ax)
	if err != nil {
		return nil, err
	}
	out = out.Clone()
	if n := ds[ax]; n == 0 && is.TotalSize() > 0 {
		return nil, fmt.Errorf("%s: axis %d of data of shape %v has size 0, so no index into it is valid: %w", kind, ax, ds, ErrIndexOutOfRange)
	}
	if cfg.HasPad { // Gather's alone: GatherElements does not take the option
		if cfg.Pad, err = operand.NormIndex(kind.String(), cfg.Pad, ds[ax]); err != nil {
			return nil, err
		}
	}
	b := &gatherOp{kind: kind, axis: ax, dataType: data.Dtype(), indexType: indices.Dtype(),
		dataShape: ds, indexShape: is, outShape: out, cfg: cfg}
	in := []hm.Type{operand.Type(len(ds), b.dataType), operand.Type(len(is), b.indexType)}
	// The name reads e.g. "Gather{axis=1}" or "GatherElements{axis=0, noGrad}".
	name := fmt.Sprintf("%s{axis=%d%v}", kind.title(), ax, cfg)
	b.Op = opkit.New(opkit.Sig{Name: name, In: in, Dtype: b.dataType, Shape: out, Diff: []bool{!cfg.NoGrad, false}})
	b.Grads, b.What = make([]*opkit.Grad, 2), b.label().String()
	if !cfg.NoGrad {
		if b.Err = b.differentiable(); b.Err == nil {
			b.Grads[0] = b.newGrad(in)
		}
	}
	return b, nil
}

// apply adds o to the graph of data and indices.
func (o *gatherOp) apply(data, indices *gorgonia.Node) (*gorgonia.Node, error) {
	var n *gorgonia.Node
	var err error
	if o.cfg.Name != "" {
		n, err = gorgonia.ApplyOpWithName(o, o.cfg.Name, data, indices)
	} else {
		n, err = gorgonia.ApplyOp(o, data, indices)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.kind, errs.Graph(err))
	}
	return n, nil
}

// label returns how the op's index errors name it: by the layer package nn
// set (operand.Config.Layer), else by the op and the node's name.
func (o *gatherOp) label() label {
	if o.cfg.Layer.Op != "" {
		return o.cfg.Layer
	}
	return label{Op: o.kind.String(), Name: o.cfg.Name}
}

// target says where a forward call puts its result.
type target struct {
	out    *tensor.Dense // nil: a new tensor
	strict bool          // out must fit (WithReuse, WithIncr); else a new tensor replaces it
	add    bool          // add into out (WithIncr)
}

// parseOut reads the tensor.FuncOpts of Take or TakeAlongAxis.
func parseOut(kind operator, opts []tensor.FuncOpt) (target, error) {
	if len(opts) == 0 {
		return target{}, nil
	}
	fo := operand.ParseFuncOpts(opts)
	if fo.Unsafe || fo.As.Type != nil {
		return target{}, fmt.Errorf("%s: only tensor.WithReuse and tensor.WithIncr apply: %w", kind, ErrOption)
	}
	incr, reuse := fo.Incr, fo.Reuse
	if incr != nil && reuse != nil {
		return target{}, fmt.Errorf("%s: tensor.WithReuse and tensor.WithIncr given together; give one: %w", kind, ErrOption)
	}
	t := target{strict: true, add: incr != nil}
	v := reuse
	if t.add {
		v = incr
	}
	if v == nil {
		return target{}, nil
	}
	out, ok := v.(*tensor.Dense)
	if !ok || out == nil {
		return target{}, fmt.Errorf("%s: the output must be a *tensor.Dense, got %T: %w", kind, v, ErrDtype)
	}
	t.out = out
	return t, nil
}

// readIndices reads the indices of the op kind on data of shape ds along
// axis, and returns them, the axis normalised to [0, rank-1] and the
// output's shape, built in buf (see outputShape).
func readIndices(kind operator, indices any, ds tensor.Shape, axis int, buf tensor.Shape) (operand.Indices, int, tensor.Shape, error) {
	ix, err := operand.ReadIndices(kind.String(), "indices", indices)
	if err != nil {
		return ix, 0, nil, err
	}
	ax, err := normAxis(kind.String(), axis, len(ds))
	if err != nil {
		return ix, 0, nil, err
	}
	shape, err := outputShape(buf, kind, ds, ix.Shape, ax)
	return ix, ax, shape, err
}

// forward computes the op kind into dst. On error nothing the caller
// can see has been written: a caller's buffer is written only after every
// index is checked, and a new tensor that the kernels abandon at a bad
// index is dropped.
func forward(kind operator, data, indices any, axis int, dst target, l label) (*tensor.Dense, error) {
	d, err := operand.ReadData(kind.String(), data)
	if err != nil {
		return nil, err
	}
	var buf [8]int
	ix, ax, shape, err := readIndices(kind, indices, d.Shape(), axis, buf[:0])
	if err != nil {
		return nil, err
	}
	s := d.Shape()[ax]
	if l.NonNegative {
		// The kernels check [-s, s-1]; ids of package nn must lie in
		// [0, s), checked here, before anything is written.
		if p := ix.FirstBadIn(l, s); p >= 0 {
			return nil, operand.IndexError(l, ix, p, ax, s)
		}
	}
	out, fresh := dst.out, false
	if out != nil {
		err = checkOut(kind, out, shape, d.Dtype(), dst.add, data, indices)
	}
	switch {
	case out != nil && err == nil:
		// A buffer the caller can see: nothing is written unless all is well.
		if err := operand.CheckIndices(l, ix, ax, s); err != nil {
			return nil, err
		}
	case dst.strict:
		return nil, err
	default:
		// A new tensor: the kernels check as they go, and on error the
		// tensor is dropped, so no partial result escapes.
		out, fresh = operand.NewOutput(d.Dtype(), shape), true
	}
	if bad := kind.take(out, d, ix, ax, fresh, dst.add); bad >= 0 {
		return nil, operand.IndexError(l, ix, bad, ax, s)
	}
	return out, nil
}

// checkOut returns an error unless out can receive a result of the given
// shape and dtype in place (or, with add, have it added in): row-major,
// not a view, of exactly that shape and dtype, and sharing no memory with
// the inputs.
func checkOut(kind operator, out *tensor.Dense, shape tensor.Shape, dt tensor.Dtype, add bool, inputs ...any) error {
	if out.Dtype() != dt {
		return fmt.Errorf("%s: the output is %v, the result %v: %w", kind, out.Dtype(), dt, ErrDtype)
	}
	if add {
		if _, ok := operand.PickAddable(dt, [5]bool{}); !ok {
			return fmt.Errorf("%s: cannot add %v values into the output: %w", kind, dt, ErrDtype)
		}
	}
	if !operand.SameShape(out.Shape(), shape) {
		return fmt.Errorf("%s: the output has shape %v, the result %s: %w", kind, out.Shape(), operand.ShapeString(shape), ErrShape)
	}
	if !operand.Writable(out) {
		return fmt.Errorf("%s: the output of shape %v must be a row-major tensor that is not a view: %w", kind, out.Shape(), ErrShape)
	}
	for _, in := range inputs {
		if t, ok := in.(*tensor.Dense); ok && operand.Overlaps(out, t) {
			return fmt.Errorf("%s: the output of shape %v shares memory with an input: %w", kind, out.Shape(), ErrShape)
		}
	}
	return nil
}

// Do computes the op into a new tensor.
func (o *gatherOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	return o.UsePreallocDo(nil, in...)
}

// UsePreallocDo computes the op into prealloc when it can hold the result,
// else into a new tensor.
func (o *gatherOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity(o.kind.String(), "", len(in), 2); err != nil {
		return nil, err
	}
	buf, _ := prealloc.(*tensor.Dense)
	out, err := forward(o.kind, in[0], in[1], o.axis, target{out: buf}, o.label())
	if err != nil {
		return nil, err
	}
	return operand.Value(out), nil
}

var (
	_ gorgonia.UsePreallocDoer = (*gatherOp)(nil)
	_ gorgonia.SDOp            = (*gatherOp)(nil)
	_ gorgonia.ADOp            = (*gatherOp)(nil)
)

// backward adds scale*src into dst at the positions the op kind reads,
// after checking everything; for Gather, nothing is added to the slice pad
// of axis (pad < 0 for none).
func backward(kind operator, dst *tensor.Dense, indices, src any, axis int, scale float64, pad int, l label, freq bool) error {
	a, err := planAdd(kind, dst, indices, src, axis, l)
	if err != nil {
		return err
	}
	if freq {
		a = a.scaledByFreq()
	}
	a.run(scale, pad, false)
	return nil
}

// addPlan is a checked backward call, ready to run.
type addPlan struct {
	kind     operator
	dst, src *tensor.Dense
	ix       operand.Indices
	axis     int
}

// planAdd checks the arguments of backward.
func planAdd(kind operator, dst *tensor.Dense, indices, src any, axis int, l label) (addPlan, error) {
	var a addPlan
	if dst == nil {
		return a, fmt.Errorf("%s gradient: destination is nil: %w", kind, ErrShape)
	}
	if dt := dst.Dtype(); dt != tensor.Float32 && dt != tensor.Float64 {
		return a, fmt.Errorf("%s gradient: data must be float32 or float64 to have a gradient, got %v: %w", kind, dt, ErrDtype)
	}
	if !operand.Writable(dst) {
		return a, fmt.Errorf("%s gradient: destination of shape %v must be a row-major tensor that is not a view: %w", kind, dst.Shape(), ErrShape)
	}
	var buf [8]int
	ix, ax, shape, err := readIndices(kind, indices, dst.Shape(), axis, buf[:0])
	if err != nil {
		return a, err
	}
	g, err := operand.Read(kind.String(), "gradient", src)
	if err != nil {
		return a, err
	}
	if g.Dtype() != dst.Dtype() || !operand.SameShape(g.Shape(), shape) {
		return a, fmt.Errorf("%s gradient: want a %v gradient of shape %s, got %v of shape %v: %w",
			kind, dst.Dtype(), operand.ShapeString(shape), g.Dtype(), g.Shape(), ErrShape)
	}
	if err := operand.CheckIndices(l, ix, ax, dst.Shape()[ax]); err != nil {
		return a, err
	}
	if operand.Overlaps(dst, g) {
		g = g.Clone().(*tensor.Dense)
	}
	return addPlan{kind: kind, dst: dst, src: g, ix: ix, axis: ax}, nil
}

// scaledByFreq returns a with each slice of src divided by the number of
// times its index occurs in the indices (WithScaleGradByFreq), in a copy.
func (a addPlan) scaledByFreq() addPlan {
	outer, s, inner := split(a.dst.Shape(), a.axis)
	counts := make(map[int]float64)
	n := a.ix.Shape.TotalSize()
	for p := range n {
		counts[kernel.Wrap(a.ix.At(p), s)]++
	}
	g := a.src.Clone().(*tensor.Dense)
	operand.PickFloat(g.Dtype(), divideSlices[float32], divideSlices[float64])(g, a.ix, counts, outer, n, inner, s)
	a.src = g
	return a
}

// divideSlices divides slice (o, i) of g, of inner elements, by the count
// of index i, for each outer block o.
func divideSlices[T kernel.Float](t *tensor.Dense, ix operand.Indices, counts map[int]float64, outer, n, inner, s int) {
	g := operand.Floats[T](t)
	for o := range outer {
		for i := range n {
			c := T(counts[kernel.Wrap(ix.At(i), s)])
			row := g[(o*n+i)*inner : (o*n+i+1)*inner]
			for k := range row {
				row[k] /= c
			}
		}
	}
}

// run adds scale*src into dst; with zero, it first sets dst to zero, each
// worker clearing the part of dst it then adds into (while that part is in
// its cache), so that the clear costs no pass of its own.
func (a addPlan) run(scale float64, pad int, zero bool) { a.kind.add(a, scale, pad, zero) }

func clearFloats[T kernel.Float](t *tensor.Dense) { kernel.Clear(operand.Floats[T](t)) }

// padding returns the normalised padding index, or -1 if there is none.
func (o *gatherOp) padding() int {
	if o.cfg.HasPad {
		return o.cfg.Pad
	}
	return -1
}

func (o *gatherOp) differentiable() error {
	if o.dataType != tensor.Float32 && o.dataType != tensor.Float64 {
		return fmt.Errorf("%s: no gradient for %v data; only float32 and float64 data are differentiable: %w", o.kind, o.dataType, ErrDtype)
	}
	return nil
}

// newGrad returns the gradient op of data: data, indices and the upstream
// gradient in, a tensor shaped like data out; in are the op's input types.
func (o *gatherOp) newGrad(in []hm.Type) *opkit.Grad {
	sig := opkit.Sig{Name: o.String() + "Grad", In: append(in, operand.Type(len(o.outShape), o.dataType)),
		Dtype: o.dataType, Shape: o.dataShape}
	return opkit.NewGrad(sig, o.runGrad, o.ID())
}

// runGrad writes (or with add, adds) into dst the gradient of data for
// the indices in[1] and the upstream gradient in[2]; on error dst is
// unchanged.
func (o *gatherOp) runGrad(dst *tensor.Dense, add bool, in []gorgonia.Value) error {
	a, err := planAdd(o.kind, dst, in[1], in[2], o.axis, o.label())
	if err != nil {
		return err
	}
	if o.cfg.ScaleByFreq {
		a = a.scaledByFreq()
	}
	a.run(o.cfg.GradScale, o.padding(), !add)
	return nil
}
