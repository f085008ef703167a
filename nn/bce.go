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

// opBCE names BCEWithLogits in error messages.
const opBCE = "bce_with_logits"

// BCEWithLogits returns the binary cross-entropy of targets under the
// sigmoid of logits, PyTorch's F.binary_cross_entropy_with_logits: for each
// element, with x the logit, y the target and p the pos weight of its
// column (1 without WithPosWeight),
//
//	l = (1-y)·x + (1 + (p-1)·y)·log(1 + exp(-x))
//
// computed as log(1+exp(-|x|)) + max(-x, 0), which neither overflows nor
// loses the small values for logits of any size. logits is float32 or
// float64 of any shape; targets has its shape and dtype and holds values in
// [0, 1] (soft labels allowed; they are not checked). Options: WithPosWeight
// (a [classes] vector for the last axis) and WithReduction (ReduceMean, the
// default, over every element; ReduceSum; ReduceNone, a loss per element).
// The gradient flows to logits, in both of Gorgonia's machines:
//
//	∂l/∂x = (1 + (p-1)·y)·sigmoid(x) - p·y    (sigmoid(x) - y without WithPosWeight)
//
// Targets get none. float32 logits have exp(-|x|) and its log(1+·)
// computed in float32 (within a few units in the last place, as PyTorch
// computes them), the rest of each element's loss in float64; sums
// accumulate in float64. It is O(size of logits) forward and backward.
func BCEWithLogits(logits, targets *gorgonia.Node, opts ...BCEOption) (*gorgonia.Node, error) {
	c, err := newConfig(opBCE, forBCE, opts)
	if err != nil {
		return nil, err
	}
	dt, err := floatPair(opBCE, "logits", "targets", logits, targets)
	if err != nil {
		return nil, err
	}
	shape := logits.Shape().Clone()
	if !operand.SameShape(shape, targets.Shape()) {
		return nil, fmt.Errorf("%s: targets of shape %v must have the logits' shape %v: %w", opBCE, targets.Shape(), shape, gather.ErrShape)
	}
	if _, err := operand.Size(opBCE, "logits", shape); err != nil {
		return nil, err
	}
	o := &bceOp{dtype: dt, shape: shape, reduction: c.loss.reduction, f: operand.PickFloat(dt, &bce32, &bce64)}
	if c.given&optPosWeight != 0 {
		cols := 1
		if len(shape) > 0 {
			cols = shape[len(shape)-1]
		}
		if o.pos, err = classVector(opBCE, "pos weight", c.loss.posWeight, dt, cols); err != nil {
			return nil, err
		}
	}
	x := operand.Type(len(shape), dt)
	out := o.outShape()
	o.Op = opkit.New(opkit.Sig{Name: o.name(), In: []hm.Type{x, x}, Dtype: dt, Shape: out, Diff: []bool{true, false}}, o.pos)
	grad := opkit.Sig{Name: o.name() + "Grad", In: []hm.Type{x, x, operand.Type(len(out), dt)}, Dtype: dt, Shape: shape}
	o.Grads, o.What = []*opkit.Grad{opkit.NewGrad(grad, o.runGrad, o.ID()), nil}, opBCE
	return opkit.Apply(opBCE, o, logits, targets)
}

// classVector checks that w, the option named what, is a vector of n values
// of dtype dt, and returns a copy of its values in float64.
func classVector(op, what string, w tensor.Tensor, dt tensor.Dtype, n int) ([]float64, error) {
	if w == nil {
		return nil, fmt.Errorf("%s: the %s is nil: %w", op, what, gather.ErrShape)
	}
	d, err := operand.Read(op, what, w)
	if err != nil {
		return nil, err
	}
	if d.Dtype() != dt {
		return nil, fmt.Errorf("%s: the %s is %v, the logits %v: %w", op, what, d.Dtype(), dt, gather.ErrDtype)
	}
	if !operand.SameShape(d.Shape(), []int{n}) {
		return nil, fmt.Errorf("%s: the %s has shape %v, want (%d), one per class: %w", op, what, d.Shape(), n, gather.ErrShape)
	}
	out := make([]float64, n)
	floatsFor(dt).toFloat64(out, d)
	return out, nil
}

// bceOp is the op of BCEWithLogits: logits and targets in, the reduced
// loss (a scalar) or the losses (the logits' shape) out.
type bceOp struct {
	opkit.Diff
	dtype     tensor.Dtype
	shape     tensor.Shape
	reduction Reduction
	pos       []float64   // nil: 1 for every column
	f         *bceKernels // the loops for dtype
}

// bceArgs are the checked values of a run.
type bceArgs struct {
	x, y *tensor.Dense
	cols int
}

func (o *bceOp) args(in []gorgonia.Value, want int) (bceArgs, error) {
	if err := operand.CheckArity(opBCE, "", len(in), want); err != nil {
		return bceArgs{}, err
	}
	var a bceArgs
	for k, what := range []string{"logits", "targets"} {
		t, err := operand.Read(opBCE, what, in[k])
		if err != nil {
			return a, err
		}
		if t.Dtype() != o.dtype || !operand.SameShape(t.Shape(), o.shape) {
			return a, fmt.Errorf("%s: %s are %v of shape %v, want %v of shape %v: %w", opBCE, what, t.Dtype(), t.Shape(), o.dtype, o.shape, gather.ErrShape)
		}
		if k == 0 {
			a.x = t
		} else {
			a.y = t
		}
	}
	a.cols = 1
	if len(o.shape) > 0 {
		a.cols = o.shape[len(o.shape)-1]
	}
	return a, nil
}

