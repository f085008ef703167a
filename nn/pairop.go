package nn

import (
	"fmt"

	"github.com/chewxy/hm"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
)

// pairOp is the plumbing of an op of two float operands of fixed shapes,
// one dtype, and a gradient op for each (BatchDot, DotInteraction): its
// run and its gradients' runs read and check their arguments here, and
// compute in the kernels the op gives.
type pairOp struct {
	opkit.Diff
	name   string    // the op, in errors
	args   [2]string // the operands' names, in errors
	dtype  tensor.Dtype
	shapes [3]tensor.Shape // the operands' and the output's: made once, as a run checks them
	run    func(out, a, b *tensor.Dense)
	grad   func(dst, a, b, g *tensor.Dense, wrt int, add bool)
}

// newPairOp returns the op named name of the operands a and b (dtype dt,
// checked by floatPair), its output of shape out, its Sig named sig,
// computing by run and its gradients by grad.
func newPairOp(name, sig string, args [2]string, dt tensor.Dtype, a, b, out tensor.Shape,
	run func(out, a, b *tensor.Dense), grad func(dst, a, b, g *tensor.Dense, wrt int, add bool)) *pairOp {
	o := &pairOp{name: name, args: args, dtype: dt, shapes: [3]tensor.Shape{a, b, out}, run: run, grad: grad}
	in := []hm.Type{operand.Type(len(a), dt), operand.Type(len(b), dt)}
	o.Diff = opkit.NewDiff(opkit.Sig{Name: sig, In: in, Dtype: dt, Shape: out}, name, []tensor.Shape{a, b}, o.runGrad)
	return o
}

// operands reads and checks the two operands of in (want values in all).
func (o *pairOp) operands(in []gorgonia.Value, want int) (a, b *tensor.Dense, err error) {
	if err := operand.CheckArity(o.name, "", len(in), want); err != nil {
		return nil, nil, err
	}
	if a, err = operand.Read(o.name, o.args[0], in[0]); err != nil {
		return nil, nil, err
	}
	if b, err = operand.Read(o.name, o.args[1], in[1]); err != nil {
		return nil, nil, err
	}
	if a.Dtype() != o.dtype || b.Dtype() != o.dtype || !operand.SameShape(a.Shape(), o.shapes[0]) || !operand.SameShape(b.Shape(), o.shapes[1]) {
		return nil, nil, fmt.Errorf("%s: %s is %v of shape %v and %s %v of shape %v, want %v of shapes %v and %v: %w",
			o.name, o.args[0], a.Dtype(), a.Shape(), o.args[1], b.Dtype(), b.Shape(), o.dtype, o.shapes[0], o.shapes[1], gather.ErrShape)
	}
	return a, b, nil
}

// Do computes into a new tensor.
func (o *pairOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) { return o.UsePreallocDo(nil, in...) }

// UsePreallocDo computes into prealloc when it can hold the output (see
// operand.Prealloc), else into a new tensor.
func (o *pairOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	a, b, err := o.operands(in, 2)
	if err != nil {
		return nil, err
	}
	out := operand.Prealloc(prealloc, o.dtype, o.shapes[2], in)
	if o.shapes[2].TotalSize() > 0 {
		o.run(out, a, b)
	}
	return out, nil
}

// runGrad returns the Run of the gradient of operand wrt, from the
// operands and the upstream gradient: every argument is checked before
// dst is written.
func (o *pairOp) runGrad(wrt int) opkit.Run {
	return func(dst *tensor.Dense, add bool, in []gorgonia.Value) error {
		want := o.shapes[wrt]
		if dst.Dtype() != o.dtype || !operand.SameShape(dst.Shape(), want) || !operand.Writable(dst) {
			return fmt.Errorf("%s gradient: destination is %v of shape %v, want a row-major %v tensor of shape %v: %w",
				o.name, dst.Dtype(), dst.Shape(), o.dtype, want, gather.ErrShape)
		}
		a, b, err := o.operands(in, 3)
		if err != nil {
			return err
		}
		g, err := operand.Read(o.name, "upstream gradient", in[2])
		if err != nil {
			return err
		}
		if g.Dtype() != o.dtype || !operand.SameShape(g.Shape(), o.shapes[2]) {
			return fmt.Errorf("%s gradient: upstream gradient is %v of shape %v, want %v of shape %v: %w",
				o.name, g.Dtype(), g.Shape(), o.dtype, o.shapes[2], gather.ErrShape)
		}
		if dst.Shape().TotalSize() > 0 {
			o.grad(dst, a, b, g, wrt, add)
		}
		return nil
	}
}

var (
	_ gorgonia.SDOp = (*pairOp)(nil)
	_ gorgonia.ADOp = (*pairOp)(nil)
)
