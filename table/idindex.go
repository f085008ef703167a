package table

import "math/bits"

// An idIndex maps raw ids to rows: an open-addressing hash table with
// linear probing, at most 3/4 full, whose slots hold the id and its row
// side by side, so that a lookup reads one or two cache lines where a Go
// map of a million ids reads more. Row -1 marks an empty slot, so any
// int64 is an id. Deleting shifts the probe chain back (no tombstones).
type idIndex struct {
	slots []idSlot
	mask  uint64
	shift uint
	n     int
}

type idSlot struct {
	id  int64
	row int32
}

// newIDIndex returns an index with room for n ids.
func newIDIndex(n int) idIndex {
	size := 1 << bits.Len(uint(max(8, n+n/3)))
	x := idIndex{slots: make([]idSlot, size), mask: uint64(size - 1), shift: uint(64 - bits.Len(uint(size-1)))}
	for k := range x.slots {
		x.slots[k].row = -1
	}
	return x
}

// home returns the slot where id's probe starts (Fibonacci hashing of a
// mixed id).
func (x *idIndex) home(id int64) uint64 {
	h := uint64(id)
	h ^= h >> 29
	return (h * 0x9e3779b97f4a7c15) >> x.shift & x.mask
}

func (x *idIndex) get(id int64) (int32, bool) {
	for i := x.home(id); ; i = (i + 1) & x.mask {
		s := &x.slots[i]
		if s.row < 0 {
			return 0, false
		}
		if s.id == id {
			return s.row, true
		}
	}
}

// put sets the row of id, an id the index does not hold.
func (x *idIndex) put(id int64, row int32) {
	i := x.home(id)
	for x.slots[i].row >= 0 {
		i = (i + 1) & x.mask
	}
	x.slots[i] = idSlot{id, row}
	x.n++
}

// del removes id, which the index holds.
func (x *idIndex) del(id int64) {
	i := x.home(id)
	for x.slots[i].id != id || x.slots[i].row < 0 {
		i = (i + 1) & x.mask
	}
	// Move back each later id of the chain whose home is not after the
	// hole, so that every id stays reachable from its home.
	for j := (i + 1) & x.mask; x.slots[j].row >= 0; j = (j + 1) & x.mask {
		if h := x.home(x.slots[j].id); (j-h)&x.mask >= (j-i)&x.mask {
			x.slots[i] = x.slots[j]
			i = j
		}
	}
	x.slots[i].row = -1
	x.n--
}
