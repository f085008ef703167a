package nn

import (
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
)

// opLogSoftmax names LogSoftmax in error messages.
const opLogSoftmax = "log_softmax"

// LogSoftmax returns the logarithm of the softmax of x over axis
// (negative counts from the back), as torch.nn.functional.log_softmax:
//
//	out[..., j, ...] = x[..., j, ...] - log(Σ_k exp(x[..., k, ...]))
//
// computed with the axis's maximum subtracted first, so that large values
// do not overflow. With NLLLoss it is CrossEntropy in two steps, as
// PyTorch users often write it (CrossEntropy is one op and keeps no
// log-probabilities). x is float32 or float64 of rank 1 or more; the
// gradient flows to x, in both of Gorgonia's machines:
//
//	∂/∂x = g - softmax(x) · Σ_axis g
//
// Over the last axis float32 values are exponentiated eight at a time
// (within 2 units in the last place); sums accumulate in float64. It is
// O(size of x) forward and backward.
func LogSoftmax(x *gorgonia.Node, axis int) (*gorgonia.Node, error) {
	if x == nil {
		return nil, fmt.Errorf("%s: x must be a node: %w", opLogSoftmax, gather.ErrShape)
	}
	dt := x.Dtype()
	if err := operand.CheckFloat(opLogSoftmax, "x", dt); err != nil {
		return nil, err
	}
	shape := x.Shape().Clone()
	r := len(shape)
	if r == 0 {
		return nil, fmt.Errorf("%s: x must have rank >= 1, got a scalar: %w", opLogSoftmax, gather.ErrShape)
	}
	if axis < -r || axis >= r {
		return nil, fmt.Errorf("%s: axis %d is out of range [%d, %d] for x of rank %d: %w", opLogSoftmax, axis, -r, r-1, r, gather.ErrAxisOutOfRange)
	}
	if axis < 0 {
		axis += r
	}
	if _, err := operand.Size(opLogSoftmax, "x", shape); err != nil {
		return nil, err
	}
	o := &logSoftmaxOp{dtype: dt, shape: shape, outer: 1, n: shape[axis], inner: 1, axis: axis}
	for _, d := range shape[:axis] {
		o.outer *= d
	}
	for _, d := range shape[axis+1:] {
		o.inner *= d
	}
	o.f = operand.PickFloat(dt, &logSoftmax32, &logSoftmax64)
	in := []hm.Type{operand.Type(r, dt)}
	o.Diff = opkit.NewDiff(opkit.Sig{Name: fmt.Sprintf("LogSoftmax{axis=%d}", axis), In: in, Dtype: dt, Shape: shape},
		opLogSoftmax, []tensor.Shape{shape}, func(int) opkit.Run { return o.grad })
	o.FromOutput = true // the gradient reads the log-probabilities, as PyTorch's
	return opkit.Apply(opLogSoftmax, o, x)
}

// logSoftmaxOp is the op of LogSoftmax: x in, log-probabilities of its
// shape out, over the middle axis of x seen as [outer, n, inner].
type logSoftmaxOp struct {
	opkit.Diff
	dtype           tensor.Dtype
	shape           tensor.Shape
	outer, n, inner int
	axis            int // normalised
	f               *logSoftmaxKernels
}

// ONNX returns the op as ONNX's LogSoftmax.
func (o *logSoftmaxOp) ONNX() (string, map[string]int64) {
	return "LogSoftmax", map[string]int64{"axis": int64(o.axis)}
}

// logSoftmaxKernels are LogSoftmax's loops for one dtype.
type logSoftmaxKernels struct {
	fwd  func(dst, x *tensor.Dense, outer, n, inner int)
	grad func(dst, y, g *tensor.Dense, outer, n, inner int, add bool)
}

var logSoftmax32, logSoftmax64 = logSoftmaxKernelsOf[float32](), logSoftmaxKernelsOf[float64]()

func logSoftmaxKernelsOf[T kernel.Float]() logSoftmaxKernels {
	f := operand.Floats[T]
	return logSoftmaxKernels{
		fwd: func(dst, x *tensor.Dense, outer, n, inner int) { kernel.LogSoftmax(f(dst), f(x), outer, n, inner) },
		grad: func(dst, y, g *tensor.Dense, outer, n, inner int, add bool) {
			kernel.LogSoftmaxGrad(f(dst), f(y), f(g), outer, n, inner, add)
		},
	}
}

func (o *logSoftmaxOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	return o.into(nil, in)
}

// UsePreallocDo writes the result into prealloc when it can hold it (a
// row-major tensor of the output's dtype and shape, not a view, sharing
// no memory with x), else into a new tensor.
func (o *logSoftmaxOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	out, _ := prealloc.(*tensor.Dense)
	return o.into(out, in)
}

func (o *logSoftmaxOp) into(out *tensor.Dense, in []gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity(opLogSoftmax, "", len(in), 1); err != nil {
		return nil, err
	}
	x, err := readShaped(opLogSoftmax, "x", in[0], o.dtype, o.shape)
	if err != nil {
		return nil, err
	}
	if out == nil || out.Dtype() != o.dtype || !operand.SameShape(out.Shape(), o.shape) || !operand.Writable(out) || overlapsValue(out, in[0]) {
		out = operand.NewOutput(o.dtype, o.shape)
	}
	o.f.fwd(out, x, o.outer, o.n, o.inner)
	return out, nil
}

// grad writes (or with add, adds) the gradient of x into dst, from the
// op's output y (in[0]) and the upstream gradient, after checking every
// argument.
func (o *logSoftmaxOp) grad(dst *tensor.Dense, add bool, in []gorgonia.Value) error {
	if dst.Dtype() != o.dtype || !operand.SameShape(dst.Shape(), o.shape) || !operand.Writable(dst) {
		return fmt.Errorf("%s gradient: destination is %v of shape %v, want a row-major %v tensor of shape %v: %w",
			opLogSoftmax, dst.Dtype(), dst.Shape(), o.dtype, o.shape, gather.ErrShape)
	}
	if err := operand.CheckArity(opLogSoftmax, " gradient", len(in), 2); err != nil {
		return err
	}
	y, err := readShaped(opLogSoftmax, "output", in[0], o.dtype, o.shape)
	if err != nil {
		return err
	}
	g, err := readShaped(opLogSoftmax, "upstream gradient", in[1], o.dtype, o.shape)
	if err != nil {
		return err
	}
	o.f.grad(dst, y, g, o.outer, o.n, o.inner, add)
	return nil
}

var (
	_ gorgonia.SDOp = (*logSoftmaxOp)(nil)
	_ gorgonia.ADOp = (*logSoftmaxOp)(nil)
)
