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
	"github.com/gathergrad/gather/internal/shapes"
)

// IndexAdd adds src into dst at the positions that Take(dst, indices, axis)
// reads: it is the gradient of Gather with respect to data. For axis 0 and
// rows of n elements it is
//
//	for i, j := range indices { dst[j*n:(j+1)*n] += src[i*n:(i+1)*n] }
//
// and likewise for each block before axis. Repeated indices accumulate;
// negative ones add into the row they name. dst must be a row-major float32
// or float64 tensor (not a view); src must have dst's dtype and the shape
// Take would return. On error dst is unchanged. The sum into each element
// runs in index order whatever the number of threads, so the result does
// not depend on GOMAXPROCS. It is O(size of src).
func IndexAdd(dst *tensor.Dense, indices, src tensor.Tensor, axis int) error {
	return backward(opGather, dst, indices, src, axis, 1, -1, label{Op: opGather.String()}, false)
}

// ScatterAdd adds src into dst at the positions that TakeAlongAxis(dst,
// indices, axis) reads: it is the gradient of GatherElements with respect to
// data (ONNX ScatterElements with reduction "add", PyTorch scatter_add_).
// For a matrix and axis 1 it is
//
//	for i, row := range indices { for j, k := range row { dst[i][k] += src[i][j] } }
//
// Repeated indices accumulate. dst must be a row-major float32 or float64
// tensor (not a view); src must have dst's dtype and the shape of indices.
// On error dst is unchanged. The result does not depend on GOMAXPROCS.
// It is O(size of src).
func ScatterAdd(dst *tensor.Dense, indices, src tensor.Tensor, axis int) error {
	return backward(opGatherElements, dst, indices, src, axis, 1, -1, label{Op: opGatherElements.String()}, false)
}

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
	ix, err := operand.ReadIndices(kind.String(), "indices", indices)
	if err != nil {
		return a, err
	}
	g, err := operand.Read(kind.String(), "gradient", src)
	if err != nil {
		return a, err
	}
	ax, err := normAxis(kind.String(), axis, dst.Dims())
	if err != nil {
		return a, err
	}
	var buf [8]int
	shape, err := outputShape(buf[:0], kind, dst.Shape(), ix.Shape, ax)
	if err != nil {
		return a, err
	}
	if g.Dtype() != dst.Dtype() || !shapes.SameShape(g.Shape(), shape) {
		return a, fmt.Errorf("%s gradient: want a %v gradient of shape %s, got %v of shape %v: %w",
			kind, dst.Dtype(), shapes.ShapeString(shape), g.Dtype(), g.Shape(), ErrShape)
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
	switch g.Dtype() {
	case tensor.Float32:
		divideSlices(g.Float32s(), a.ix, counts, outer, n, inner, s)
	case tensor.Float64:
		divideSlices(g.Float64s(), a.ix, counts, outer, n, inner, s)
	}
	a.src = g
	return a
}

