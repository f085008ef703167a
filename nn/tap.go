package nn

import (
	"sync/atomic"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/operand"
)

// tapOp passes a lookup's output through unchanged and sends its gradient
// to a second input, the tap, as well: the tap's gradient is then the
// output's, which RowGrad reads, without a pass over the output to add
// the tap into it. The tap's value is never read.
type tapOp struct {
	passGrad
	dtype tensor.Dtype
	shape tensor.Shape
	table string        // how errors name the table: embedding "words"
	runs  *atomic.Int64 // the embedding's count of runs, which Do adds to
}

// Do returns the lookup's output itself.
func (o *tapOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity("embedding", " tap", len(in), 2); err != nil {
		return nil, err
	}
	o.runs.Add(1)
	return in[0], nil
}

var _ gorgonia.ADOp = (*tapOp)(nil)
