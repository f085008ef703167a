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

// opMSE names MSELoss in error messages.
const opMSE = "mse_loss"

// MSELoss returns the squared error of input against target, PyTorch's
// F.mse_loss: for each element l = (x - y)². input is float32 or float64
// of any shape; target has its shape and dtype. Option: WithReduction
// (ReduceMean, the default, over every element: NaN for no elements, as
// in PyTorch; ReduceSum; ReduceNone, a loss per element). The gradient
// flows to input and to target, in both of Gorgonia's machines:
//
//	∂l/∂x = 2·(x - y),  ∂l/∂y = -2·(x - y)
//
// (divided by the number of elements for ReduceMean). Sums accumulate in
// float64. A rating model's loss (matrix factorisation on MovieLens) is
// MSELoss of its predictions against the ratings; metrics.RMSE reports
// the square root of its mean over a held-out set. It is O(size of input)
// forward and backward.
func MSELoss(input, target *gorgonia.Node, opts ...MSEOption) (*gorgonia.Node, error) {
	c, err := newConfig(opMSE, forMSE, opts)
	if err != nil {
		return nil, err
	}
	dt, err := floatPair(opMSE, "input", "target", input, target)
	if err != nil {
		return nil, err
	}
	shape := input.Shape().Clone()
	if !operand.SameShape(shape, target.Shape()) {
		return nil, fmt.Errorf("%s: target of shape %v must have the input's shape %v: %w", opMSE, target.Shape(), shape, gather.ErrShape)
	}
	if _, err := operand.Size(opMSE, "input", shape); err != nil {
		return nil, err
	}
	o := &mseOp{dtype: dt, shape: shape, reduction: c.loss.reduction}
	x := operand.Type(len(shape), dt)
	out := shape.Clone()
	if o.reduction != ReduceNone {
		out = tensor.ScalarShape()
	}
	name := fmt.Sprintf("MSELoss{%v}", o.reduction)
	o.Op = opkit.New(opkit.Sig{Name: name, In: []hm.Type{x, x}, Dtype: dt, Shape: out, Diff: []bool{true, true}})
	o.Grads = make([]*opkit.Grad, 2)
	for i := range 2 {
		g := opkit.Sig{Name: fmt.Sprintf("%sGrad%d", name, i), In: []hm.Type{x, x, operand.Type(len(out), dt)}, Dtype: dt, Shape: shape}
		sign := 1.0
		if i == 1 {
			sign = -1
		}
		o.Grads[i] = opkit.NewGrad(g, o.grad(sign), o.ID(), i)
	}
	o.What = opMSE
	return opkit.Apply(opMSE, o, input, target)
}

// mseOp is the op of MSELoss: input and target in, the reduced loss (a
// scalar) or the losses (the input's shape) out.
type mseOp struct {
	opkit.Diff
	dtype     tensor.Dtype
	shape     tensor.Shape
	reduction Reduction
}

func (o *mseOp) args(in []gorgonia.Value, want int) (x, y *tensor.Dense, err error) {
	if err := operand.CheckArity(opMSE, "", len(in), want); err != nil {
		return nil, nil, err
	}
	if x, err = readShaped(opMSE, "input", in[0], o.dtype, o.shape); err != nil {
		return nil, nil, err
	}
	if y, err = readShaped(opMSE, "target", in[1], o.dtype, o.shape); err != nil {
		return nil, nil, err
	}
	return x, y, nil
}

func (o *mseOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) { return o.UsePreallocDo(nil, in...) }

// UsePreallocDo returns the loss in prealloc when it can hold it (a
// scalar of the op's dtype, or see operand.Prealloc for ReduceNone), else
// in a new value.
func (o *mseOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	x, y, err := o.args(in, 2)
	if err != nil {
		return nil, err
	}
	n := o.shape.TotalSize()
	if o.reduction == ReduceNone {
		if n == 0 {
			return tensor.New(tensor.Of(o.dtype), tensor.WithShape(o.shape.Clone()...)), nil
		}
		out := operand.Prealloc(prealloc, o.dtype, o.shape, in)
		if o.dtype == tensor.Float32 {
			kernel.SquaredErrors(out.Float32s(), x.Float32s(), y.Float32s())
		} else {
			kernel.SquaredErrors(out.Float64s(), x.Float64s(), y.Float64s())
		}
		return out, nil
	}
	var sum float64
	if o.dtype == tensor.Float32 {
		sum = kernel.SquaredErrorSum(x.Float32s(), y.Float32s())
	} else {
		sum = kernel.SquaredErrorSum(x.Float64s(), y.Float64s())
	}
	if o.reduction == ReduceMean {
		sum /= float64(n) // NaN for no elements
	}
	return operand.ScalarOut(prealloc, o.dtype, sum), nil
}

// grad returns the Run of input's gradient (sign 1) or target's (sign
// -1), for the upstream gradient in[2].
func (o *mseOp) grad(sign float64) opkit.Run {
	return func(dst *tensor.Dense, add bool, in []gorgonia.Value) error {
		if dst.Dtype() != o.dtype || !operand.SameShape(dst.Shape(), o.shape) || !operand.Writable(dst) {
			return fmt.Errorf("%s gradient: destination is %v of shape %v, want a row-major %v tensor of shape %v: %w",
				opMSE, dst.Dtype(), dst.Shape(), o.dtype, o.shape, gather.ErrShape)
		}
		x, y, err := o.args(in, 3)
		if err != nil {
			return err
		}
		n := o.shape.TotalSize()
		var ups *tensor.Dense
		scale := 2 * sign
		if o.reduction == ReduceNone {
			if ups, err = readShaped(opMSE, "upstream gradient", in[2], o.dtype, o.shape); err != nil {
				return err
			}
		} else {
			up, err := operand.Scalar("upstream gradient", in[2])
			if err != nil {
				return fmt.Errorf("%s gradient: %w", opMSE, err)
			}
			scale *= up
			if o.reduction == ReduceMean {
				scale /= float64(n)
			}
		}
		if n == 0 {
			return nil
		}
		if o.dtype == tensor.Float32 {
			var u []float32
			if ups != nil {
				u = ups.Float32s()
			}
			kernel.SquaredErrorGrad(dst.Float32s(), x.Float32s(), y.Float32s(), u, scale, add)
		} else {
			var u []float64
			if ups != nil {
				u = ups.Float64s()
			}
			kernel.SquaredErrorGrad(dst.Float64s(), x.Float64s(), y.Float64s(), u, scale, add)
		}
		return nil
	}
}

var (
	_ gorgonia.SDOp = (*mseOp)(nil)
	_ gorgonia.ADOp = (*mseOp)(nil)
)