// divideSlices divides slice (o, i) of g, of inner elements, by the count
// of index i, for each outer block o.
func divideSlices[T kernel.Float](g []T, ix operand.Indices, counts map[int]float64, outer, n, inner, s int) {
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

func (gatherer) add(a addPlan, c float64, pad int, zero bool) {
	outer, s, inner := split(a.dst.Shape(), a.axis)
	switch a.dst.Dtype() {
	case tensor.Float32:
		operand.Pick(a.ix.Dtype, indexAdd[float32, int], indexAdd[float32, int32], indexAdd[float32, int64])(
			a.dst.Float32s(), a.src.Float32s(), a.ix, outer, s, inner, float32(c), pad, zero)
	case tensor.Float64:
		operand.Pick(a.ix.Dtype, indexAdd[float64, int], indexAdd[float64, int32], indexAdd[float64, int64])(
			a.dst.Float64s(), a.src.Float64s(), a.ix, outer, s, inner, c, pad, zero)
	}
}

func indexAdd[T kernel.Float, I kernel.Index](dst, src []T, ix operand.Indices, outer, s, inner int, c T, pad int, zero bool) {
	kernel.IndexAdd(dst, src, operand.Slice[I](ix), outer, s, inner, c, pad, zero)
}

func (elementPicker) add(a addPlan, c float64, _ int, zero bool) {
	if a.src.Shape().TotalSize() == 0 {
		if zero {
			switch a.dst.Dtype() {
			case tensor.Float32:
				kernel.Clear(a.dst.Float32s())
			case tensor.Float64:
				kernel.Clear(a.dst.Float64s())
			}
		}
		return
	}
	g := kernel.NewAlong(a.dst.Shape(), a.ix.Shape, a.axis)
	switch a.dst.Dtype() {
	case tensor.Float32:
		operand.Pick(a.ix.Dtype, scatterAdd[float32, int], scatterAdd[float32, int32], scatterAdd[float32, int64])(
			a.dst.Float32s(), a.src.Float32s(), a.ix, g, float32(c), zero)
	case tensor.Float64:
		operand.Pick(a.ix.Dtype, scatterAdd[float64, int], scatterAdd[float64, int32], scatterAdd[float64, int64])(
			a.dst.Float64s(), a.src.Float64s(), a.ix, g, c, zero)
	}
}

// scatterAdd takes g by value, as takeAlong does.
func scatterAdd[T kernel.Float, I kernel.Index](dst, src []T, ix operand.Indices, g kernel.Along, c T, zero bool) {
	kernel.ScatterAdd(dst, src, operand.Slice[I](ix), &g, c, zero)
}

// DiffWRT reports that data is differentiable (unless WithoutGrad was
// given) and indices are not.
func (o *gatherOp) DiffWRT(inputs int) []bool {
	return []bool{!o.cfg.NoGrad, false}
}

// SymDiff returns the gradient node of data: a diffOp applied to indices
// and the upstream gradient.
func (o *gatherOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if err := operand.CheckArity(o.kind.String(), "", len(inputs), 2); err != nil {
		return nil, err
	}
	if o.cfg.NoGrad {
		return gorgonia.Nodes{nil, nil}, nil
	}
	if err := o.checkDifferentiable(); err != nil {
		return nil, err
	}
	if err := errs.CheckGradSize(o.label().String(), output, inputs[0]); err != nil {
		return nil, err
	}
	d, err := gorgonia.ApplyOp(&diffOp{Op: opkit.New(o.ID(), "Grad", o.dataShape), fwd: o}, inputs[1], grad)
	if err != nil {
		return nil, fmt.Errorf("%s: building the gradient: %w", o.kind, errs.Graph(err))
	}
	return gorgonia.Nodes{d, nil}, nil
}

// DoDiff adds the gradient of data into the gradient it already has, for
// Gorgonia's LispMachine.
func (o *gatherOp) DoDiff(ctx gorgonia.ExecutionContext, inputs gorgonia.Nodes, output *gorgonia.Node) error {
	if err := operand.CheckArity(o.kind.String(), "", len(inputs), 2); err != nil {
		return err
	}
	if o.cfg.NoGrad {
		return nil
	}
	if err := o.checkDifferentiable(); err != nil {
		return err
	}
	dg, err := inputs[0].Grad()
	if err != nil {
		return fmt.Errorf("%s: data has no gradient to add into: %w", o.kind, errs.Graph(err))
	}
	up, err := output.Grad()
	if err != nil {
		return fmt.Errorf("%s: output has no gradient: %w", o.kind, errs.Graph(err))
	}
	dst, ok := dg.(*tensor.Dense)
	if !ok {
		return fmt.Errorf("%s: gradient of data is a %T, not a *tensor.Dense: %w", o.kind, dg, ErrDtype)
	}
	return backward(o.kind, dst, inputs[1].Value(), up, o.axis, o.cfg.GradScale, o.padding(), o.label(), o.cfg.ScaleByFreq)
}

// padding returns the normalised padding index, or -1 if there is none.
func (o *gatherOp) padding() int {
	if o.cfg.HasPad {
		return o.cfg.Pad
	}
	return -1
}

func (o *gatherOp) checkDifferentiable() error {
	if o.dataType != tensor.Float32 && o.dataType != tensor.Float64 {
		return fmt.Errorf("%s: no gradient for %v data; only float32 and float64 data are differentiable: %w", o.kind, o.dataType, ErrDtype)
	}
	return nil
}

// diffOp computes the gradient of data for an op: indices and the upstream
// gradient in, a tensor shaped like data out.
type diffOp struct {
	opkit.Op
	fwd *gatherOp
}

func (d *diffOp) Arity() int { return 2 }

func (d *diffOp) Type() hm.Type {
	f := d.fwd
	return hm.NewFnType(
		operand.Type(len(f.indexShape), f.indexType),
		operand.Type(len(f.outShape), f.dataType),
		operand.Type(len(f.dataShape), f.dataType))
}

func (d *diffOp) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return d.fwd.dataShape.Clone(), nil
}

// Do returns a new gradient tensor.
func (d *diffOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity(d.fwd.kind.String(), " gradient", len(in), 2); err != nil {
		return nil, err
	}
	return d.overwrite(operand.NewOutput(d.fwd.dataType, d.fwd.dataShape), in)
}

// UsePreallocDo clears prealloc, which holds the last run's gradient, and
// adds this run's into it; if prealloc cannot hold it, it returns a new tensor.
func (d *diffOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity(d.fwd.kind.String(), " gradient", len(in), 2); err != nil {
		return nil, err
	}
	out, ok := prealloc.(*tensor.Dense)
	if !ok || !fits(d.fwd.kind, out, d.fwd.dataShape, d.fwd.dataType, in[0], in[1]) {
		return d.Do(in...)
	}
	return d.overwrite(out, in)
}

// overwrite sets out to the gradient of indices in[0] and upstream gradient
// in[1], whatever out held; on error out is unchanged.
func (d *diffOp) overwrite(out *tensor.Dense, in []gorgonia.Value) (gorgonia.Value, error) {
	a, err := planAdd(d.fwd.kind, out, in[0], in[1], d.fwd.axis, d.fwd.label())
	if err != nil {
		return nil, err
	}
	if d.fwd.cfg.ScaleByFreq {
		a = a.scaledByFreq()
	}
	a.run(d.fwd.cfg.GradScale, d.fwd.padding(), true)
	return out, nil
}

// IncrDo adds the gradient into toIncr without a temporary.
func (d *diffOp) IncrDo(toIncr gorgonia.Value, in ...gorgonia.Value) error {
	if err := operand.CheckArity(d.fwd.kind.String(), " gradient", len(in), 2); err != nil {
		return err
	}
	dst, ok := toIncr.(*tensor.Dense)
	if !ok {
		return fmt.Errorf("%s gradient: cannot add into a %T: %w", d.fwd.kind, toIncr, ErrDtype)
	}
	return backward(d.fwd.kind, dst, in[0], in[1], d.fwd.axis, d.fwd.cfg.GradScale, d.fwd.padding(), d.fwd.label(), d.fwd.cfg.ScaleByFreq)
}

func (d *diffOp) String() string { return d.fwd.String() + "Grad" }

var (
	_ gorgonia.UsePreallocDoer = (*diffOp)(nil)
	_ gorgonia.IncrDoer        = (*diffOp)(nil)
)
