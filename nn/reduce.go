package nn

import (
	"fmt"
	"slices"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
)

// opSum and opMean name the reductions in error messages.
const (
	opSum  = "sum"
	opMean = "mean"
)

// Sum returns the sum of x over axes, as torch.sum(x, dim=axes,
// keepdim=keepDims) and ONNX's ReduceSum: every axis when axes is empty,
// negative axes counting from the back. The output has x's shape without
// the reduced axes (a scalar when none is left), or with them of size 1
// when keepDims is true. x is float32 or float64 of any rank; the
// gradient spreads each output's gradient over the elements summed into
// it. Forward and backward are O(size of x) and allocate nothing into a
// reused output (machine.Machine).
//
// Call it (or Mean) in place of gorgonia.Sum and gorgonia.Mean to reduce
// over several axes: gorgonia.org/tensor v0.9.24 sums a rank-4 value
// over two axes wrongly, and panics on some shapes.
func Sum(x *gorgonia.Node, keepDims bool, axes ...int) (*gorgonia.Node, error) {
	return reduce(opSum, x, keepDims, axes)
}

// Mean returns the mean of x over axes, as torch.mean(x, dim=axes,
// keepdim=keepDims) and ONNX's ReduceMean: Sum divided by the number of
// elements summed into each output (NaN when that number is 0, as in
// PyTorch). Its axes, shapes and costs are Sum's.
func Mean(x *gorgonia.Node, keepDims bool, axes ...int) (*gorgonia.Node, error) {
	return reduce(opMean, x, keepDims, axes)
}

func reduce(what string, x *gorgonia.Node, keepDims bool, axes []int) (*gorgonia.Node, error) {
	if x == nil {
		return nil, fmt.Errorf("%s: x is nil: %w", what, gather.ErrShape)
	}
	dt := x.Dtype()
	if err := operand.CheckFloat(what, "x", dt); err != nil {
		return nil, err
	}
	in := x.Shape().Clone()
	r := len(in)
	if r == 0 || x.IsScalar() {
		if len(axes) > 0 {
			return nil, fmt.Errorf("%s: axis %d of a scalar: %w", what, axes[0], gather.ErrAxisOutOfRange)
		}
		return x, nil // the sum and the mean of one value
	}
	reduced := make([]bool, r)
	for _, a := range axes {
		k := a
		if k < 0 {
			k += r
		}
		if k < 0 || k >= r {
			return nil, fmt.Errorf("%s: axis %d is out of range [%d, %d] for rank %d: %w", what, a, -r, r-1, r, gather.ErrAxisOutOfRange)
		}
		if reduced[k] {
			return nil, fmt.Errorf("%s: axis %d is named twice in %v: %w", what, a, axes, gather.ErrAxisOutOfRange)
		}
		reduced[k] = true
	}
	if len(axes) == 0 {
		for k := range reduced {
			reduced[k] = true
		}
	}
	var out tensor.Shape
	for k, s := range in {
		switch {
		case !reduced[k]:
			out = append(out, s)
		case keepDims:
			out = append(out, 1)
		}
	}
	if out == nil {
		out = tensor.ScalarShape()
	}
	o := &reduceOp{what: what, dtype: dt, in: in, out: out, layout: kernel.NewReduction(in, reduced), axes: axesOf(reduced), keepDims: keepDims}
	name := "Sum"
	if what == opMean {
		name = "Mean"
	}
	name = fmt.Sprintf("%s{axes=%v,keepdims=%v}", name, o.axes, keepDims)
	o.Diff = opkit.NewDiff(opkit.Sig{Name: name, In: []hm.Type{operand.Type(r, dt)}, Dtype: dt, Shape: out},
		what, []tensor.Shape{in}, o.grad)
	return opkit.Apply(what, o, x)
}

// axesOf returns the axes k with reduced[k].
func axesOf(reduced []bool) []int {
	var a []int
	for k, r := range reduced {
		if r {
			a = append(a, k)
		}
	}
	return a
}

