package optim

import (
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/kernel"
)

// SparseSGD is stochastic gradient descent on the rows a RowGrad names:
// each such row w becomes
//
//	w - lr*(g + wd*w)
//
// and every other row is left alone. Without weight decay this equals
// dense SGD (gorgonia.VanillaSolver) on the dense gradient exactly, since
// untouched rows have zero gradient. With weight decay it is lazy: dense
// SGD with L2 regularisation would also shrink untouched rows every step.
// A SparseSGD keeps no state, so one value may step any number of tables.
type SparseSGD struct {
	LearnRate   float64
	WeightDecay float64
}

// Step updates table in place. It is O(len(g.Rows) × dim). A learning
// rate or weight decay that is negative or not finite is an error wrapping
// gather.ErrOption, and the table is left as it was.
func (o *SparseSGD) Step(table *tensor.Dense, g *RowGrad) error {
	if err := checkRates("sparse sgd", o.LearnRate, o.WeightDecay); err != nil {
		return err
	}
	dim, err := checkRowGrad("sparse sgd", table, g)
	if err != nil {
		return err
	}
	switch table.Dtype() {
	case tensor.Float32:
		kernel.SGDRows(table.Float32s(), g.Values.Float32s(), g.Rows, dim, float32(o.LearnRate), float32(o.WeightDecay))
	case tensor.Float64:
		kernel.SGDRows(table.Float64s(), g.Values.Float64s(), g.Rows, dim, o.LearnRate, o.WeightDecay)
	}
	return nil
}
