package nn

import (
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
)

// tapOp passes a lookup's output through unchanged and sends its gradient
// to a second input, the tap, as well. The tap's gradient is a captureOp
// of the output's: the backward pass of each run copies the run's ids and
// the gradient each position's row received into the lookup's capture,
// which RowGrad and Step read. The tap's value is never read.
type tapOp struct {
	passGrad
	dtype tensor.Dtype
	shape tensor.Shape
	cap   *capture
}

// Through says the output is input 0, the lookup's (graphop.Through).
func (o *tapOp) Through() int { return 0 }

// Do returns the lookup's output itself.
func (o *tapOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity("embedding", " tap", len(in), 2); err != nil {
		return nil, err
	}
	return in[0], nil
}

// SymDiff gives the output its gradient and the tap a captureOp of it.
func (o *tapOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if err := errs.CheckGradSize(o.what, grad); err != nil {
		return nil, err
	}
	c := o.cap
	in := append(gorgonia.Nodes{grad, c.ids}, c.inputs...)
	types := make([]hm.Type, len(in))
	for k, n := range in {
		types[k] = n.Type()
	}
	op := &captureOp{cap: c, Op: opkit.New(opkit.Sig{Name: "Capture", PassThrough: true, In: types, Dtype: o.dtype, Shape: o.shape}, fmt.Sprintf("%p", c))}
	n, err := gorgonia.ApplyOp(op, in...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.table, errs.Graph(err))
	}
	return gorgonia.Nodes{grad, n}, nil
}

// DoDiff adds the output's gradient into the inputs' (Gorgonia's
// LispMachine) and captures it with the ids, as captureOp does.
func (o *tapOp) DoDiff(ctx gorgonia.ExecutionContext, inputs gorgonia.Nodes, output *gorgonia.Node) error {
	if err := o.passGrad.DoDiff(ctx, inputs, output); err != nil {
		return err
	}
	up, err := output.Grad()
	if err != nil {
		return fmt.Errorf("%s: %w", o.what, errs.Graph(err))
	}
	vals := make([]gorgonia.Value, len(o.cap.inputs))
	for k, n := range o.cap.inputs {
		vals[k] = n.Value()
	}
	return o.cap.take(up, o.cap.ids.Value(), vals)
}

var _ gorgonia.ADOp = (*tapOp)(nil)

// captureOp is the gradient of a lookup's tap: it takes the lookup's
// upstream gradient, its ids and, for a bag, the bag op's inputs, records
// them in the lookup's capture (capture.take) and returns the gradient.
type captureOp struct {
	opkit.Op
	cap *capture
}

// Do captures the run's ids and row gradient and returns in[0].
func (o *captureOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity("embedding", " capture", len(in), 2+len(o.cap.inputs)); err != nil {
		return nil, err
	}
	if err := o.cap.take(in[0], in[1], in[2:]); err != nil {
		return nil, err
	}
	return in[0], nil
}

// A capture is one lookup's part of the row gradient, taken by the
// backward pass of the run that computed it, as PyTorch's sparse gradient
// carries its indices: a copy of the ids the run looked up and the
// gradient each position's row received. RowGrad and Step read it, never
// the graph's nodes, so that ids bound, or another machine run, after the
// run change nothing trained. A later run that computes the gradient
// again replaces it.
type capture struct {
	table   string         // how errors name the table: embedding "words"
	ids     *gorgonia.Node // the lookup's ids
	bag     *bagOp         // for a bag: its op
	inputs  gorgonia.Nodes // for a bag: the op's inputs
	freq    bool           // WithScaleGradByFreq
	vocab   int
	shape   tensor.Shape // a bag's gradient by position: ids.shape + [dim]
	scratch argScratch   // a max bag's argmax

	idv   *tensor.Dense // the ids of the last run that computed the gradient
	grad  *tensor.Dense // their rows' gradient by position: ids.shape + [dim]
	fresh bool          // taken since the last Step
}

// take records the ids and the upstream gradient up of a run (for a bag,
// with the values of its op's inputs), as the gradient of each position's
// row. On error the capture is left as it was, and not fresh.
func (c *capture) take(up, ids gorgonia.Value, bagIn []gorgonia.Value) error {
	c.fresh = false
	g, err := operand.Read("embedding", "gradient", up)
	if err != nil {
		return fmt.Errorf("%s: %w", c.table, err)
	}
	iv, err := operand.Read("embedding", "ids", ids)
	if err != nil {
		return fmt.Errorf("%s: %w", c.table, err)
	}
	ix, err := operand.ReadIndices("embedding", "ids", iv)
	if err != nil {
		return fmt.Errorf("%s: %w", c.table, err)
	}
	if c.bag == nil {
		c.grad = keepCopy(c.grad, g)
	} else {
		a, err := c.bag.args(bagIn)
		if err != nil {
			return fmt.Errorf("%s: %w", c.table, err)
		}
		o := c.bag
		c.grad = reuse(c.grad, o.dtype, c.shape)
		if c.grad.Shape().TotalSize() > 0 {
			floatsFor(o.dtype).positionGrad(c.grad, g, a.table, a, o.vocab, o.dim, &c.scratch)
		}
		a.release()
	}
	if c.freq {
		floatsFor(c.grad.Dtype()).divideByFreq(c.grad, ix, c.vocab)
	}
	c.idv = keepCopy(c.idv, iv)
	c.fresh = true
	return nil
}

// check reports an error unless the capture holds a gradient, taken since
// the last Step if fresh is set.
func (c *capture) check(fresh bool) error {
	if c.idv == nil {
		return fmt.Errorf("%s: the graph has not run: run it (vm.RunAll) with the gradient (gorgonia.Grad of GradNodes) before Step or RowGrad: %w", c.table, gather.ErrGraph)
	}
	if fresh && !c.fresh {
		return fmt.Errorf("%s: no run of the graph computed a gradient since the last Step: the gradient was used; run the graph first: %w", c.table, gather.ErrGraph)
	}
	return nil
}

// reuse returns t reshaped to shape if it holds a tensor of dtype dt and
// that size, else a new tensor of zeros.
func reuse(t *tensor.Dense, dt tensor.Dtype, shape tensor.Shape) *tensor.Dense {
	if t != nil && t.Dtype() == dt && !shape.IsScalar() && operand.SameShape(t.Shape(), shape) {
		return t
	}
	return tensor.New(tensor.Of(dt), tensor.WithShape(shape.Clone()...))
}

// keepCopy returns a copy of src, a row-major tensor, in t's memory when
// reuse can give it.
func keepCopy(t, src *tensor.Dense) *tensor.Dense {
	if src.IsScalar() {
		return src.Clone().(*tensor.Dense)
	}
	t = reuse(t, src.Dtype(), src.Shape())
	if src.Shape().TotalSize() > 0 {
		copy(t.Uint8s(), src.Uint8s())
	}
	return t
}