// reduceOp is the op of Sum and Mean.
type reduceOp struct {
	opkit.Diff
	what     string // opSum or opMean
	dtype    tensor.Dtype
	in, out  tensor.Shape
	layout   *kernel.Reduction
	axes     []int
	keepDims bool
}

// Reduction returns whether the op is Mean's, the axes it reduces in
// increasing order, and whether it keeps them: what package onnx writes.
func (o *reduceOp) Reduction() (mean bool, axes []int, keepDims bool) {
	return o.what == opMean, slices.Clone(o.axes), o.keepDims
}

// Do reduces x into a new value.
func (o *reduceOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	return o.UsePreallocDo(nil, in...)
}

// UsePreallocDo reduces x into prealloc when it can hold the result (see
// operand.Prealloc), else into a new value.
func (o *reduceOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity(o.what, "", len(in), 1); err != nil {
		return nil, err
	}
	x, err := readShaped(o.what, "x", in[0], o.dtype, o.in)
	if err != nil {
		return nil, err
	}
	if len(o.out) == 0 {
		var s float64
		if o.dtype == tensor.Float32 {
			s = float64(kernel.SumAll(x.Float32s()))
			if o.what == opMean {
				s = float64(float32(s) / float32(o.layout.Count))
			}
		} else {
			s = kernel.SumAll(x.Float64s())
			if o.what == opMean {
				s /= float64(o.layout.Count)
			}
		}
		return operand.ScalarOut(prealloc, o.dtype, s), nil
	}
	out := operand.Prealloc(prealloc, o.dtype, o.out, in)
	if o.dtype == tensor.Float32 {
		reduceInto(out.Float32s(), x.Float32s(), o.layout, o.what == opMean)
	} else {
		reduceInto(out.Float64s(), x.Float64s(), o.layout, o.what == opMean)
	}
	return out, nil
}

func reduceInto[T kernel.Float](dst, src []T, l *kernel.Reduction, mean bool) {
	kernel.ReduceSum(dst, src, l)
	if mean {
		n := T(l.Count)
		for i := range dst {
			dst[i] /= n
		}
	}
}

// grad returns the Run of x's gradient: the upstream gradient spread
// over the elements reduced into it (divided by their number for Mean).
func (o *reduceOp) grad(int) opkit.Run {
	return func(dst *tensor.Dense, add bool, in []gorgonia.Value) error {
		if dst.Dtype() != o.dtype || !operand.SameShape(dst.Shape(), o.in) || !operand.Writable(dst) {
			return fmt.Errorf("%s gradient: destination is %v of shape %v, want a row-major %v tensor of shape %v: %w",
				o.what, dst.Dtype(), dst.Shape(), o.dtype, o.in, gather.ErrShape)
		}
		if err := operand.CheckArity(o.what, " gradient", len(in), 2); err != nil {
			return err
		}
		scale := 1.0
		if o.what == opMean {
			scale = 1 / float64(o.layout.Count)
		}
		if len(o.out) == 0 {
			g, err := operand.Scalar("upstream gradient", in[1])
			if err != nil {
				return fmt.Errorf("%s gradient: %w", o.what, err)
			}
			if o.dtype == tensor.Float32 {
				g1 := [1]float32{float32(g)}
				kernel.Spread(dst.Float32s(), g1[:], float32(scale), add, o.layout)
			} else {
				g1 := [1]float64{g}
				kernel.Spread(dst.Float64s(), g1[:], scale, add, o.layout)
			}
			return nil
		}
		g, err := readShaped(o.what, "upstream gradient", in[1], o.dtype, o.out)
		if err != nil {
			return err
		}
		if o.dtype == tensor.Float32 {
			kernel.Spread(dst.Float32s(), g.Float32s(), float32(scale), add, o.layout)
		} else {
			kernel.Spread(dst.Float64s(), g.Float64s(), scale, add, o.layout)
		}
		return nil
	}
}

var (
	_ gorgonia.SDOp = (*reduceOp)(nil)
	_ gorgonia.ADOp = (*reduceOp)(nil)
)
