package optim

import (
	"context"
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/rule"
)

// A Sparse optimiser is a row rule (rule.Rule): its name, the state each
// row of a table carries beside its values (Columns), the update of the
// rows a gradient names wherever they are held (StepRows), and the
// checks of that update for a store that applies it on its servers
// (Check). SparseSGD, SparseAdam, RowWiseAdagrad and SparseAdagrad are
// Sparse. An optimiser keeps no state of its own: the table keeps it, in
// its columns, with one step count, so one optimiser value may step any
// number of tables. Whatever holds the rows steps them by it
// (rule.Stepper): a MemoryTable, a table.Cached, a table.RedisStore.
type Sparse = rule.Rule

// A RowGrad is the gradient of an embedding table held as the rows a
// batch touched (rule.RowGrad).
type RowGrad = rule.RowGrad

// Rows are rows of a table as StepRows updates them (rule.Rows).
type Rows = rule.Rows

// RowGradient is rule.RowGradient: the row gradient of a lookup of ids
// in a table of vocab rows, the padding row pad (if >= 0) left out.
func RowGradient(ids, grad tensor.Tensor, vocab, pad int) (*RowGrad, error) {
	return rule.RowGradient(ids, grad, vocab, pad)
}

// A MemoryTable is a table in memory with the state of the optimiser
// that steps it and its step count: what nn.Embedding keeps for a table
// in the Go heap or mapped from a file, and what a program that steps a
// tensor directly keeps.
//
//	tab, _ := optim.NewMemoryTable(weights, adam)
//	tab.Step(ctx, adam, g)
type MemoryTable struct {
	Weight *tensor.Dense   // [vocab, dim]
	State  []*tensor.Dense // one per column, [vocab, width], the column's Init to start
	steps  int64
}

// NewMemoryTable returns the table weights, a [vocab, dim] float32 or
// float64 matrix (not copied), with the state opt keeps, its Init values,
// and no step taken.
func NewMemoryTable(weights *tensor.Dense, opt Sparse) (*MemoryTable, error) {
	if weights == nil || opt == nil {
		return nil, fmt.Errorf("optim: NewMemoryTable needs weights and an optimiser: %w", errs.ErrOption)
	}
	if err := operand.CheckFloat("optim", "the table", weights.Dtype()); err != nil {
		return nil, err
	}
	sh := weights.Shape()
	if len(sh) != 2 || !operand.Writable(weights) {
		return nil, fmt.Errorf("optim: the table of shape %v must be a row-major matrix that is not a view: %w", sh, errs.ErrShape)
	}
	t := &MemoryTable{Weight: weights}
	for _, c := range opt.Columns(sh[1]) {
		st := tensor.New(tensor.Of(weights.Dtype()), tensor.WithShape(sh[0], c.Width))
		if c.Init != 0 {
			if err := st.Memset(operand.PickFloat(weights.Dtype(), any(float32(c.Init)), any(c.Init))); err != nil {
				return nil, err
			}
		}
		t.State = append(t.State, st)
	}
	return t, nil
}

// Step updates the table by opt from g as step Steps()+1, and counts the
// step. On error nothing changed. It never blocks: ctx is for the
// rule.Stepper interface.
func (t *MemoryTable) Step(_ context.Context, opt Sparse, g *RowGrad) error {
	if opt == nil {
		return fmt.Errorf("optim: Step needs an optimiser: %w", errs.ErrOption)
	}
	if err := opt.StepRows(Rows{Weight: t.Weight, State: t.State, Step: t.steps + 1}, g); err != nil {
		return err
	}
	t.steps++
	return nil
}

// Steps returns the steps taken.
func (t *MemoryTable) Steps() int64 { return t.steps }

var _ rule.Stepper = (*MemoryTable)(nil)

// ErrNotFinite: an optimiser asked to check (CheckFinite) was given a
// gradient holding a NaN or an infinity (or serve.Quantize a table).
var ErrNotFinite = errs.ErrNotFinite

