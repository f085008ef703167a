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
	"github.com/gathergrad/gather/internal/shapes"
)

// opInteract names DotInteraction in error messages.
const opInteract = "dot_interaction"

// DotInteraction returns DLRM's dot interaction of a dense vector and f
// pooled sparse vectors of the same width d per sample: x is [n, d] (the
// bottom MLP's output), s is [n, f·d] (a Collection's output, each
// feature d wide), and out is [n, d + (f+1)·f/2]: x, then the dot products
// of every pair i < j of the f+1 vectors (x first), row by row of the
// strict upper triangle, as facebookresearch/dlrm's interact_features
// builds it with torch.bmm and an index of the triangle:
//
//	T := cat([x, s], 1).view(n, f+1, d)
//	out = cat([x, (T @ T.transpose(1, 2))[:, i, j] for i < j], 1)
//
// For DLRM's 26 features of 16 columns: [n, 16] and [n, 416] in, [n, 367]
// out. x and s are float32 or float64, of one dtype. Gradients flow to
// both, in both of Gorgonia's machines. It is O(n·f²·d) forward and
// backward, and makes no [n, f+1, f+1] product.
func DotInteraction(x, s *gorgonia.Node) (*gorgonia.Node, error) {
	dt, err := floatPair(opInteract, "x", "s", x, s)
	if err != nil {
		return nil, err
	}
	xs, ss := x.Shape(), s.Shape()
	if len(xs) != 2 || len(ss) != 2 || xs[0] != ss[0] || xs[1] == 0 || ss[1]%xs[1] != 0 {
		return nil, fmt.Errorf("%s: x of shape %v and s of shape %v must be [n, d] and [n, f·d]: %w", opInteract, xs, ss, gather.ErrShape)
	}
	o := &interactOp{dtype: dt, n: xs[0], d: xs[1], f: ss[1] / xs[1]}
	o.shapes = [3]tensor.Shape{{o.n, o.d}, {o.n, o.f * o.d}, {o.n, o.d + (o.f+1)*o.f/2}}
	in := []hm.Type{operand.Type(2, dt), operand.Type(2, dt)}
	o.Diff = opkit.NewDiff(opkit.Sig{Name: fmt.Sprintf("DotInteraction{%d, %d, %d}", o.n, o.d, o.f), In: in, Dtype: dt,
		Shape: o.shapes[2]}, opInteract, []tensor.Shape{xs, ss}, o.runGrad)
	return opkit.Apply(opInteract, o, x, s)
}

// interactOp is the op of DotInteraction.
type interactOp struct {
	opkit.Diff
	dtype   tensor.Dtype
	n, d, f int
	shapes  [3]tensor.Shape // x, s and the output
}

// args reads and checks x and s.
func (o *interactOp) args(in []gorgonia.Value, want int) (x, s *tensor.Dense, err error) {
	if err := operand.CheckArity(opInteract, "", len(in), want); err != nil {
		return nil, nil, err
	}
	if x, err = operand.Read(opInteract, "x", in[0]); err != nil {
		return nil, nil, err
	}
	if s, err = operand.Read(opInteract, "s", in[1]); err != nil {
		return nil, nil, err
	}
	if x.Dtype() != o.dtype || s.Dtype() != o.dtype || !shapes.SameShape(x.Shape(), o.shapes[0]) || !shapes.SameShape(s.Shape(), o.shapes[1]) {
		return nil, nil, fmt.Errorf("%s: x is %v of shape %v and s %v of shape %v, want %v of shapes %v and %v: %w",
			opInteract, x.Dtype(), x.Shape(), s.Dtype(), s.Shape(), o.dtype, o.shapes[0], o.shapes[1], gather.ErrShape)
	}
	return x, s, nil
}

// Do computes the interaction into a new tensor.
func (o *interactOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	return o.UsePreallocDo(nil, in...)
}

// UsePreallocDo computes the interaction into prealloc when it can hold
// it (see operand.Prealloc), else into a new tensor.
func (o *interactOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	x, s, err := o.args(in, 2)
	if err != nil {
		return nil, err
	}
	out := operand.Prealloc(prealloc, o.dtype, o.shapes[2], in)
	if o.n == 0 {
		return out, nil
	}
	operand.PickFloat(o.dtype, interact[float32], interact[float64])(out, x, s, o.n, o.d, o.f)
	return out, nil
}

func interact[T kernel.Float](out, x, s *tensor.Dense, n, d, f int) {
	kernel.DotInteract(operand.Floats[T](out), operand.Floats[T](x), operand.Floats[T](s), n, d, f)
}

func interactGrad[T kernel.Float](dst, x, s, g *tensor.Dense, n, d, f, wrt int, add bool) {
	fl := operand.Floats[T]
	kernel.DotInteractGrad(fl(dst), fl(x), fl(s), fl(g), n, d, f, wrt, add)
}

// runGrad returns the Run of the gradient of x (wrt 0) or s (wrt 1): every
// argument is checked before dst is written.
func (o *interactOp) runGrad(wrt int) opkit.Run {
	return func(dst *tensor.Dense, add bool, in []gorgonia.Value) error {
		want := o.shapes[wrt]
		if dst.Dtype() != o.dtype || !shapes.SameShape(dst.Shape(), want) || !shapes.Writable(dst) {
			return fmt.Errorf("%s gradient: destination is %v of shape %v, want a row-major %v tensor of shape %v: %w",
				opInteract, dst.Dtype(), dst.Shape(), o.dtype, want, gather.ErrShape)
		}
		x, s, err := o.args(in, 3)
		if err != nil {
			return err
		}
		g, err := operand.Read(opInteract, "upstream gradient", in[2])
		if err != nil {
			return err
		}
		if g.Dtype() != o.dtype || !shapes.SameShape(g.Shape(), o.shapes[2]) {
			return fmt.Errorf("%s gradient: upstream gradient is %v of shape %v, want %v of shape %v: %w",
				opInteract, g.Dtype(), g.Shape(), o.dtype, o.shapes[2], gather.ErrShape)
		}
		if o.n == 0 {
			return nil
		}
		operand.PickFloat(o.dtype, interactGrad[float32], interactGrad[float64])(dst, x, s, g, o.n, o.d, o.f, wrt, add)
		return nil
	}
}

var (
	_ gorgonia.SDOp = (*interactOp)(nil)
	_ gorgonia.ADOp = (*interactOp)(nil)
)
