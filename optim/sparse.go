package optim

import (
	"errors"
	"fmt"
	"math"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"gorgonia.org/tensor"
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

// SparseAdam is Adam for row gradients with the semantics of PyTorch's
// SparseAdam: only the rows a step's gradient names have their moments
// updated and move; the step count t, used in the bias corrections, counts
// every call of Step. For a named row, with g its gradient,
//
//	m = Beta1*m + (1-Beta1)*g
//	v = Beta2*v + (1-Beta2)*g*g
//	w = w - LearnRate * sqrt(1-Beta2^t)/(1-Beta1^t) * m / (sqrt(v) + Eps)
//
// This differs from dense Adam, which decays the moments of every row on
// every step, so a row keeps moving (by its momentum) on steps that do not
// touch it; here an untouched row stays exactly where it is and its moments
// wait for its next use. WeightDecay, if set, is decoupled (AdamW-style)
// and lazy: a named row is multiplied by 1 - LearnRate*WeightDecay before
// its update; untouched rows are not decayed.
//
// Every field means what it says, zero included: NewSparseAdam sets
// PyTorch's defaults (Beta1 0.9, Beta2 0.999, Eps 1e-8). Step refuses
// values PyTorch refuses (a learning rate or weight decay that is negative
// or not finite, a beta outside [0, 1), Eps not above 0), so a literal
// that leaves Eps at zero fails at once.
//
// A SparseAdam belongs to the first table it steps: its moments, two
// buffers of the table's size and dtype allocated at the first Step, and
// its step count describe that table alone, and Step on another table
// (another tensor, even of the same shape) is an error wrapping
// ErrOtherTable. Use one SparseAdam per table. A step is
// O(len(g.Rows) × dim). A float32 table is updated in float32 arithmetic,
// as PyTorch updates one (eight elements at a time with AVX where the
// processor has it, to the same bits); a float64 table in float64.
type SparseAdam struct {
	LearnRate   float64
	Beta1       float64
	Beta2       float64
	Eps         float64
	WeightDecay float64
	// CheckFinite makes Step refuse a gradient that holds a NaN or an
	// infinity: an error wrapping ErrNotFinite that names the row, with
	// the table, the moments and the step count unchanged.
	CheckFinite bool

	t     int
	table uintptr // address of the table's first element; 0 before the first Step
	m, v  any     // []float32 or []float64, the table's dtype
}

// ErrOtherTable: an optimiser that keeps state for one table was stepped
// on another.
var ErrOtherTable = errors.New("optimiser belongs to another table")

// NewSparseAdam returns a SparseAdam with learning rate lr and PyTorch's
// other defaults.
func NewSparseAdam(lr float64) *SparseAdam {
	return &SparseAdam{LearnRate: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
}

// Step updates table in place.
func (o *SparseAdam) Step(table *tensor.Dense, g *RowGrad) error {
	dim, err := checkRowGrad("sparse adam", table, g, o.CheckFinite)
	if err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	n := table.Shape().TotalSize()
	switch {
	case o.table == 0:
		o.table = table.Uintptr()
		o.m, o.v = zeros(table.Dtype(), n), zeros(table.Dtype(), n)
	case table.Uintptr() != o.table || momentLen(o.m) != n:
		return fmt.Errorf("sparse adam: stepped on a %v table of shape %v, but it keeps the moments of another; use one SparseAdam per table: %w",
			table.Dtype(), table.Shape(), ErrOtherTable)
	}
	b1, b2 := o.Beta1, o.Beta2
	o.t++
	step := o.LearnRate * math.Sqrt(1-math.Pow(b2, float64(o.t))) / (1 - math.Pow(b1, float64(o.t)))
	decay := 1 - o.LearnRate*o.WeightDecay
	operand.PickFloat(table.Dtype(), adamRows32, adamRows64)(o, table, g, o.m, o.v, dim, step, decay)
	return nil
}

// check reports an error unless o's settings are ones PyTorch accepts.
func (o *SparseAdam) check() error {
	if err := checkRates("sparse adam", o.LearnRate, o.WeightDecay); err != nil {
		return err
	}
	if err := checkBetas("sparse adam", o.Beta1, o.Beta2); err != nil {
		return err
	}
	if !(o.Eps > 0) {
		return fmt.Errorf("sparse adam: Eps %v must be above 0 (NewSparseAdam sets 1e-8): %w", o.Eps, gather.ErrOption)
	}
	return nil
}

// adamRows32 updates a float32 table in float32 arithmetic, as PyTorch
// updates one (kernel.AdamRows32).
func adamRows32(o *SparseAdam, table *tensor.Dense, g *RowGrad, m, v any, dim int, step, decay float64) {
	b1, b2 := o.Beta1, o.Beta2
	c := &kernel.AdamConsts{B1: float32(b1), C1: float32(1 - b1), B2: float32(b2), C2: float32(1 - b2),
		Eps: float32(o.Eps), Step: float32(step), Decay: float32(decay)}
	kernel.AdamRows32(table.Float32s(), g.Values.Float32s(), m.([]float32), v.([]float32), g.Rows, dim, c)
}

// adamRows64 updates a float64 table (kernel.AdamRows).
func adamRows64(o *SparseAdam, table *tensor.Dense, g *RowGrad, m, v any, dim int, step, decay float64) {
	kernel.AdamRows(table.Float64s(), g.Values.Float64s(), m.([]float64), v.([]float64), g.Rows, dim, o.Beta1, o.Beta2, o.Eps, step, decay)
}

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
	if err := o.check(); err != nil {
		return err
	}
	dim, err := checkRowGrad("rowwise adagrad", table, g, o.CheckFinite)
	if err != nil {
		return err
	}
	if err := o.bind(table); err != nil {
		return err
	}
	operand.PickFloat(table.Dtype(), adagradRows[float32], adagradRows[float64])(o, table, g, o.sum, dim)
	return nil
}

// check reports an error unless o's settings are usable.
func (o *RowWiseAdagrad) check() error {
	if err := checkRates("rowwise adagrad", o.LearnRate, o.WeightDecay); err != nil {
		return err
	}
	if !(o.Eps > 0) || math.IsInf(o.Eps, 1) {
		return fmt.Errorf("rowwise adagrad: Eps %v must be above 0 and finite (NewRowWiseAdagrad sets 1e-8): %w", o.Eps, gather.ErrOption)
	}
	return nil
}

// adagradRows is kernel.AdagradRows for a table of Go type T.
func adagradRows[T kernel.Float](o *RowWiseAdagrad, table *tensor.Dense, g *RowGrad, sum any, dim int) {
	f := operand.Floats[T]
	kernel.AdagradRows(f(table), f(g.Values), sum.([]T), g.Rows, dim, o.LearnRate, o.Eps, o.WeightDecay)
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
