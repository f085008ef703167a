package driver

import (
	"fmt"

	"github.com/gathergrad/gather/internal/errs"
)

// A Delta is the rows of a table that training changed since the last
// delta: the published part of a model that keeps training, which a
// server applies to the table it serves (serve.Table.Apply, checkpoint.WriteDelta) instead of
// reloading the whole model. Base names the full model the deltas follow
// (the version of the file a server loaded first), Seq counts the deltas
// after it, from 1: a server applies delta Seq only to the version Seq-1
// of Base.
type Delta struct {
	Table  string    // the table's name
	Base   uint64    // the full model's version
	Seq    uint64    // this delta's number after it, from 1
	Dim    int       // the values of a row
	Time   int64     // when the rows were taken, in Unix nanoseconds (0: not known), for a server's lag
	Rows   []int64   // the rows changed, distinct, ascending
	Values []float32 // their values, len(Rows)·Dim, row after row
	// For a table fed raw ids through a map (nn.RawIDs, Feature.IDs):
	// the rows the map gave ids since the last delta, in the order given,
	// AssignedRows[k] to the raw id AssignedIDs[k] (the row's previous
	// id, if any, holds it no more).
	AssignedRows, AssignedIDs []int64
}

// Check reports an error wrapping gather.ErrShape unless d is well formed: a
// name, a positive Dim, Seq from 1, Rows distinct, ascending and not
// negative, and Dim values for each.
func (d *Delta) Check() error {
	switch {
	case d.Table == "":
		return fmt.Errorf("a delta needs its table's name: %w", errs.ErrShape)
	case d.Dim <= 0:
		return fmt.Errorf("delta of %q: rows of %d values: %w", d.Table, d.Dim, errs.ErrShape)
	case d.Seq == 0:
		return fmt.Errorf("delta of %q: sequence numbers start at 1: %w", d.Table, errs.ErrShape)
	case len(d.Values) != len(d.Rows)*d.Dim:
		return fmt.Errorf("delta of %q: %d values for %d rows of %d: %w", d.Table, len(d.Values), len(d.Rows), d.Dim, errs.ErrShape)
	case len(d.AssignedRows) != len(d.AssignedIDs):
		return fmt.Errorf("delta of %q: %d rows assigned to %d ids: %w", d.Table, len(d.AssignedRows), len(d.AssignedIDs), errs.ErrShape)
	}
	for k, r := range d.AssignedRows {
		if r < 0 {
			return fmt.Errorf("delta of %q: row %d assigned at %d: %w", d.Table, r, k, errs.ErrShape)
		}
	}
	for k, r := range d.Rows {
		if r < 0 || k > 0 && r <= d.Rows[k-1] {
			return fmt.Errorf("delta of %q: row %d at %d: rows are distinct, ascending and not negative: %w", d.Table, r, k, errs.ErrShape)
		}
	}
	return nil
}