func (o *bceOp) outShape() tensor.Shape {
	if o.reduction == ReduceNone {
		return o.shape.Clone()
	}
	return tensor.ScalarShape()
}

func (o *bceOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) { return o.UsePreallocDo(nil, in...) }

// UsePreallocDo returns the loss in prealloc when it can hold it (a
// scalar of the op's dtype, or see operand.Prealloc for ReduceNone), else
// in a new value.
func (o *bceOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	a, err := o.args(in, 2)
	if err != nil {
		return nil, err
	}
	n := o.shape.TotalSize()
	if o.reduction == ReduceNone {
		if n == 0 {
			return tensor.New(tensor.Of(o.dtype), tensor.WithShape(o.shape.Clone()...)), nil
		}
		out := operand.Prealloc(prealloc, o.dtype, o.shape, in)
		if n > 0 {
			o.f.each(out, a.x, a.y, o.pos, a.cols)
		}
		return out, nil
	}
	var sum float64
	if n > 0 {
		sum = o.f.sum(a.x, a.y, o.pos, a.cols)
	}
	if o.reduction == ReduceMean {
		sum /= float64(n) // NaN for no elements, as a mean over nothing is
	}
	return operand.ScalarOut(prealloc, o.dtype, sum), nil
}

// name returns the op's name, e.g. "BCEWithLogits{mean}".
func (o *bceOp) name() string {
	if o.pos != nil {
		return fmt.Sprintf("BCEWithLogits{%v, posWeight}", o.reduction)
	}
	return fmt.Sprintf("BCEWithLogits{%v}", o.reduction)
}

// runGrad writes (or with add, adds) into dst the gradient of the logits
// in[0] for the targets in[1] and the upstream gradient in[2] (a scalar,
// or shaped like the logits for ReduceNone), after checking every
// argument, so that dst is untouched on error.
func (o *bceOp) runGrad(dst *tensor.Dense, add bool, in []gorgonia.Value) error {
	if dst.Dtype() != o.dtype || !operand.SameShape(dst.Shape(), o.shape) || !operand.Writable(dst) {
		return fmt.Errorf("%s gradient: destination is %v of shape %v, want a row-major %v tensor of shape %v: %w",
			opBCE, dst.Dtype(), dst.Shape(), o.dtype, o.shape, gather.ErrShape)
	}
	a, err := o.args(in, 3)
	if err != nil {
		return err
	}
	n := o.shape.TotalSize()
	var scale float64
	var ups *tensor.Dense
	if o.reduction == ReduceNone {
		if ups, err = operand.Read(opBCE, "upstream gradient", in[2]); err != nil {
			return err
		}
		if ups.Dtype() != o.dtype || !operand.SameShape(ups.Shape(), o.shape) {
			return fmt.Errorf("%s gradient: upstream gradient is %v of shape %v, want %v of shape %v: %w", opBCE, ups.Dtype(), ups.Shape(), o.dtype, o.shape, gather.ErrShape)
		}
	} else {
		up, err := operand.Scalar("upstream gradient", in[2])
		if err != nil {
			return fmt.Errorf("%s gradient: %w", opBCE, err)
		}
		scale = up
		if o.reduction == ReduceMean {
			scale /= float64(n)
		}
	}
	if n == 0 {
		return nil
	}
	o.f.grad(dst, a.x, a.y, ups, o.pos, a.cols, scale, add)
	return nil
}

var (
	_ gorgonia.SDOp = (*bceOp)(nil)
	_ gorgonia.ADOp = (*bceOp)(nil)
)

// bceKernels are BCEWithLogits's loops for one dtype, chosen when the op
// is built.
type bceKernels struct {
	sum  func(x, y *tensor.Dense, pos []float64, cols int) float64
	each func(out, x, y *tensor.Dense, pos []float64, cols int)
	grad func(dst, x, y, up *tensor.Dense, pos []float64, cols int, scale float64, add bool)
}

// The loops for float32 and float64 values, made once.
var bce32, bce64 = bceKernelsOf[float32](), bceKernelsOf[float64]()

// bceKernelsOf returns the loops for values of Go type T.
func bceKernelsOf[T kernel.Float]() bceKernels {
	f := operand.Floats[T]
	return bceKernels{
		sum:  func(x, y *tensor.Dense, pos []float64, cols int) float64 { return kernel.BCESum(f(x), f(y), pos, cols) },
		each: func(out, x, y *tensor.Dense, pos []float64, cols int) { kernel.BCEEach(f(out), f(x), f(y), pos, cols) },
		grad: func(dst, x, y, up *tensor.Dense, pos []float64, cols int, scale float64, add bool) {
			kernel.BCEGrad(f(dst), f(x), f(y), f(up), pos, cols, scale, add)
		},
	}
}
