package optim

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/table"
)

// A RowStepper is a sparse optimiser whose state lives beside each row
// (Columns), so that a cache of rows holds it, and moves it in and out,
// with the row: table.Cached and nn.CachedEmbedding. SparseSGD,
// SparseAdam and RowWiseAdagrad are RowSteppers; StepRows computes what
// Step computes, to the bit.
type RowStepper interface {
	Sparse
	// Columns returns the state each row of a table dim wide carries,
	// for table.WithState and table.OpenCached.
	Columns(dim int) []table.Column
	// StepRows updates the rows g names where r holds them.
	StepRows(r SlotRows, g *RowGrad) error
}

// SlotRows are the rows of a table as a cache holds them: row g.Rows[k]
// of the table, with its state, is row Slots[k] of Weight and of each
// State tensor.
type SlotRows struct {
	Weight *tensor.Dense   // [slots, dim], the rows' values
	State  []*tensor.Dense // one per column of Columns, [slots, width], the rows' state
	Slots  []int           // one per row of the gradient, distinct (a cache's slots of distinct rows)
	Steps  *int64          // the table's step count, which the optimisers that count steps advance
}

// Columns returns no column: SparseSGD keeps no state.
func (o *SparseSGD) Columns(dim int) []table.Column { return nil }

// StepRows updates the rows g names where r holds them, as Step.
func (o *SparseSGD) StepRows(r SlotRows, g *RowGrad) error {
	if err := checkRates("sparse sgd", o.LearnRate, o.WeightDecay); err != nil {
		return err
	}
	sg, dim, err := checkSlotRows("sparse sgd", r, g, o.Columns, o.CheckFinite)
	if err != nil {
		return err
	}
	operand.PickFloat(r.Weight.Dtype(), sgdRows[float32], sgdRows[float64])(r.Weight, sg, dim, o.LearnRate, o.WeightDecay)
	return nil
}

// Columns returns the moments, "exp_avg" and "exp_avg_sq", dim values each.
func (o *SparseAdam) Columns(dim int) []table.Column {
	return []table.Column{{Name: "exp_avg", Width: dim}, {Name: "exp_avg_sq", Width: dim}}
}

// StepRows updates the rows g names where r holds them, as Step, with
// the step count *r.Steps (which it advances) in place of its own.
func (o *SparseAdam) StepRows(r SlotRows, g *RowGrad) error {
	if err := o.check(); err != nil {
		return err
	}
	sg, dim, err := checkSlotRows("sparse adam", r, g, o.Columns, o.CheckFinite)
	if err != nil {
		return err
	}
	if r.Steps == nil || *r.Steps < 0 {
		return fmt.Errorf("sparse adam: needs the table's step count (SlotRows.Steps): %w", gather.ErrOption)
	}
	t := float64(*r.Steps + 1)
	step := o.LearnRate * math.Sqrt(1-math.Pow(o.Beta2, t)) / (1 - math.Pow(o.Beta1, t))
	decay := 1 - o.LearnRate*o.WeightDecay
	operand.PickFloat(r.Weight.Dtype(), adamRows32, adamRows64)(o, r.Weight, sg, r.State[0].Data(), r.State[1].Data(), dim, step, decay)
	*r.Steps++
	return nil
}

// Columns returns the row's accumulator, "sum", one value.
func (o *RowWiseAdagrad) Columns(dim int) []table.Column {
	return []table.Column{{Name: "sum", Width: 1}}
}

// StepRows updates the rows g names where r holds them, as Step.
func (o *RowWiseAdagrad) StepRows(r SlotRows, g *RowGrad) error {
	if err := o.check(); err != nil {
		return err
	}
	sg, dim, err := checkSlotRows("rowwise adagrad", r, g, o.Columns, o.CheckFinite)
	if err != nil {
		return err
	}
	operand.PickFloat(r.Weight.Dtype(), adagradRows[float32], adagradRows[float64])(o, r.Weight, sg, r.State[0].Data(), dim)
	return nil
}

// checkSlotRows checks that g can update the rows r holds, with the state
// cols(dim), and returns g with its rows replaced by their slots, and dim.
func checkSlotRows(op string, r SlotRows, g *RowGrad, cols func(int) []table.Column, finite bool) (*RowGrad, int, error) {
	if r.Weight == nil {
		return nil, 0, fmt.Errorf("%s: the slots' values must not be nil: %w", op, gather.ErrShape)
	}
	sg := &RowGrad{Rows: r.Slots}
	if g != nil {
		sg.Values = g.Values
	}
	dim, err := checkRows(op, r.Weight, sg, false, finite)
	if err != nil {
		return nil, 0, err
	}
	if len(r.Slots) != len(g.Rows) {
		return nil, 0, fmt.Errorf("%s: %d slots for a gradient of %d rows: %w", op, len(r.Slots), len(g.Rows), gather.ErrShape)
	}
	want := cols(dim)
	if len(r.State) != len(want) {
		return nil, 0, fmt.Errorf("%s: %d state tensors; the optimiser keeps %d: %w", op, len(r.State), len(want), gather.ErrShape)
	}
	slots := r.Weight.Shape()[0]
	for k, c := range want {
		st := r.State[k]
		if st == nil || st.Dtype() != r.Weight.Dtype() || len(st.Shape()) != 2 || st.Shape()[0] != slots || st.Shape()[1] != c.Width || !operand.Writable(st) {
			return nil, 0, fmt.Errorf("%s: state %q must be a [%d, %d] %v tensor: %w", op, c.Name, slots, c.Width, r.Weight.Dtype(), gather.ErrShape)
		}
	}
	return sg, dim, nil
}
