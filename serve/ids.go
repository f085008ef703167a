package serve

import (
	"fmt"
	"maps"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/table"
)

// IDs maps raw 64-bit ids to the rows of a served table as the
// table.IDMap that trained it left them. An id the map did not hold (new
// since, never admitted, or evicted) reads the default row: the map's
// Rows(), the table's padding row, zeros. It is safe for concurrent use.
//
//	m, _ := table.ReadIDMap("model.safetensors", "item") // saved with checkpoint.Save
//	ids := serve.NewIDs(m)
//	ids.Rows(rows, raw) // then tb.Bag(out, rows, offsets, ...)
type IDs struct {
	row map[int64]int64 // id -> row
	id  map[int64]int64 // row -> id
	def int64
}

// NewIDs returns the ids of m as they are now (a copy: later changes to m
// do not show; Apply brings them in).
func NewIDs(m *table.IDMap) *IDs {
	ids, rows := m.Held()
	x := &IDs{row: make(map[int64]int64, len(ids)), id: make(map[int64]int64, len(ids)), def: int64(m.Rows())}
	for k, id := range ids {
		x.row[id], x.id[rows[k]] = rows[k], id
	}
	return x
}

// Apply returns the ids with the assignments of d (the rows the map gave
// new ids since the last delta; checkpoint.Delta.AssignedRows and
// AssignedIDs): each row's new id reads it, its previous id reads the
// default row. x is not changed (requests that hold it keep answering
// with it). It copies the map: O(Len() + the assignments). A row outside
// the map's rows is an error wrapping ErrShape, and no IDs are made.
func (x *IDs) Apply(d *checkpoint.Delta) (*IDs, error) {
	if err := d.Check(); err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	for _, r := range d.AssignedRows {
		if r >= x.def {
			return nil, fmt.Errorf("serve: delta of %q assigns row %d of a map of %d rows: %w", d.Table, r, x.def, ErrShape)
		}
	}
	y := &IDs{row: maps.Clone(x.row), id: maps.Clone(x.id), def: x.def}
	if y.row == nil {
		y.row, y.id = map[int64]int64{}, map[int64]int64{}
	}
	for k, r := range d.AssignedRows {
		id := d.AssignedIDs[k]
		if old, ok := y.id[r]; ok {
			delete(y.row, old)
		}
		if oldRow, ok := y.row[id]; ok {
			delete(y.id, oldRow)
		}
		y.row[id], y.id[r] = r, id
	}
	return y, nil
}

// Rows sets dst[k] to the row of raw[k], the default row for an id the
// map did not hold. A dst shorter than raw is an error wrapping ErrShape.
// It is O(len(raw)).
func (x *IDs) Rows(dst, raw []int64) error {
	if len(dst) < len(raw) {
		return fmt.Errorf("serve: %d rows for %d raw ids: %w", len(dst), len(raw), ErrShape)
	}
	for k, id := range raw {
		r, ok := x.row[id]
		if !ok {
			r = x.def
		}
		dst[k] = r
	}
	return nil
}

// Default returns the row unknown ids read.
func (x *IDs) Default() int64 { return x.def }

// Len returns the number of ids that have rows of their own.
func (x *IDs) Len() int { return len(x.row) }
