package nn

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/table"
)

// changes records the rows of a table that changed since the last
// delta: a bit a row, and the rows in the order they first changed, so
// that a delta costs time in proportion to the rows changed, not the
// table.
type changes struct {
	bits []uint64
	rows []int64
	// The rows an id map gave ids since the last delta, and the ids.
	assignedRows, assignedIDs []int64
}

// mark records rows (each in [0, vocab)) as changed, but pad.
func (c *changes) mark(rows []int64, pad int) {
	for _, r := range rows {
		if int(r) == pad {
			continue
		}
		w, b := r>>6, uint64(1)<<(r&63)
		if c.bits[w]&b == 0 {
			c.bits[w] |= b
			c.rows = append(c.rows, r)
		}
	}
}

// take returns the changed rows in ascending order and forgets them.
func (c *changes) take() []int64 {
	rows := slices.Clone(c.rows)
	slices.Sort(rows)
	for _, r := range c.rows {
		c.bits[r>>6] &^= 1 << (r & 63)
	}
	c.rows = c.rows[:0]
	return rows
}

// TrackChanges makes the embedding record the rows that change from now
// on, for Delta: the rows each Step (its own, or its Collection's)
// updates and the rows a RawIDs map starts afresh for new ids. Recording
// a step costs a bit test a row it updates; the memory is a bit a row of
// the table. It is a no-op when tracking already.
func (e *Embedding) TrackChanges() {
	if e.changed == nil {
		e.changed = &changes{bits: make([]uint64, (e.home.Vocab()+63)/64)}
	}
}

// markChanged records rows as changed when the embedding tracks changes.
func (e *Embedding) markChanged(rows []int64) {
	if e.changed != nil {
		e.changed.mark(rows, e.padding())
	}
}

// Delta returns the rows that changed since TrackChanges or the last
// Delta, with their values now (as float32), and the rows a RawIDs map
// gave new ids (Assigned), as delta seq after the full model base
// (driver.Delta) stamped with the time now, and starts recording
// afresh: write it with checkpoint.WriteDelta (WriteDeltas, with the
// model's other tables and dense parameters; cluster.Store.PublishDelta,
// through a Redis Cluster), and serve it with serve.Table.Apply. Its
// cost is in proportion to the rows changed: a cache's rows are read
// through the cache (table.Cached.Read). Without TrackChanges it is an
// error wrapping gather.ErrOption; on another error the rows stay
// recorded for the next Delta.
func (e *Embedding) Delta(ctx context.Context, base, seq uint64) (*driver.Delta, error) {
	prefix := fmt.Sprintf("embedding %q", e.Name())
	if e.closed {
		return nil, fmt.Errorf("%s: %w", prefix, table.ErrClosed)
	}
	if e.changed == nil {
		return nil, fmt.Errorf("%s: Delta needs TrackChanges first: %w", prefix, gather.ErrOption)
	}
	dim := e.Table.Shape()[1]
	rows := slices.Sorted(slices.Values(e.changed.rows))
	d := &driver.Delta{Table: e.Name(), Base: base, Seq: seq, Dim: dim, Time: time.Now().UnixNano(), Rows: rows, Values: make([]float32, len(rows)*dim)}
	src, byPosition, err := e.home.readRows(ctx, rows) // the rows, not a cache's slots
	if err != nil {
		return nil, fmt.Errorf("%s: %w", prefix, err)
	}
	width := src.Shape()[1]
	// Row k of the delta is row rows[k] of the table's tensor, or row k of
	// what the cache read.
	at := func(k int) int {
		if byPosition {
			return k * width
		}
		return int(rows[k]) * width
	}
	if len(rows) > 0 {
		switch src.Dtype() {
		case tensor.Float32:
			v := src.Float32s()
			for k := range rows {
				copy(d.Values[k*dim:(k+1)*dim], v[at(k):at(k)+dim])
			}
		case tensor.Float64:
			v := src.Float64s()
			for k := range rows {
				for j, x := range v[at(k) : at(k)+dim] {
					d.Values[k*dim+j] = float32(x)
				}
			}
		}
	}
	d.AssignedRows = slices.Clone(e.changed.assignedRows)
	d.AssignedIDs = slices.Clone(e.changed.assignedIDs)
	if err := d.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", prefix, err)
	}
	e.changed.take()
	e.changed.assignedRows, e.changed.assignedIDs = e.changed.assignedRows[:0], e.changed.assignedIDs[:0]
	return d, nil
}
