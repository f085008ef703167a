package serve

import (
	"fmt"

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
	row map[int64]int64
	def int64
}

// NewIDs returns the ids of m as they are now (a copy: later changes to m
// do not show).
func NewIDs(m *table.IDMap) *IDs {
	ids, rows := m.Held()
	x := &IDs{row: make(map[int64]int64, len(ids)), def: int64(m.Rows())}
	for k, id := range ids {
		x.row[id] = rows[k]
	}
	return x
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
