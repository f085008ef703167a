package optim

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
)

// RowWiseAdagrad is Adagrad with one accumulator per row instead of one
// per element, FBGEMM's EXACT_ROWWISE_ADAGRAD (the optimiser TorchRec
// uses for large tables): its state is a vocabulary-long vector rather
// than a second table. For each row r the gradient names, with g its
// gradient (dim values, WeightDecay·w added first, FBGEMM's L2 mode),
//
//	s[r] += mean over j of g[j]²
//	w[r][j] -= LearnRate · g[j] / (sqrt(s[r]) + Eps)
//
// computed in float64, s kept in the table's dtype. Other rows and their
// accumulators are left alone. NewRowWiseAdagrad sets Eps to 1e-8,
// FBGEMM's default; Step refuses a learning rate or weight decay that is
// negative or not finite, and an Eps not above 0.
//
// A RowWiseAdagrad belongs to the first table it steps, as SparseAdam does
// (ErrOtherTable for another). A step is O(len(g.Rows) × dim); the state
// takes vocab values of the table's dtype, allocated at the first Step.
type RowWiseAdagrad struct {
	LearnRate   float64
	Eps         float64
	WeightDecay float64
	// CheckFinite makes Step refuse a gradient that holds a NaN or an
	// infinity: an error wrapping ErrNotFinite that names the row, with
	// the table and the sums unchanged.
	CheckFinite bool

	table uintptr // address of the table's first element; 0 before the first Step
	sum   any     // []float32 or []float64, one per row
}

// NewRowWiseAdagrad returns a RowWiseAdagrad with learning rate lr and
// Eps 1e-8.
func NewRowWiseAdagrad(lr float64) *RowWiseAdagrad {
	return &RowWiseAdagrad{LearnRate: lr, Eps: 1e-8}
}

// Step updates table in place.
func (o *RowWiseAdagrad) Step(table *tensor.Dense, g *RowGrad) error {
	if err := checkRates("rowwise adagrad", o.LearnRate, o.WeightDecay); err != nil {
		return err
	}
	if !(o.Eps > 0) || math.IsInf(o.Eps, 1) {
		return fmt.Errorf("rowwise adagrad: Eps %v must be above 0 and finite (NewRowWiseAdagrad sets 1e-8): %w", o.Eps, gather.ErrOption)
	}
	dim, err := checkRowGrad("rowwise adagrad", table, g, o.CheckFinite)
	if err != nil {
		return err
	}
	if err := o.bind(table); err != nil {
		return err
	}
	operand.PickFloat(table.Dtype(), adagradRows[float32], adagradRows[float64])(o, table, g, dim)
	return nil
}

// adagradRows is kernel.AdagradRows for a table of Go type T.
func adagradRows[T kernel.Float](o *RowWiseAdagrad, table *tensor.Dense, g *RowGrad, dim int) {
	f := operand.Floats[T]
	kernel.AdagradRows(f(table), f(g.Values), o.sum.([]T), g.Rows, dim, o.LearnRate, o.Eps, o.WeightDecay)
}

// bind makes o the optimiser of table, allocating its state at the first
// call, or reports that o belongs to another table.
func (o *RowWiseAdagrad) bind(table *tensor.Dense) error {
	rows := table.Shape()[0]
	switch {
	case o.table == 0:
		o.table = table.Uintptr()
		o.sum = zeros(table.Dtype(), rows)
	case table.Uintptr() != o.table || momentLen(o.sum) != rows:
		return fmt.Errorf("rowwise adagrad: stepped on a %v table of shape %v, but it keeps the state of another; use one RowWiseAdagrad per table: %w",
			table.Dtype(), table.Shape(), ErrOtherTable)
	}
	return nil
}

// state returns the accumulators under "<name>.sum", zeros before the
// first Step.
func (o *RowWiseAdagrad) state(name string, table *tensor.Dense) (map[string]tensor.Tensor, error) {
	if o.table != 0 && o.table != table.Uintptr() {
		return nil, fmt.Errorf("rowwise adagrad: its state belongs to another table than %q: %w", name, ErrOtherTable)
	}
	s := o.sum
	if s == nil {
		s = zeros(table.Dtype(), table.Shape()[0])
	}
	return map[string]tensor.Tensor{name + ".sum": tensor.New(tensor.WithShape(table.Shape()[0]), tensor.WithBacking(s))}, nil
}

// setState binds o to table with the accumulators given.
func (o *RowWiseAdagrad) setState(name string, table *tensor.Dense, tensors map[string]*tensor.Dense) error {
	t := tensors[name+".sum"]
	if t == nil {
		return fmt.Errorf("rowwise adagrad: no %q: %w", name+".sum", checkpoint.ErrFormat)
	}
	o.sum, o.table = t.Data(), table.Uintptr()
	return nil
}
