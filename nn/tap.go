package nn

import (
	"fmt"
	"sync/atomic"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
)

// tapOp passes a lookup's output through unchanged and sends its gradient
// to a second input, the tap, as well: the tap's gradient is then the
// output's, which RowGrad reads, without a pass over the output to add
// the tap into it. The tap's value is never read.
type tapOp struct {
	opkit.Op
	dtype tensor.Dtype
	shape tensor.Shape
	table string        // how errors name the table: embedding "words"
	runs  *atomic.Int64 // the embedding's count of runs, which Do adds to
}

func (o *tapOp) Arity() int { return 2 }

func (o *tapOp) Type() hm.Type {
	t := operand.Type(len(o.shape), o.dtype)
	return hm.NewFnType(t, t, t)
}

func (o *tapOp) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) { return o.shape.Clone(), nil }

// Do returns the lookup's output itself.
func (o *tapOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity("embedding", " tap", len(in), 2); err != nil {
		return nil, err
	}
	o.runs.Add(1)
	return in[0], nil
}

func (o *tapOp) String() string { return "Tap" }

func (o *tapOp) DiffWRT(int) []bool { return []bool{true, true} }

// SymDiff gives both inputs the output's gradient.
func (o *tapOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if err := errs.CheckGradSize(o.table, output); err != nil {
		return nil, err
	}
	return gorgonia.Nodes{grad, grad}, nil
}

// DoDiff adds the output's gradient into both inputs' gradients.
func (o *tapOp) DoDiff(ctx gorgonia.ExecutionContext, inputs gorgonia.Nodes, output *gorgonia.Node) error {
	up, err := output.Grad()
	if err != nil {
		return fmt.Errorf("embedding tap: %w", errs.Graph(err))
	}
	for _, n := range inputs {
		if g, err := n.Grad(); err == nil { // an input may have none (a frozen lookup)
			addGrad(g, up)
		}
	}
	return nil
}

var (
	_ gorgonia.SDOp = (*tapOp)(nil)
	_ gorgonia.ADOp = (*tapOp)(nil)
)
