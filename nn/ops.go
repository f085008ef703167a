package nn

import (
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
)

// passGrad is embedded in the ops whose gradient is the identity: each
// input its Sig marks as differentiable gets the output's gradient. what
// names the op in errors.
type passGrad struct {
	opkit.Op
	what string
}

// SymDiff gives the inputs the output's gradient.
func (o *passGrad) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if err := errs.CheckGradSize(o.what, grad); err != nil {
		return nil, err
	}
	out := make(gorgonia.Nodes, len(inputs))
	for i, d := range o.DiffWRT(len(inputs)) {
		if d && i < len(out) {
			out[i] = grad
		}
	}
	return out, nil
}

// DoDiff adds the output's gradient into the inputs' gradients, for
// Gorgonia's LispMachine; an input without one (a frozen lookup's) is
// left out.
func (o *passGrad) DoDiff(ctx gorgonia.ExecutionContext, inputs gorgonia.Nodes, output *gorgonia.Node) error {
	up, err := output.Grad()
	if err != nil {
		return fmt.Errorf("%s: %w", o.what, errs.Graph(err))
	}
	for i, d := range o.DiffWRT(len(inputs)) {
		if !d || i >= len(inputs) {
			continue
		}
		if g, err := inputs[i].Grad(); err == nil {
			addGrad(g, up)
		}
	}
	return nil
}

// addGrad adds the gradient up into dg, both float tensors of one shape.
// It does nothing when either is not a *tensor.Dense or both are the same
// tensor.
func addGrad(dg, up gorgonia.Value) {
	d, ok1 := dg.(*tensor.Dense)
	u, ok2 := up.(*tensor.Dense)
	if !ok1 || !ok2 || d == u {
		return
	}
	floatsFor(d.Dtype()).addInto(d, u)
}

// overlapsValue reports whether out shares memory with the value v.
func overlapsValue(out *tensor.Dense, v gorgonia.Value) bool {
	t, ok := v.(*tensor.Dense)
	return ok && operand.Overlaps(out, t)
}

// floatPair returns the dtype of the nodes a and b, named an and bn in
// errors, after checking that both are nodes of one dtype, float32 or
// float64.
func floatPair(op, an, bn string, a, b *gorgonia.Node) (tensor.Dtype, error) {
	if a == nil || b == nil {
		return tensor.Dtype{}, fmt.Errorf("%s: %s and %s must be nodes: %w", op, an, bn, gather.ErrShape)
	}
	dt := a.Dtype()
	if err := operand.CheckFloat(op, an, dt); err != nil {
		return dt, err
	}
	if b.Dtype() != dt {
		return dt, fmt.Errorf("%s: %s are %v, %s %v: %w", op, bn, b.Dtype(), an, dt, gather.ErrDtype)
	}
	return dt, nil
}

// readShaped reads v, the input named what of the op named op, as a
// row-major tensor, after checking that it has dtype dt and shape shape.
func readShaped(op, what string, v gorgonia.Value, dt tensor.Dtype, shape tensor.Shape) (*tensor.Dense, error) {
	t, err := operand.Read(op, what, v)
	if err != nil {
		return nil, err
	}
	if t.Dtype() != dt || !operand.SameShape(t.Shape(), shape) {
		return nil, fmt.Errorf("%s: %s is %v of shape %v, want %v of shape %v: %w", op, what, t.Dtype(), t.Shape(), dt, shape, gather.ErrShape)
	}
	return t, nil
}