// checkRows checks that g can update the rows r holds, with the state
// cols(dim) of the optimiser op, and returns g with its rows replaced by
// their slots (g itself without slots), and dim. With finite, g's values
// must be finite. The rows of g must be in increasing order and in the
// table; slots may come in any order.
func checkRows(op string, r Rows, g *RowGrad, cols func(int) []rule.Column, finite bool) (*RowGrad, int, error) {
	w := r.Weight
	if w == nil || g == nil || g.Values == nil {
		return nil, 0, fmt.Errorf("%s: table and gradient must not be nil: %w", op, errs.ErrShape)
	}
	if err := operand.CheckFloat(op, "the table", w.Dtype()); err != nil {
		return nil, 0, err
	}
	ws := w.Shape()
	if len(ws) != 2 || !operand.Writable(w) {
		return nil, 0, fmt.Errorf("%s: table of shape %v must be a row-major matrix that is not a view: %w", op, ws, errs.ErrShape)
	}
	n, dim := ws[0], ws[1]
	if w.Dtype() != g.Values.Dtype() {
		return nil, 0, fmt.Errorf("%s: the gradient holds %v values, the table %v: %w", op, g.Values.Dtype(), w.Dtype(), errs.ErrDtype)
	}
	if gs := g.Values.Shape(); len(gs) != 2 || gs[0] != len(g.Rows) || gs[1] != dim {
		return nil, 0, fmt.Errorf("%s: gradient of %d rows has values of shape %v; the table needs shape (%d, %d): %w",
			op, len(g.Rows), gs, len(g.Rows), dim, errs.ErrShape)
	}
	for k, row := range g.Rows {
		if row < 0 || k > 0 && row <= g.Rows[k-1] || r.Slots == nil && row >= int64(n) {
			return nil, 0, fmt.Errorf("%s: gradient row %d at position %d is out of order or out of range: %w", op, row, k, errs.ErrIndexOutOfRange)
		}
	}
	sg := g
	if r.Slots != nil {
		if len(r.Slots) != len(g.Rows) {
			return nil, 0, fmt.Errorf("%s: %d slots for a gradient of %d rows: %w", op, len(r.Slots), len(g.Rows), errs.ErrShape)
		}
		for k, s := range r.Slots {
			if s < 0 || s >= int64(n) {
				return nil, 0, fmt.Errorf("%s: slot %d of gradient row %d is outside [0, %d): %w", op, s, g.Rows[k], n, errs.ErrIndexOutOfRange)
			}
		}
		sg = &RowGrad{Rows: r.Slots, Values: g.Values}
	}
	want := cols(dim)
	if len(r.State) != len(want) {
		return nil, 0, fmt.Errorf("%s: the table keeps %d state tensors, this optimiser %d; a table is stepped by one optimiser: %w", op, len(r.State), len(want), errs.ErrShape)
	}
	for k, c := range want {
		st := r.State[k]
		if st == nil || st.Dtype() != w.Dtype() || len(st.Shape()) != 2 || st.Shape()[0] != n || st.Shape()[1] != c.Width || !operand.Writable(st) {
			return nil, 0, fmt.Errorf("%s: state %q must be a [%d, %d] %v tensor: %w", op, c.Name, n, c.Width, w.Dtype(), errs.ErrShape)
		}
	}
	if r.Step < 1 {
		return nil, 0, fmt.Errorf("%s: step number %d; a table's steps count from 1: %w", op, r.Step, errs.ErrOption)
	}
	if finite {
		if err := checkFinite(op, g); err != nil {
			return nil, 0, err
		}
	}
	return sg, dim, nil
}

// checkFinite reports an error wrapping ErrNotFinite, naming the row and
// column, if g, a float32 or float64 gradient of shape [len(g.Rows),
// dim], holds a NaN or an infinity.
func checkFinite(op string, g *RowGrad) error {
	if p := operand.PickFloat(g.Values.Dtype(), firstNonFinite[float32], firstNonFinite[float64])(g.Values); p >= 0 {
		dim := g.Values.Shape()[1]
		return fmt.Errorf("%s: the gradient of row %d holds %v at column %d; nothing was updated: %w",
			op, g.Rows[p/dim], g.Values.Get(p), p%dim, ErrNotFinite)
	}
	return nil
}

func firstNonFinite[T kernel.Float](t *tensor.Dense) int {
	return kernel.FirstNonFinite(operand.Floats[T](t))
}

// checkServer checks g, a gradient for a server's step of rows dim wide,
// as checkRows does: float values of shape [len(g.Rows), dim], rows in increasing
// order, and, with finite, finite values. (The store says which dtypes
// its servers step.)
func checkServer(op string, g *RowGrad, dim int, finite bool) error {
	if g == nil || g.Values == nil {
		return fmt.Errorf("%s: the gradient must not be nil: %w", op, errs.ErrShape)
	}
	if err := operand.CheckFloat(op, "the gradient", g.Values.Dtype()); err != nil {
		return err
	}
	gs := g.Values.Shape()
	if len(gs) != 2 || gs[0] != len(g.Rows) || gs[1] != dim || !operand.Writable(g.Values) {
		return fmt.Errorf("%s: gradient of %d rows has values of shape %v; the table needs shape (%d, %d): %w",
			op, len(g.Rows), gs, len(g.Rows), dim, errs.ErrShape)
	}
	for k, row := range g.Rows {
		if row < 0 || k > 0 && row <= g.Rows[k-1] {
			return fmt.Errorf("%s: gradient row %d at position %d is out of order or negative: %w", op, row, k, errs.ErrIndexOutOfRange)
		}
	}
	if finite {
		return checkFinite(op, g)
	}
	return nil
}

// checkRates reports an error unless the learning rate lr and the weight
// decay wd of the optimiser named op are finite and not negative.
func checkRates(op string, lr, wd float64) error {
	if !(lr >= 0) || math.IsInf(lr, 1) {
		return fmt.Errorf("%s: learning rate %v must be finite and at least 0: %w", op, lr, errs.ErrOption)
	}
	if !(wd >= 0) || math.IsInf(wd, 1) {
		return fmt.Errorf("%s: weight decay %v must be finite and at least 0: %w", op, wd, errs.ErrOption)
	}
	return nil
}

// f32 returns x rounded to float32, as a rule's float32 kernel takes its
// settings.
func f32(x float64) float64 { return float64(float32(x)) }
