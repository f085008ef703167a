package optim

import (
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
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
	// CheckFinite makes Step refuse a gradient that holds a NaN or an
	// infinity: an error wrapping ErrNotFinite that names the row, with
	// nothing updated.
	CheckFinite bool
}

// Step updates table in place. It is O(len(g.Rows) × dim). A learning
// rate or weight decay that is negative or not finite is an error wrapping
// gather.ErrOption, and the table is left as it was.
func (o *SparseSGD) Step(table *tensor.Dense, g *RowGrad) error {
	if err := checkRates("sparse sgd", o.LearnRate, o.WeightDecay); err != nil {
		return err
	}
	dim, err := checkRowGrad("sparse sgd", table, g, o.CheckFinite)
	if err != nil {
		return err
	}
	operand.PickFloat(table.Dtype(), sgdRows[float32], sgdRows[float64])(table, g, dim, o.LearnRate, o.WeightDecay)
	return nil
}

// sgdRows is kernel.SGDRows for a table of Go type T.
func sgdRows[T kernel.Float](table *tensor.Dense, g *RowGrad, dim int, lr, wd float64) {
	f := operand.Floats[T]
	kernel.SGDRows(f(table), f(g.Values), g.Rows, dim, T(lr), T(wd))
}
