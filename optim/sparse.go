package optim

import (
	"fmt"
	"math"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
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
// It keeps no state. A step is O(len(g.Rows) × dim); a learning rate or
// weight decay that is negative or not finite is an error wrapping
// errs.ErrOption, and the table is left as it was.
type SparseSGD struct {
	LearnRate   float64
	WeightDecay float64
	// CheckFinite makes a step refuse a gradient that holds a NaN or an
	// infinity: an error wrapping ErrNotFinite that names the row, with
	// nothing updated.
	CheckFinite bool
}

// Name returns "sparse_sgd".
func (o *SparseSGD) Name() string { return "sparse_sgd" }

// Params returns the numbers of the update at step t, for a store that
// applies the rule on its servers (driver.Params).
func (o *SparseSGD) Params(int64) []float64 {
	return []float64{f32(o.LearnRate), f32(o.WeightDecay)}
}

// Columns returns no column: SparseSGD keeps no state.
func (o *SparseSGD) Columns(dim int) []driver.Column { return nil }

// StepRows updates the rows g names where r holds them.
func (o *SparseSGD) StepRows(r Rows, g *RowGrad) error {
	if err := driver.CheckRates("sparse sgd", o.LearnRate, o.WeightDecay); err != nil {
		return err
	}
	sg, dim, err := driver.CheckRows("sparse sgd", r, g, o.Columns, o.CheckFinite)
	if err != nil {
		return err
	}
	operand.PickFloat(r.Weight.Dtype(), sgdRows[float32], sgdRows[float64])(r.Weight, sg, dim, o.LearnRate, o.WeightDecay)
	return nil
}

// Check reports the error StepRows would report for step t and the
// gradient g of rows dim wide.
func (o *SparseSGD) Check(t int64, g *RowGrad, dim int) error {
	if err := driver.CheckRates("sparse sgd", o.LearnRate, o.WeightDecay); err != nil {
		return err
	}
	return driver.CheckGrad("sparse sgd", g, dim, o.CheckFinite)
}

// sgdRows is kernel.SGDRows for a table of Go type T.
func sgdRows[T kernel.Float](table *tensor.Dense, g *RowGrad, dim int, lr, wd float64) {
	f := operand.Floats[T]
	kernel.SGDRows(f(table), f(g.Values), g.Rows, dim, T(lr), T(wd))
}

// SparseAdam is Adam for row gradients with the semantics of PyTorch's
// SparseAdam: only the rows a step's gradient names have their moments
// updated and move; the step number t, used in the bias corrections, is
// the table's (every step of the table counts). For a named row, with g
// its gradient,
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
// PyTorch's defaults (Beta1 0.9, Beta2 0.999, Eps 1e-8). A step refuses
// values PyTorch refuses (a learning rate or weight decay that is negative
// or not finite, a beta outside [0, 1), Eps not above 0), so a literal
// that leaves Eps at zero fails at once.
//
// The moments are the columns "exp_avg" and "exp_avg_sq", dim values a
// row each. A float32 table is updated in float32 arithmetic, as PyTorch
// updates one, but with the operations in another order: its values agree
// with PyTorch's to a few float32 ulps, not to the bit. (Eight elements
// are updated at a time with AVX where the processor has it, to the same
// bits as the Go loop.) A float64 table is updated in float64.
type SparseAdam struct {
	LearnRate   float64
	Beta1       float64
	Beta2       float64
	Eps         float64
	WeightDecay float64
	// CheckFinite makes a step refuse a gradient that holds a NaN or an
	// infinity: an error wrapping ErrNotFinite that names the row, with
	// the table and its state unchanged.
	CheckFinite bool
}

// NewSparseAdam returns a SparseAdam with learning rate lr and PyTorch's
// other defaults.
func NewSparseAdam(lr float64) *SparseAdam {
	return &SparseAdam{LearnRate: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
}

// Name returns "sparse_adam".
func (o *SparseAdam) Name() string { return "sparse_adam" }

// Params returns the numbers of the update at step t, for a store that
// applies the rule on its servers (driver.Params).
func (o *SparseAdam) Params(t int64) []float64 {
	c := o.consts32(o.step(t))
	return []float64{float64(c.B1), float64(c.C1), float64(c.B2), float64(c.C2), float64(c.Eps), float64(c.Step), float64(c.Decay)}
}

// Columns returns the moments, "exp_avg" and "exp_avg_sq", dim values each.
func (o *SparseAdam) Columns(dim int) []driver.Column {
	return []driver.Column{{Name: "exp_avg", Width: dim}, {Name: "exp_avg_sq", Width: dim}}
}

// StepRows updates the rows g names where r holds them, as step r.Step.
func (o *SparseAdam) StepRows(r Rows, g *RowGrad) error {
	if err := o.check(); err != nil {
		return err
	}
	sg, dim, err := driver.CheckRows("sparse adam", r, g, o.Columns, o.CheckFinite)
	if err != nil {
		return err
	}
	step, decay := o.step(r.Step)
	if r.Weight.Dtype() == tensor.Float32 {
		c := o.consts32(step, decay)
		kernel.AdamRows32(r.Weight.Float32s(), sg.Values.Float32s(), r.State[0].Float32s(), r.State[1].Float32s(), sg.Rows, dim, &c)
		return nil
	}
	kernel.AdamRows(r.Weight.Float64s(), sg.Values.Float64s(), r.State[0].Float64s(), r.State[1].Float64s(), sg.Rows, dim, o.Beta1, o.Beta2, o.Eps, step, decay)
	return nil
}

// Check reports the error StepRows would report for step t and the
// gradient g of rows dim wide.
func (o *SparseAdam) Check(t int64, g *RowGrad, dim int) error {
	if err := o.check(); err != nil {
		return err
	}
	if t < 1 {
		return fmt.Errorf("sparse adam: step number %d; steps count from 1: %w", t, errs.ErrOption)
	}
	return driver.CheckGrad("sparse adam", g, dim, o.CheckFinite)
}

// step returns the step size and the decay factor of step t.
func (o *SparseAdam) step(t int64) (step, decay float64) {
	tf := float64(t)
	return o.LearnRate * math.Sqrt(1-math.Pow(o.Beta2, tf)) / (1 - math.Pow(o.Beta1, tf)), 1 - o.LearnRate*o.WeightDecay
}

// consts32 returns the settings of a step as the float32 kernel takes them.
func (o *SparseAdam) consts32(step, decay float64) kernel.AdamConsts {
	b1, b2 := o.Beta1, o.Beta2
	return kernel.AdamConsts{B1: float32(b1), C1: float32(1 - b1), B2: float32(b2), C2: float32(1 - b2),
		Eps: float32(o.Eps), Step: float32(step), Decay: float32(decay)}
}

// check reports an error unless o's settings are ones PyTorch accepts.
func (o *SparseAdam) check() error {
	if err := driver.CheckRates("sparse adam", o.LearnRate, o.WeightDecay); err != nil {
		return err
	}
	if err := checkBetas("sparse adam", o.Beta1, o.Beta2); err != nil {
		return err
	}
	if !(o.Eps > 0) {
		return fmt.Errorf("sparse adam: Eps %v must be above 0 (NewSparseAdam sets 1e-8): %w", o.Eps, errs.ErrOption)
	}
	return nil
}

// RowWiseAdagrad is Adagrad with one accumulator per row instead of one
// per element, FBGEMM's EXACT_ROWWISE_ADAGRAD (the optimiser TorchRec
// uses for large tables): its state is one value a row (the column
// "sum") rather than a second table. For each row r the gradient names,
// with g its gradient (dim values, WeightDecay·w added first, FBGEMM's L2
// mode),
//
//	s[r] += mean over j of g[j]²
//	w[r][j] -= LearnRate · g[j] / (sqrt(s[r]) + Eps)
//
// computed in float64, s kept in the table's dtype. Other rows and their
// accumulators are left alone. NewRowWiseAdagrad sets Eps to 1e-8,
// FBGEMM's default; a step refuses a learning rate or weight decay that
// is negative or not finite, and an Eps not above 0. A step is
// O(len(g.Rows) × dim).
type RowWiseAdagrad struct {
	LearnRate   float64
	Eps         float64
	WeightDecay float64
	// CheckFinite makes a step refuse a gradient that holds a NaN or an
	// infinity: an error wrapping ErrNotFinite that names the row, with
	// the table and the sums unchanged.
	CheckFinite bool
}

// NewRowWiseAdagrad returns a RowWiseAdagrad with learning rate lr and
// Eps 1e-8.
func NewRowWiseAdagrad(lr float64) *RowWiseAdagrad {
	return &RowWiseAdagrad{LearnRate: lr, Eps: 1e-8}
}

// Name returns "rowwise_adagrad".
func (o *RowWiseAdagrad) Name() string { return "rowwise_adagrad" }

// Params returns the numbers of the update at step t, for a store that
// applies the rule on its servers (driver.Params).
func (o *RowWiseAdagrad) Params(int64) []float64 {
	return []float64{o.LearnRate, o.Eps, o.WeightDecay}
}

// Columns returns the row's accumulator, "sum", one value.
func (o *RowWiseAdagrad) Columns(dim int) []driver.Column {
	return []driver.Column{{Name: "sum", Width: 1}}
}

// StepRows updates the rows g names where r holds them.
func (o *RowWiseAdagrad) StepRows(r Rows, g *RowGrad) error {
	if err := o.check(); err != nil {
		return err
	}
	sg, dim, err := driver.CheckRows("rowwise adagrad", r, g, o.Columns, o.CheckFinite)
	if err != nil {
		return err
	}
	operand.PickFloat(r.Weight.Dtype(), adagradRows[float32], adagradRows[float64])(o, r.Weight, sg, r.State[0], dim)
	return nil
}

// Check reports the error StepRows would report for step t and the
// gradient g of rows dim wide.
func (o *RowWiseAdagrad) Check(t int64, g *RowGrad, dim int) error {
	if err := o.check(); err != nil {
		return err
	}
	return driver.CheckGrad("rowwise adagrad", g, dim, o.CheckFinite)
}

// stepless marks an optimiser whose checkpointed state holds no step
// count (see State).
func (o *RowWiseAdagrad) stepless() {}

// check reports an error unless o's settings are usable.
func (o *RowWiseAdagrad) check() error {
	if err := driver.CheckRates("rowwise adagrad", o.LearnRate, o.WeightDecay); err != nil {
		return err
	}
	if !(o.Eps > 0) || math.IsInf(o.Eps, 1) {
		return fmt.Errorf("rowwise adagrad: Eps %v must be above 0 and finite (NewRowWiseAdagrad sets 1e-8): %w", o.Eps, errs.ErrOption)
	}
	return nil
}

// adagradRows is kernel.AdagradRows for a table of Go type T.
func adagradRows[T kernel.Float](o *RowWiseAdagrad, table *tensor.Dense, g *RowGrad, sum *tensor.Dense, dim int) {
	f := operand.Floats[T]
	kernel.AdagradRows(f(table), f(g.Values), f(sum), g.Rows, dim, o.LearnRate, o.Eps, o.WeightDecay)
}
