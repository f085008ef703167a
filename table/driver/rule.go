package driver

import (
	"context"

	"gorgonia.org/tensor"
)

// A Rule updates rows of a table by their gradients: an optimiser for
// row gradients. It keeps no state of its own: the table keeps it, in
// its Columns beside each row, with one step count, so one Rule value
// may step any number of tables.
type Rule interface {
	// Name names the update ("sparse_adam"), under which a store that
	// applies rules on its servers registers its encoding of it.
	Name() string
	// Columns returns the state each row of a table dim wide carries.
	Columns(dim int) []Column
	// StepRows updates the rows g names, and their state, where r holds
	// them. It must not keep g after it returns. On error nothing
	// changed.
	StepRows(r Rows, g *RowGrad) error
	// Check reports the error StepRows would report for step t and the
	// gradient g of rows dim wide, for a store that applies the rule
	// elsewhere: bad settings, a malformed gradient, values not finite.
	Check(t int64, g *RowGrad, dim int) error
}

// A Column is one part of the state each row of a table carries beside
// its values: Width values of the table's dtype, named Name, each Init in
// a new row.
type Column struct {
	Name  string
	Width int
	Init  float64
}

// Rows are rows of a table as StepRows updates them: row g.Rows[k] of the
// table, with its state, is row Slots[k] of Weight and of each State
// tensor, or row g.Rows[k] itself when Slots is nil.
type Rows struct {
	Weight *tensor.Dense   // [n, dim], the rows' values
	State  []*tensor.Dense // one per column of Columns, [n, width], the rows' state
	Slots  []int64         // one per row of the gradient, distinct; nil: the rows themselves
	Step   int64           // this step's number, from 1: the table's step count plus one
}

// A Params rule says the numbers its update at step t uses: its
// settings and what depends on the step (bias corrections), rounded as
// its Go update rounds them, in the order that a store's own encoding of
// the rule reads them (cluster.RegisterRule). optim's sparse optimisers
// are Params rules.
type Params interface {
	Params(t int64) []float64
}

// A Stepper holds a table's rows and steps them.
type Stepper interface {
	// Step applies r to the rows g names and counts the step: the
	// rows' update is step Steps()+1 of r. On error the step is not
	// counted.
	Step(ctx context.Context, r Rule, g *RowGrad) error
	// Steps returns the steps taken.
	Steps() int64
}

// SameColumns reports whether a and b name the same columns of the same
// widths (their Init values may differ: they only start a table).
func SameColumns(a, b []Column) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if a[k].Name != b[k].Name || a[k].Width != b[k].Width {
			return false
		}
	}
	return true
}
