package gather

import (
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

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
	var buf [8]int
	ix, ax, shape, err := readIndices(kind, indices, dst.Shape(), axis, buf[:0])
	if err != nil {
		return a, err
	}
	g, err := operand.Read(kind.String(), "gradient", src)
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

func (gatherer) add(a addPlan, c float64, pad int, zero bool) {
	outer, s, inner := split(a.dst.Shape(), a.axis)
	operand.PickFloatIndex(a.dst.Dtype(), a.ix.Dtype, indexAdds32, indexAdds64)(a.dst, a.src, a.ix, outer, s, inner, c, pad, zero)
}

// The instances of indexAdd and scatterAdd for each data and index dtype.
var (
	indexAdds32   = [3]func(dst, src *tensor.Dense, ix operand.Indices, outer, s, inner int, c float64, pad int, zero bool){indexAdd[float32, int], indexAdd[float32, int32], indexAdd[float32, int64]}
	indexAdds64   = [3]func(dst, src *tensor.Dense, ix operand.Indices, outer, s, inner int, c float64, pad int, zero bool){indexAdd[float64, int], indexAdd[float64, int32], indexAdd[float64, int64]}
	scatterAdds32 = [3]func(dst, src *tensor.Dense, ix operand.Indices, g kernel.Along, c float64, zero bool){scatterAdd[float32, int], scatterAdd[float32, int32], scatterAdd[float32, int64]}
	scatterAdds64 = [3]func(dst, src *tensor.Dense, ix operand.Indices, g kernel.Along, c float64, zero bool){scatterAdd[float64, int], scatterAdd[float64, int32], scatterAdd[float64, int64]}
)

func indexAdd[T kernel.Float, I kernel.Index](dst, src *tensor.Dense, ix operand.Indices, outer, s, inner int, c float64, pad int, zero bool) {
	kernel.IndexAdd(operand.Floats[T](dst), operand.Floats[T](src), operand.Slice[I](ix), outer, s, inner, T(c), pad, zero)
}

func (elementPicker) add(a addPlan, c float64, _ int, zero bool) {
	if a.src.Shape().TotalSize() == 0 {
		if zero {
			operand.PickFloat(a.dst.Dtype(), clearFloats[float32], clearFloats[float64])(a.dst)
		}
		return
	}
	g := kernel.NewAlong(a.dst.Shape(), a.ix.Shape, a.axis)
	operand.PickFloatIndex(a.dst.Dtype(), a.ix.Dtype, scatterAdds32, scatterAdds64)(a.dst, a.src, a.ix, g, c, zero)
}

func clearFloats[T kernel.Float](t *tensor.Dense) { kernel.Clear(operand.Floats[T](t)) }

// scatterAdd takes g by value, as takeAlong does.
func scatterAdd[T kernel.Float, I kernel.Index](dst, src *tensor.Dense, ix operand.Indices, g kernel.Along, c float64, zero bool) {
	kernel.ScatterAdd(operand.Floats[T](dst), operand.Floats[T](src), operand.Slice[I](ix), &g, T(c), zero)
}

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
