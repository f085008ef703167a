package serve

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/gathergrad/gather/table/driver"
)

// IDs maps raw 64-bit ids to the rows of a served table as the
// table.IDMap that trained it left them. An id the map did not hold (new
// since, never admitted, or evicted) reads the default row: the map's
// Rows(), the table's padding row, zeros. It is safe for concurrent use.
//
//	m, _ := table.ReadIDMap("model.safetensors", "item") // saved with checkpoint.Save
//	ids := serve.NewIDs(m)
//	ids.Rows(rows, raw) // then tb.Bag(out, rows, offsets, ...)
//
// Its ids are kept in buckets by a hash of the id, about 8 to a bucket
// when every row is held, and each row's id in chunks of 256 rows; Apply
// copies the buckets and chunks a delta touches and shares the rest.
type IDs struct {
	buckets []*idBucket // by hash of the id (bucket's shift)
	shift   uint
	ids     []*idChunk // the id of each row, by chunks of idChunkRows rows
	def     int64
	n       int
}

// An idBucket holds the ids of a bucket and their rows, in no order.
type idBucket struct{ ids, rows []int64 }

// An idChunk holds the ids of idChunkRows rows, and which rows hold one.
type idChunk struct {
	id   [idChunkRows]int64
	held [idChunkRows]bool
}

const idChunkRows = 64

// bucket returns the bucket index of id.
func (x *IDs) bucket(id int64) uint64 { return uint64(id) * 0x9e3779b97f4a7c15 >> x.shift }

// A HeldMap is an id map as NewIDs reads it: how many rows it hands out,
// and the ids it holds with their rows (table.IDMap, or the map
// table.HeldIDMap makes of a cluster.IDMap's Snapshot).
type HeldMap interface {
	Rows() int
	Held() (ids, rows []int64)
}

// NewIDs returns the ids of m as they are now (a copy: later changes to m
// do not show; Apply brings them in).
func NewIDs(m HeldMap) *IDs {
	rows := m.Rows()
	lg := bits.Len(uint(max(1, rows/8) - 1)) // 1<<lg buckets: rows/8, rounded up to a power of two
	x := &IDs{shift: uint(64 - lg), def: int64(rows), buckets: make([]*idBucket, 1<<lg)}
	x.ids = make([]*idChunk, (rows+idChunkRows-1)/idChunkRows)
	for c := range x.ids {
		x.ids[c] = &idChunk{}
	}
	held, at := m.Held()
	for k, id := range held {
		x.put(id, at[k])
	}
	return x
}

// put records row r as id's in x's own buckets and chunks (NewIDs, or an
// Apply's copies).
func (x *IDs) put(id, r int64) {
	h := x.bucket(id)
	b := x.buckets[h]
	if b == nil {
		b = &idBucket{}
		x.buckets[h] = b
	}
	b.ids, b.rows = append(b.ids, id), append(b.rows, r)
	c := x.ids[r/idChunkRows]
	c.id[r%idChunkRows], c.held[r%idChunkRows] = id, true
	x.n++
}

// Apply returns the ids with the assignments of d (the rows the map gave
// new ids since the last delta; driver.Delta.AssignedRows and
// AssignedIDs): each row's new id reads it, its previous id reads the
// default row. x is not changed (requests that hold it keep answering
// with it): the new IDs share x's memory but for the buckets and chunks
// the assignments touch, copied, so that Apply costs time and memory in
// proportion to the assignments (and a slice of a pointer for every 8
// rows). A row outside the map's rows is an error wrapping ErrShape, and
// no IDs are made.
func (x *IDs) Apply(d *driver.Delta) (*IDs, error) {
	if err := d.Check(); err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	for _, r := range d.AssignedRows {
		if r >= x.def {
			return nil, fmt.Errorf("serve: delta of %q assigns row %d of a map of %d rows: %w", d.Table, r, x.def, ErrShape)
		}
	}
	y := &IDs{buckets: slices.Clone(x.buckets), shift: x.shift, ids: slices.Clone(x.ids), def: x.def, n: x.n}
	copied := map[any]bool{} // the buckets and chunks y owns
	bucket := func(h uint64) *idBucket {
		b := y.buckets[h]
		if b == nil {
			b = &idBucket{}
		} else if !copied[b] {
			b = &idBucket{ids: slices.Clone(b.ids), rows: slices.Clone(b.rows)}
		}
		copied[b], y.buckets[h] = true, b
		return b
	}
	chunk := func(r int64) *idChunk {
		c := y.ids[r/idChunkRows]
		if !copied[c] {
			cc := *c
			c = &cc
			copied[c], y.ids[r/idChunkRows] = true, c
		}
		return c
	}
	// drop takes id's row from it.
	drop := func(id int64) {
		b := bucket(y.bucket(id))
		if k := slices.Index(b.ids, id); k >= 0 {
			c := chunk(b.rows[k])
			c.held[b.rows[k]%idChunkRows] = false
			last := len(b.ids) - 1
			b.ids[k], b.rows[k] = b.ids[last], b.rows[last]
			b.ids, b.rows = b.ids[:last], b.rows[:last]
			y.n--
		}
	}
	for k, r := range d.AssignedRows {
		id := d.AssignedIDs[k]
		if c := chunk(r); c.held[r%idChunkRows] {
			drop(c.id[r%idChunkRows]) // the row's previous id
		}
		drop(id) // the id's previous row
		bucket(y.bucket(id))
		y.put(id, r)
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
		dst[k] = x.def
		if b := x.buckets[x.bucket(id)]; b != nil {
			for j, v := range b.ids {
				if v == id {
					dst[k] = b.rows[j]
					break
				}
			}
		}
	}
	return nil
}

// Default returns the row unknown ids read.
func (x *IDs) Default() int64 { return x.def }

// Len returns the number of ids that have rows of their own.
func (x *IDs) Len() int { return x.n }
