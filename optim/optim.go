package optim

import (
	"context"
	"fmt"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/rowgrad"
)

// A Sparse optimiser is a row rule (driver.Rule): its name, the state each
// row of a table carries beside its values (Columns), the update of the
// rows a gradient names wherever they are held (StepRows), and the
// checks of that update for a store that applies it on its servers
// (Check). SparseSGD, SparseAdam, RowWiseAdagrad and SparseAdagrad are
// Sparse. An optimiser keeps no state of its own: the table keeps it, in
// its columns, with one step count, so one optimiser value may step any
// number of tables. Whatever holds the rows steps them by it
// (driver.Stepper): a MemoryTable, a table.Cached, a cluster.Store.
type Sparse = driver.Rule

// A RowGrad is the gradient of an embedding table held as the rows a
// batch touched (driver.RowGrad).
type RowGrad = driver.RowGrad

// Rows are rows of a table as StepRows updates them (driver.Rows).
type Rows = driver.Rows

// RowGradient sums the gradients of looked-up vectors into the gradients
// of the rows they came from: grad has shape ids.shape + [dim] (the
// gradient of a lookup's output), and ids index rows of a table of vocab
// rows: each in [0, vocab), any other an *gather.IndexError. Repeated
// ids are summed in the order they appear in ids, as IndexAdd sums them
// into a dense gradient, so the two agree exactly. Row pad (if >= 0) is
// left out. It is O(n + n × dim) for n ids (a radix sort of the ids; for
// fewer than 256 ids, or a vocabulary of 2^33 rows or more, a comparison
// sort: O(n log n + n × dim)).
func RowGradient(ids, grad tensor.Tensor, vocab, pad int) (*RowGrad, error) {
	return rowgrad.Build(ids, grad, vocab, pad, nil)
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
	empty  *RowGrad // a gradient of no rows, for StepBlocks' Check
	block  RowGrad  // StepBlocks' block
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
// driver.Stepper interface.
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

// StepBlocks is Step with the row gradient given in blocks, so that the
// whole of it is never built: next sets g to the next block (distinct
// rows in ascending order, none in an earlier block, and their values)
// and reports whether there was one. Each block is updated as part of
// step Steps()+1, which is counted once, after the last; opt's settings
// are checked (Check) before any row moves. A block opt refuses (a
// gradient that is not finite, with CheckFinite) stops the step with the
// blocks before it applied and the step not counted.
func (t *MemoryTable) StepBlocks(_ context.Context, opt Sparse, next func(g *RowGrad) bool) error {
	if opt == nil {
		return fmt.Errorf("optim: StepBlocks needs an optimiser: %w", errs.ErrOption)
	}
	dim := t.Weight.Shape()[1]
	if t.empty == nil {
		t.empty = &RowGrad{Values: tensor.New(tensor.Of(t.Weight.Dtype()), tensor.WithShape(0, dim))}
	}
	if err := opt.Check(t.steps+1, t.empty, dim); err != nil {
		return err
	}
	r := Rows{Weight: t.Weight, State: t.State, Step: t.steps + 1}
	g := &t.block
	for next(g) {
		if err := opt.StepRows(r, g); err != nil {
			*g = RowGrad{}
			return err
		}
	}
	*g = RowGrad{}
	t.steps++
	return nil
}

// Steps returns the steps taken.
func (t *MemoryTable) Steps() int64 { return t.steps }

var _ driver.Stepper = (*MemoryTable)(nil)

// ErrNotFinite: an optimiser asked to check (CheckFinite) was given a
// gradient holding a NaN or an infinity (or serve.Quantize a table).
var ErrNotFinite = errs.ErrNotFinite

// f32 returns x rounded to float32, as a rule's float32 kernel takes its
// settings.
func f32(x float64) float64 { return float64(float32(x)) }
