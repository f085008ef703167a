package serve

import (
	"fmt"
	"runtime"

	"github.com/gathergrad/gather/table/driver"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
)

// ErrDelta: a delta that does not follow the table's version
// (checkpoint.ErrDelta): answer with a full reload of the model.
var ErrDelta = checkpoint.ErrDelta

// Version returns the table's version: the full model's base (At) and the
// deltas applied after it (Apply).
func (t *Table) Version() (base, seq uint64) { return t.base, t.seq }

// At returns the table as version base of its model with no delta
// applied, the version the first delta after base follows: a new Table
// sharing t's rows (t is left as it is).
func (t *Table) At(base uint64) *Table {
	u := *t
	u.base, u.seq, u.m = base, 0, nil
	return &u
}

// Named returns the table named name, the name its model's deltas give it
// (driver.Delta.Table: an nn.Embedding's name): a new Table sharing
// t's rows and version (t is left as it is). Open names its tables after
// their tensors; a Quantize table is named here before Apply.
func (t *Table) Named(name string) *Table {
	u := *t
	u.name, u.m = name, nil
	return &u
}

// Name returns the table's name (Named, Open), "" when it has none.
func (t *Table) Name() string { return t.name }

// Apply returns the table with the delta d applied: a new Table whose rows
// d names hold d's values in the table's format (an Int8 or Int4 row
// quantized alone, as Quantize quantizes it) and whose other rows are t's,
// at version (d.Base, d.Seq). t is not changed, so that a request that
// took t answers with t whole while the new table is made. A delta of
// another table (d.Table not t's name), or any delta for a table with no
// name, is an error wrapping ErrDelta. A server swaps
// the new table in (live.Holder.Update) and each request reads one
// version. The new table shares t's memory: the chunks of 16 rows that d
// touches are copied, the rest shared, so Apply costs time and memory in
// proportion to d's rows; it yields the processor to other goroutines
// every 1,024 rows. A table Open mapped stays the owner of that
// memory: Close it only when no table Apply made from it is in use.
//
// A delta that does not follow t (another Base, or Seq not t's plus one)
// is an error wrapping ErrDelta, to be answered by a full reload; one of
// another table shape, with a row outside the table, or with a value the
// format cannot hold (see Quantize) is an error wrapping ErrShape,
// ErrIndexOutOfRange or ErrNotFinite; on error no table is made.
func (t *Table) Apply(d *driver.Delta) (*Table, error) {
	if t.closed {
		return nil, fmt.Errorf("serve: %w", errs.ErrClosed)
	}
	if err := d.Check(); err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	if t.name == "" {
		return nil, fmt.Errorf("serve: a delta of %q for a table with no name: name the table (Named) so that Apply can tell its deltas from another table's: %w", d.Table, ErrDelta)
	}
	if d.Table != t.name {
		return nil, fmt.Errorf("serve: a delta of %q for table %q: %w", d.Table, t.name, ErrDelta)
	}
	if d.Base != t.base || d.Seq != t.seq+1 {
		return nil, fmt.Errorf("serve: delta %d of base %d for table %q at version %d of base %d: %w", d.Seq, d.Base, d.Table, t.seq, t.base, ErrDelta)
	}
	if d.Dim != t.dim {
		return nil, fmt.Errorf("serve: delta of %q has rows of %d values, the table %d: %w", d.Table, d.Dim, t.dim, errs.ErrShape)
	}
	if n := len(d.Rows); n > 0 && d.Rows[n-1] >= int64(t.rows) {
		return nil, fmt.Errorf("serve: delta of %q names row %d of a table of %d: %w", d.Table, d.Rows[n-1], t.rows, errs.ErrIndexOutOfRange)
	}
	u := *t
	u.base, u.seq, u.m = d.Base, d.Seq, nil
	u.patch = make([][]byte, (t.rows+chunkRows-1)/chunkRows)
	copy(u.patch, t.patch)
	// The chunks d touches (its rows ascend), copied into an allocation a
	// block of yieldRows rows, the processor yielded between blocks.
	newChunk := func(k int) bool { return k == 0 || d.Rows[k]>>chunkShift != d.Rows[k-1]>>chunkShift }
	for lo := 0; lo < len(d.Rows); lo += yieldRows {
		if lo > 0 {
			runtime.Gosched() // let requests on the same processor answer meanwhile
		}
		hi := min(lo+yieldRows, len(d.Rows))
		n := 0
		for k := lo; k < hi; k++ {
			if newChunk(k) {
				n++
			}
		}
		arena := make([]byte, n*chunkRows*t.stride)
		for k := lo; k < hi; k++ {
			r := d.Rows[k]
			c := r >> chunkShift
			if newChunk(k) {
				u.patch[c] = t.chunkCopy(arena[:0:chunkRows*t.stride], c)
				arena = arena[chunkRows*t.stride:]
			}
			at := int(r&(chunkRows-1)) * t.stride
			if err := quantizeRows(u.patch[c][at:at+t.rowBytes], d.Values[k*d.Dim:(k+1)*d.Dim], d.Dim, t.format, int(r)); err != nil {
				return nil, err
			}
		}
	}
	return &u, nil
}

// yieldRows is how many rows Apply writes between yielding the processor
// to other goroutines (runtime.Gosched): on a server with fewer
// processors than busy goroutines, a request that arrives while a large
// delta is applied waits for 1,024 rows at most, not for the whole delta.
const yieldRows = 1024

// chunkCopy returns dst with a copy of chunk c's rows as t holds them.
func (t *Table) chunkCopy(dst []byte, c int64) []byte {
	if t.patch != nil && t.patch[c] != nil {
		return append(dst, t.patch[c]...)
	}
	lo := int(c) * chunkRows * t.stride
	hi := min(lo+chunkRows*t.stride, len(t.data))
	return append(dst, t.data[lo:hi]...)
}
