package nn

import (
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/shapes"
)

// gradRun writes, or with add adds, a gradient op's result into dst, after
// checking dst and every input, so that dst is untouched on error. The
// gradient ops of the losses and of BatchDot share their Do,
// UsePreallocDo and IncrDo through it. Without add it writes every element
// of dst.
type gradRun func(dst *tensor.Dense, add bool, in []gorgonia.Value) error

// doNew runs run into a new tensor of dtype dt and shape shape, whose
// memory is not cleared first (operand.NewOutput): run writes all of it.
func doNew(dt tensor.Dtype, shape tensor.Shape, in []gorgonia.Value, run gradRun) (gorgonia.Value, error) {
	out := operand.NewOutput(dt, shape)
	if err := run(out, false, in); err != nil {
		return nil, err
	}
	return out, nil
}

// doPrealloc runs run into prealloc when it can hold the result (a
// row-major tensor of dtype dt and shape shape, not a view, sharing memory
// with no input), else into a new tensor.
func doPrealloc(prealloc gorgonia.Value, dt tensor.Dtype, shape tensor.Shape, in []gorgonia.Value, run gradRun) (gorgonia.Value, error) {
	out, ok := prealloc.(*tensor.Dense)
	if !ok || out.Dtype() != dt || !shapes.SameShape(out.Shape(), shape) || !operand.Writable(out) {
		return doNew(dt, shape, in, run)
	}
	for _, v := range in {
		if overlapsValue(out, v) {
			return doNew(dt, shape, in, run)
		}
	}
	if err := run(out, false, in); err != nil {
		return nil, err
	}
	return out, nil
}

// doIncr runs run adding into toIncr; op names the op in the error for a
// toIncr that is not a *tensor.Dense.
func doIncr(op string, toIncr gorgonia.Value, in []gorgonia.Value, run gradRun) error {
	dst, ok := toIncr.(*tensor.Dense)
	if !ok {
		return fmt.Errorf("%s gradient: cannot add into a %T: %w", op, toIncr, gather.ErrDtype)
	}
	return run(dst, true, in)
}

// overlapsValue reports whether out shares memory with the value v.
func overlapsValue(out *tensor.Dense, v gorgonia.Value) bool {
	t, ok := v.(*tensor.Dense)
	return ok && operand.Overlaps(out, t)
}

// logitGrads returns, for the DoDiff of the loss named op (inputs logits
// and targets), the gradient the logits already hold, which DoDiff adds
// into, and the loss's upstream gradient.
func logitGrads(op string, inputs gorgonia.Nodes, output *gorgonia.Node) (dg, up gorgonia.Value, err error) {
	if err := operand.CheckArity(op, "", len(inputs), 2); err != nil {
		return nil, nil, err
	}
	if dg, err = inputs[0].Grad(); err != nil {
		return nil, nil, fmt.Errorf("%s: logits have no gradient to add into: %w", op, errs.Graph(err))
	}
	if up, err = output.Grad(); err != nil {
		return nil, nil, fmt.Errorf("%s: the loss has no gradient: %w", op, errs.Graph(err))
	}
	return dg, up, nil
}
