package checkpoint

import (
	"errors"
	"fmt"
	"strconv"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
)

// A Delta is the rows of a table that training changed since the last
// delta: the published part of a model that keeps training, which a
// server applies to the table it serves (serve.Table.Apply) instead of
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

// ErrDelta: a delta that does not follow the version it is applied to
// (another base, or a sequence number not one more than the served one).
var ErrDelta = errors.New("delta does not follow the served version")

// The metadata keys of a delta file.
const (
	deltaTableKey = "gathergrad.delta.table"
	deltaBaseKey  = "gathergrad.delta.base"
	deltaSeqKey   = "gathergrad.delta.seq"
	deltaTimeKey  = "gathergrad.delta.time"
)

// Check reports an error wrapping ErrShape unless d is well formed: a
// name, a positive Dim, Seq from 1, Rows distinct, ascending and not
// negative, and Dim values for each.
func (d *Delta) Check() error {
	switch {
	case d.Table == "":
		return fmt.Errorf("checkpoint: a delta needs its table's name: %w", errs.ErrShape)
	case d.Dim <= 0:
		return fmt.Errorf("checkpoint: delta of %q: rows of %d values: %w", d.Table, d.Dim, errs.ErrShape)
	case d.Seq == 0:
		return fmt.Errorf("checkpoint: delta of %q: sequence numbers start at 1: %w", d.Table, errs.ErrShape)
	case len(d.Values) != len(d.Rows)*d.Dim:
		return fmt.Errorf("checkpoint: delta of %q: %d values for %d rows of %d: %w", d.Table, len(d.Values), len(d.Rows), d.Dim, errs.ErrShape)
	case len(d.AssignedRows) != len(d.AssignedIDs):
		return fmt.Errorf("checkpoint: delta of %q: %d rows assigned to %d ids: %w", d.Table, len(d.AssignedRows), len(d.AssignedIDs), errs.ErrShape)
	}
	for k, r := range d.AssignedRows {
		if r < 0 {
			return fmt.Errorf("checkpoint: delta of %q: row %d assigned at %d: %w", d.Table, r, k, errs.ErrShape)
		}
	}
	for k, r := range d.Rows {
		if r < 0 || k > 0 && r <= d.Rows[k-1] {
			return fmt.Errorf("checkpoint: delta of %q: row %d at %d: rows are distinct, ascending and not negative: %w", d.Table, r, k, errs.ErrShape)
		}
	}
	return nil
}

// WriteDelta writes d to path as a safetensors file ("<table>.rows",
// int64 [n], "<table>.values", float32 [n, dim], and with assignments
// "<table>.assigned", int64 [m, 2] of (row, id); the table, base and
// sequence in its metadata) as Write writes: atomically, every tensor's
// CRC-32C beside it. A delta that is not well formed (Check) is an error
// and nothing is written. It is O(len(d.Rows)·d.Dim).
func WriteDelta(path string, d *Delta) error {
	if err := d.Check(); err != nil {
		return err
	}
	rows := tensor.New(tensor.WithShape(len(d.Rows)), tensor.WithBacking(d.Rows))
	vals := tensor.New(tensor.WithShape(len(d.Rows), d.Dim), tensor.WithBacking(d.Values))
	if len(d.Rows) == 0 {
		rows = tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(0))
		vals = tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(0, d.Dim))
	}
	meta := map[string]string{
		deltaTableKey: d.Table,
		deltaBaseKey:  strconv.FormatUint(d.Base, 10),
		deltaSeqKey:   strconv.FormatUint(d.Seq, 10),
	}
	if d.Time != 0 {
		meta[deltaTimeKey] = strconv.FormatInt(d.Time, 10)
	}
	ts := map[string]tensor.Tensor{d.Table + ".rows": rows, d.Table + ".values": vals}
	if n := len(d.AssignedRows); n > 0 {
		pairs := make([]int64, 0, 2*n)
		for k, r := range d.AssignedRows {
			pairs = append(pairs, r, d.AssignedIDs[k])
		}
		ts[d.Table+".assigned"] = tensor.New(tensor.WithShape(n, 2), tensor.WithBacking(pairs))
	}
	return Write(path, ts, meta)
}

// ReadDelta reads a delta WriteDelta wrote. A file that is not one (no
// delta metadata, other tensors, shapes or dtypes that do not fit, a
// delta not well formed), or whose bytes fail their CRC-32C, is an error
// wrapping ErrFormat or ErrShape, never a panic.
func ReadDelta(path string) (*Delta, error) {
	ts, meta, err := Read(path)
	if err != nil {
		return nil, err
	}
	name := meta[deltaTableKey]
	base, berr := strconv.ParseUint(meta[deltaBaseKey], 10, 64)
	seq, serr := strconv.ParseUint(meta[deltaSeqKey], 10, 64)
	assigned := ts[name+".assigned"]
	want := 2
	if assigned != nil {
		want = 3
	}
	if name == "" || berr != nil || serr != nil || len(ts) != want {
		return nil, formatError(path, "not a delta: its metadata (%q %q %q) or its %d tensors", name, meta[deltaBaseKey], meta[deltaSeqKey], len(ts))
	}
	rows, vals := ts[name+".rows"], ts[name+".values"]
	if rows == nil || vals == nil || rows.Dtype() != tensor.Int64 || vals.Dtype() != tensor.Float32 ||
		rows.Dims() != 1 || vals.Dims() != 2 || vals.Shape()[0] != rows.Shape()[0] {
		return nil, formatError(path, "not a delta of %q: its tensors %q and %q", name, name+".rows", name+".values")
	}
	d := &Delta{Table: name, Base: base, Seq: seq, Dim: vals.Shape()[1]}
	if v, ok := meta[deltaTimeKey]; ok {
		if d.Time, err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, formatError(path, "a delta of %q whose time is %q", name, v)
		}
	}
	if rows.Shape()[0] > 0 {
		d.Rows, d.Values = rows.Int64s(), vals.Float32s()
	}
	if assigned != nil {
		if assigned.Dtype() != tensor.Int64 || assigned.Dims() != 2 || assigned.Shape()[1] != 2 {
			return nil, formatError(path, "not a delta of %q: its tensor %q", name, name+".assigned")
		}
		for k, v := range assigned.Int64s() {
			if k%2 == 0 {
				d.AssignedRows = append(d.AssignedRows, v)
			} else {
				d.AssignedIDs = append(d.AssignedIDs, v)
			}
		}
	}
	if err := d.Check(); err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	return d, nil
}
