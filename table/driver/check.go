package driver

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
)

// The checks of a rule's StepRows and Check, which this module's rules
// run and a rule written elsewhere may run too: each returns an error
// naming op, the rule, and the offending value, wrapping one of package
// gather's sentinels (or ErrNotFinite).

// CheckRows checks that g can update the rows r holds, with the state
// cols(dim) of the rule named op (for its errors), and returns g with its rows replaced by
// their slots (g itself without slots), and dim. With finite, g's values
// must be finite. The rows of g must be in increasing order and in the
// table; slots may come in any order.
func CheckRows(op string, r Rows, g *RowGrad, cols func(int) []Column, finite bool) (*RowGrad, int, error) {
	w := r.Weight
	if w == nil || g == nil || g.Values == nil {
		return nil, 0, fmt.Errorf("%s: table and gradient must not be nil: %w", op, errs.ErrShape)
	}
	if err := checkFloat(op, "the table", w.Dtype()); err != nil {
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
		if err := CheckFinite(op, g); err != nil {
			return nil, 0, err
		}
	}
	return sg, dim, nil
}

// CheckFinite reports an error wrapping ErrNotFinite, naming the row and
// column, if g, a float32 or float64 gradient of shape [len(g.Rows),
// dim], holds a NaN or an infinity.
func CheckFinite(op string, g *RowGrad) error {
	if p := firstNonFinite(g.Values); p >= 0 {
		dim := g.Values.Shape()[1]
		return fmt.Errorf("%s: the gradient of row %d holds %v at column %d; nothing was updated: %w",
			op, g.Rows[p/dim], g.Values.Get(p), p%dim, errs.ErrNotFinite)
	}
	return nil
}

// firstNonFinite returns the position of the first NaN or infinity of
// t, a float32 or float64 tensor, or -1.
func firstNonFinite(t *tensor.Dense) int {
	if v, ok := t.Data().([]float32); ok {
		return kernel.FirstNonFinite(v)
	}
	if v, ok := t.Data().([]float64); ok {
		return kernel.FirstNonFinite(v)
	}
	return -1 // a scalar or an empty tensor
}

// checkFloat returns an error wrapping gather.ErrDtype, naming what for
// the rule op, unless dt is float32 or float64.
func checkFloat(op, what string, dt tensor.Dtype) error {
	if dt == tensor.Float32 || dt == tensor.Float64 {
		return nil
	}
	return fmt.Errorf("%s: %s must be float32 or float64, got %v: %w", op, what, dt, errs.ErrDtype)
}

// CheckGrad checks g, a gradient for a step of rows dim wide held
// elsewhere (a rule's Check, for a store that applies it on its
// servers), as CheckRows does: float values of shape [len(g.Rows), dim], rows in increasing
// order, and, with finite, finite values. (The store says which dtypes
// its servers step.)
func CheckGrad(op string, g *RowGrad, dim int, finite bool) error {
	if g == nil || g.Values == nil {
		return fmt.Errorf("%s: the gradient must not be nil: %w", op, errs.ErrShape)
	}
	if err := checkFloat(op, "the gradient", g.Values.Dtype()); err != nil {
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
		return CheckFinite(op, g)
	}
	return nil
}

// CheckRates reports an error wrapping gather.ErrOption unless the
// learning rate lr and the weight decay wd of the rule named op are finite and not negative.
func CheckRates(op string, lr, wd float64) error {
	if !(lr >= 0) || math.IsInf(lr, 1) {
		return fmt.Errorf("%s: learning rate %v must be finite and at least 0: %w", op, lr, errs.ErrOption)
	}
	if !(wd >= 0) || math.IsInf(wd, 1) {
		return fmt.Errorf("%s: weight decay %v must be finite and at least 0: %w", op, wd, errs.ErrOption)
	}
	return nil
}

// CheckColumns reports an error wrapping gather.ErrOption, naming both,
// unless r keeps the state cols beside rows of dim values: a store of
// rows with state cols can be stepped by r.
func CheckColumns(r Rule, dim int, cols []Column) error {
	if want := r.Columns(dim); !SameColumns(want, cols) {
		return fmt.Errorf("the rule %q keeps %v by row; the table holds %v: %w", r.Name(), want, cols, errs.ErrOption)
	}
	return nil
}
