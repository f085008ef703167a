// Package rowcache keeps the hot rows of a table in memory, in front of a
// Store that holds every row (a file, a remote server): rows, not pages,
// evicted least recently used first, dirty rows written back when they are
// evicted and on Sync, the rows a batch names kept until the next batch.
// A row is an opaque run of bytes: a table's values and, beside them, its
// optimiser state. The cache keeps a row's bytes in columns (the values of
// every slot in one array, each part of the state in another), so that a
// kernel can index the slots of one column as it indexes the rows of a
// table.
package rowcache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/kernel"
)

// A Store holds every row of a table, each RowBytes long.
type Store interface {
	// RowBytes returns the size of a row.
	RowBytes() int
	// Rows returns the number of rows; ids lie in [0, Rows()).
	Rows() int64
	// ReadRows reads the rows ids names into dst, row k at
	// dst[k*RowBytes():].
	ReadRows(ctx context.Context, ids []int64, dst []byte) error
	// WriteRows writes the rows ids names from src, row k from
	// src[k*RowBytes():].
	WriteRows(ctx context.Context, ids []int64, src []byte) error
}

// A Policy chooses the rows a Cache evicts.
type Policy int

const (
	// LRU evicts the least recently used rows.
	LRU Policy = iota
	// LFU evicts, among 16 rows drawn at random, the one named least
	// often since it came in.
	LFU
)

// lfuSample is how many rows LFU draws to evict one.
const lfuSample = 16

// ErrCapacity: a batch needs more rows than a cache or an id map has
// room for. The errors that wrap it name which, and the counts.
var ErrCapacity = errors.New("not enough rows")

// none marks a free slot, and the ends of the recency list.
const none = -1

// A Cache holds up to a fixed number of rows of a Store in slots: Fetch
// maps a batch's ids to slots (reading the rows it misses), Col gives a
// slot's bytes of one column to read or change, MarkDirty marks a changed
// row for write-back, Sync writes back every dirty row, Prefetch reads a
// batch's misses ahead on another goroutine. A Cache is not safe for
// concurrent use, but for Prefetch's goroutine, which reads the store and
// the cache's index alone: between Prefetch and the next Fetch, Sync or
// Wait, the caller may read the index (Slot) and change the slots' bytes,
// and must not use the store.
type Cache struct {
	store    Store
	policy   Policy
	rowBytes int
	widths   []int    // bytes of each column of a row
	cols     [][]byte // column k: slot s at cols[k][s*widths[k]:]
	free_    func()   // frees the columns' memory

	slotOf     map[int64]int32
	idOf       []int64 // per slot: its row, or none
	dirty      []bool
	batch      []uint64 // per slot: the Fetch that last named it
	born       []uint64 // per slot: the Fetch that read its row
	calls      uint64   // Fetch calls so far
	maxAge     uint64   // batches a clean row is served before it is read again; 0: no limit
	prev, next []int32  // the recency list, most recent at head
	head, tail int32
	free       []int32
	uses       []uint32 // per slot: how often Fetch named its row since it came in (LFU)
	rng        *rand.Rand

	hits, misses, staged uint64
	inBatch              int // slots the current batch names
	pinned               int // slots Pin holds

	pre *prefetch // the Prefetch in flight or done, nil without one

	// scratch of Fetch, kept across calls
	missIDs, evictIDs     []int64
	missSlots, evictSlots []int32
	buf                   []byte
}

// slotBytes is the bookkeeping of a slot: idOf, batch and born (8 bytes
// each), prev, next, free and uses (4 each), dirty (1).
const slotBytes = 8 + 8 + 8 + 4 + 4 + 4 + 4 + 1

// pinned marks, in Cache.batch, a slot Pin holds: never evicted.
const pinned = math.MaxUint64

// New returns a cache of slots rows in front of store that evicts by
// policy, keeping a row's bytes in columns of the widths given (in bytes,
// summing to the store's RowBytes; none: one column, the whole row). The
// columns' memory is allocated outside the Go heap where the system
// allows (see Close). Fewer than one slot is an error.
func New(store Store, slots int, policy Policy, widths ...int) (*Cache, error) {
	if store == nil || store.RowBytes() <= 0 {
		return nil, fmt.Errorf("row cache: needs a store with rows of at least one byte")
	}
	if slots < 1 {
		return nil, fmt.Errorf("row cache: %d slots; a cache needs at least one: %w", slots, ErrCapacity)
	}
	if len(widths) == 0 {
		widths = []int{store.RowBytes()}
	}
	sum := 0
	for _, w := range widths {
		if w <= 0 {
			return nil, fmt.Errorf("row cache: a column of %d bytes", w)
		}
		sum += w
	}
	if sum != store.RowBytes() {
		return nil, fmt.Errorf("row cache: columns of %v bytes for rows of %d", widths, store.RowBytes())
	}
	// The rows and each slot's bookkeeping (slotBytes) in one mapping
	// outside the Go heap: the cache's memory is what its size says,
	// whatever the garbage collector's pace.
	rowsEnd := (slots*sum + 7) &^ 7
	mem, release, err := fileio.Anonymous(rowsEnd + slots*slotBytes)
	if err != nil {
		return nil, fmt.Errorf("row cache: %d slots of %d bytes: %w", slots, sum, err)
	}
	cols := make([][]byte, len(widths))
	rest := mem
	for k, w := range widths {
		cols[k], rest = rest[:slots*w:slots*w], rest[slots*w:]
	}
	rest = mem[rowsEnd:]
	take := func(n int) []byte {
		b := rest[: n*slots : n*slots]
		rest = rest[n*slots:]
		return b
	}
	c := &Cache{
		store: store, rowBytes: store.RowBytes(), widths: slices.Clone(widths), cols: cols, free_: release,
		slotOf: make(map[int64]int32, slots),
		idOf:   kernel.Words[int64](take(8)), batch: kernel.Words[uint64](take(8)), born: kernel.Words[uint64](take(8)),
		prev: kernel.Words[int32](take(4)), next: kernel.Words[int32](take(4)), free: kernel.Words[int32](take(4)),
		uses: kernel.Words[uint32](take(4)), dirty: kernel.Words[bool](take(1)),
		head: none, tail: none, policy: policy, rng: rand.New(rand.NewPCG(uint64(slots), 1)),
	}
	for s := range slots {
		c.idOf[s], c.prev[s], c.next[s] = none, none, none
		c.free[s] = int32(slots - 1 - s) // slot 0 first
	}
	return c, nil
}

// SetMaxAge makes the cache read a row again from the store once n
// batches (NewBatch) have begun since it read it, for a store that others
// change: a row is then at most n batches old. A row marked dirty, or
// pinned, is kept. 0, as a new cache has, keeps rows until they are
// evicted.
func (c *Cache) SetMaxAge(n int) { c.maxAge = uint64(max(n, 0)) }

// stale reports whether the row in slot s is to be read again
// (SetMaxAge) by the batch numbered batch.
func (c *Cache) stale(s int32, batch uint64) bool {
	return c.maxAge > 0 && batch-c.born[s] >= c.maxAge && !c.dirty[s] && c.batch[s] != pinned
}

// Slots returns the number of rows the cache holds.
func (c *Cache) Slots() int { return len(c.idOf) }

// Fetch starts a batch and fetches its rows: NewBatch, then FetchMore.
func (c *Cache) Fetch(ctx context.Context, ids []int64, slots []int32) error {
	c.NewBatch()
	return c.FetchMore(ctx, ids, slots)
}

// NewBatch ends the current batch: the rows it named may be evicted from
// now on.
func (c *Cache) NewBatch() {
	c.calls++
	c.inBatch = 0
}

// FetchMore sets slots[k] to the slot holding row ids[k], reading the
// rows the cache misses from the store (or from what Prefetch read),
// together; to make room it evicts the least recently used rows that the
// current batch does not name, writing back the dirty ones first. The
// rows stay in their slots at least until the next NewBatch. An id
// outside the store's rows, or a batch of more distinct rows than the
// cache has slots not pinned (ErrCapacity, naming both), is an error,
// and then the cache is as it was, but for rows already written back.
func (c *Cache) FetchMore(ctx context.Context, ids []int64, slots []int32) error {
	c.Wait()
	if len(slots) < len(ids) {
		return fmt.Errorf("row cache: %d slots for %d ids", len(slots), len(ids))
	}
	n := c.store.Rows()
	for k, id := range ids {
		if id < 0 || id >= n {
			return fmt.Errorf("row cache: ids[%d] = %d is outside the store's %d rows", k, id, n)
		}
	}
	// The batch's number marks the slots of the rows it names, which are
	// then not evicted; a call that fails leaves marks that the next
	// NewBatch makes stale.
	// slots[k] holds a hit's slot from here on, none for a miss.
	c.missIDs = c.missIDs[:0]
	for k, id := range ids {
		s, ok := c.slotOf[id]
		switch {
		case ok && c.stale(s, c.calls):
			c.drop(s)
			fallthrough
		case !ok:
			c.missIDs = append(c.missIDs, id)
			s = none
		case c.batch[s] < c.calls:
			c.batch[s] = c.calls
			c.inBatch++
		}
		slots[k] = s
	}
	slices.Sort(c.missIDs)
	c.missIDs = slices.Compact(c.missIDs)
	if distinct := c.inBatch + len(c.missIDs); distinct > len(c.idOf)-c.pinned {
		return fmt.Errorf("row cache: the batch names %d distinct rows, the cache holds %d (%d of them pinned): %w",
			distinct, len(c.idOf), c.pinned, ErrCapacity)
	}
	if err := c.makeRoom(ctx, len(c.missIDs)); err != nil {
		return err
	}
	if err := c.load(ctx); err != nil {
		return err
	}
	c.inBatch += len(c.missIDs)
	for k, id := range ids {
		s := slots[k]
		if s == none {
			s = c.slotOf[id]
			slots[k] = s
		}
		c.touch(s)
		c.uses[s]++
	}
	c.misses += uint64(len(c.missIDs))
	c.hits += uint64(len(ids) - len(c.missIDs))
	return nil
}

// makeRoom frees want slots, evicting from the tail of the recency list
// rows no row of this batch is, and writing back the dirty ones first.
func (c *Cache) makeRoom(ctx context.Context, want int) error {
	c.evictIDs, c.evictSlots = c.evictIDs[:0], c.evictSlots[:0]
	if c.policy == LFU {
		c.pickLFU(want - len(c.free))
	} else {
		for s := c.tail; len(c.free)+len(c.evictSlots) < want && s != none; s = c.prev[s] {
			if c.batch[s] >= c.calls {
				continue // named by this batch, or pinned
			}
			c.evictSlots = append(c.evictSlots, s)
		}
	}
	var dirty []int32
	for _, s := range c.evictSlots {
		if c.dirty[s] {
			dirty = append(dirty, s)
		}
	}
	if err := c.writeBack(ctx, dirty); err != nil {
		return err
	}
	for _, s := range c.evictSlots {
		c.drop(s)
	}
	return nil
}

// drop frees slot s, forgetting its row.
func (c *Cache) drop(s int32) {
	delete(c.slotOf, c.idOf[s])
	c.idOf[s] = none
	c.unlink(s)
	c.free = append(c.free, s)
}

// pickLFU adds n rows to evict to c.evictSlots: each the least used of
// lfuSample resident rows drawn at random that this batch does not name
// and that are not chosen already. The capacity check of Fetch makes
// enough such rows exist.
func (c *Cache) pickLFU(n int) {
	chosen := c.batch // marks chosen slots with calls+1 until the end
	defer func() {
		for _, s := range c.evictSlots {
			chosen[s] = 0
		}
	}()
	for range n {
		best := int32(none)
		for tries := 0; best == none || tries < lfuSample; tries++ {
			s := int32(c.rng.IntN(len(c.idOf)))
			if c.idOf[s] == none || chosen[s] >= c.calls { // free, named by this batch, pinned or chosen
				if tries > 64*lfuSample && best == none {
					s = c.firstEvictable()
				} else {
					continue
				}
			}
			if best == none || c.uses[s] < c.uses[best] {
				best = s
			}
		}
		c.evictSlots = append(c.evictSlots, best)
		chosen[best] = c.calls + 1
	}
}

// firstEvictable returns the first resident slot this batch does not name
// and that is not chosen for eviction already.
func (c *Cache) firstEvictable() int32 {
	for s := range c.idOf {
		if c.idOf[s] != none && c.batch[s] < c.calls {
			return int32(s)
		}
	}
	return none
}

// load reads the missed rows into free slots: those a Prefetch read from
// its buffer, the others from the store, together.
func (c *Cache) load(ctx context.Context) error {
	if len(c.missIDs) == 0 {
		return nil
	}
	var read []int64 // the misses no prefetch read
	for _, id := range c.missIDs {
		if _, ok := c.pre.row(id, c.rowBytes); !ok {
			read = append(read, id)
		}
	}
	c.buf = slices.Grow(c.buf[:0], len(read)*c.rowBytes)[:len(read)*c.rowBytes]
	if len(read) > 0 {
		if err := c.store.ReadRows(ctx, read, c.buf); err != nil {
			return fmt.Errorf("row cache: reading %d rows: %w", len(read), err)
		}
	}
	k := 0
	for _, id := range c.missIDs {
		row, ok := c.pre.take(id, c.rowBytes)
		if ok {
			c.staged++
		} else {
			row = c.buf[k*c.rowBytes : (k+1)*c.rowBytes]
			k++
		}
		s := c.free[len(c.free)-1]
		c.free = c.free[:len(c.free)-1]
		c.setRow(s, row)
		c.slotOf[id], c.idOf[s], c.dirty[s], c.batch[s], c.uses[s] = s, id, false, c.calls, 0
		c.born[s] = c.calls
		c.pushFront(s)
	}
	return nil
}

// setRow copies row into the columns of slot s.
func (c *Cache) setRow(s int32, row []byte) {
	for k, w := range c.widths {
		copy(c.Col(k, s), row[:w])
		row = row[w:]
	}
}

// CopyRow copies the row in slot s, its columns one after another, into
// row (RowBytes long).
func (c *Cache) CopyRow(s int32, row []byte) {
	for k, w := range c.widths {
		copy(row[:w], c.Col(k, s))
		row = row[w:]
	}
}

// writeBack writes the rows of slots to the store and marks them clean.
func (c *Cache) writeBack(ctx context.Context, slots []int32) error {
	// In chunks of chunkBytes, so that a Sync of a large cache needs no
	// second copy of it.
	per := max(1, chunkBytes/c.rowBytes)
	ids := make([]int64, 0, min(len(slots), per))
	buf := make([]byte, 0, min(len(slots), per)*c.rowBytes)
	for lo := 0; lo < len(slots); lo += per {
		part := slots[lo:min(lo+per, len(slots))]
		ids, buf = ids[:len(part)], buf[:len(part)*c.rowBytes]
		for k, s := range part {
			ids[k] = c.idOf[s]
			c.CopyRow(s, buf[k*c.rowBytes:(k+1)*c.rowBytes])
		}
		if err := c.store.WriteRows(ctx, ids, buf); err != nil {
			return fmt.Errorf("row cache: writing back %d rows: %w", len(ids), err)
		}
		for _, s := range part {
			c.dirty[s] = false
		}
	}
	return nil
}

// chunkBytes bounds the memory of one write of rows to a store.
const chunkBytes = 16 << 20

// Row returns the bytes of slot s in column 0 (the whole row when the
// cache has one column), the cache's own memory.
func (c *Cache) Row(s int32) []byte { return c.Col(0, s) }

// Col returns the bytes of slot s in column k, the cache's own memory.
func (c *Cache) Col(k int, s int32) []byte {
	w := c.widths[k]
	return c.cols[k][int(s)*w : (int(s)+1)*w : (int(s)+1)*w]
}

// Column returns column k: slot s's bytes at [s*width, (s+1)*width).
func (c *Cache) Column(k int) []byte { return c.cols[k] }

// Slot returns the slot holding row id, if the cache holds it.
func (c *Cache) Slot(id int64) (int32, bool) {
	s, ok := c.slotOf[id]
	return s, ok
}

// Pin brings row id into the cache, if it is not there, and keeps it there
// until Close: it is never evicted. It returns the row's slot. Call it
// before the batches: it fetches the row as a batch of its own, so the
// rows of the last Fetch are no longer kept.
func (c *Cache) Pin(ctx context.Context, id int64) (int32, error) {
	var slot [1]int32
	if err := c.Fetch(ctx, []int64{id}, slot[:]); err != nil {
		return 0, err
	}
	if c.batch[slot[0]] != pinned {
		c.batch[slot[0]] = pinned
		c.pinned++
		c.inBatch--
	}
	return slot[0], nil
}

// Forget drops row id from the cache, if the cache holds it clean and
// does not pin it, so that the next Fetch naming it reads it from the
// store. Call it between batches, after NewBatch.
func (c *Cache) Forget(id int64) {
	c.Wait()
	if s, ok := c.slotOf[id]; ok && !c.dirty[s] && c.batch[s] < c.calls {
		c.drop(s)
	}
}

// ID returns the row slot s holds, or -1 for none.
func (c *Cache) ID(s int32) int64 { return c.idOf[s] }

// MarkDirty records that the row in slot s changed, so that it is written
// back before it leaves the cache and on Sync.
func (c *Cache) MarkDirty(s int32) { c.dirty[s] = true }

// Sync writes every dirty row back to the store and then, if the store
// has a Sync method (Journaled), calls it.
func (c *Cache) Sync(ctx context.Context) error {
	c.Wait()
	var dirty []int32
	for s, d := range c.dirty {
		if d {
			dirty = append(dirty, int32(s))
		}
	}
	if err := c.writeBack(ctx, dirty); err != nil {
		return err
	}
	if s, ok := c.store.(interface{ Sync(context.Context) error }); ok {
		return s.Sync(ctx)
	}
	return nil
}

// Stats returns how many ids Fetch found in the cache, how many it missed,
// and how many of the misses a Prefetch had read.
func (c *Cache) Stats() (hits, misses, prefetched uint64) { return c.hits, c.misses, c.staged }

// Close waits for a Prefetch in flight and frees the cache's memory. The
// cache must not be used after it; dirty rows not synced are dropped.
func (c *Cache) Close() {
	c.Wait()
	c.dropStaged()
	if c.free_ != nil {
		c.free_()
		c.free_ = nil
		c.cols, c.idOf, c.batch, c.born, c.prev, c.next, c.free, c.uses, c.dirty = nil, nil, nil, nil, nil, nil, nil, nil, nil
		c.slotOf = nil
	}
}

// Preload fills up to n free slots with the rows 0, 1, ... of the store,
// read in order (a Store with a ReadRange method reads them as one run
// of bytes), and returns how many it loaded. They enter the recency list
// oldest last: row 0 is evicted after every other. For a table whose ids
// are numbered by frequency, as a vocabulary usually is, they are the rows
// a cache of its size would hold most often.
func (c *Cache) Preload(ctx context.Context, n int) (int, error) {
	c.Wait()
	n = int(min(int64(min(n, len(c.free))), c.store.Rows()))
	per := max(1, chunkBytes/c.rowBytes)
	buf := make([]byte, min(n, per)*c.rowBytes)
	ids := make([]int64, 0, min(n, per))
	loaded := 0
	for lo := 0; lo < n; lo += per {
		hi := min(lo+per, n)
		b := buf[:(hi-lo)*c.rowBytes]
		ids = ids[:0]
		for id := lo; id < hi; id++ {
			if _, ok := c.slotOf[int64(id)]; ok {
				continue
			}
			ids = append(ids, int64(id))
		}
		var err error
		if rr, ok := c.store.(interface {
			ReadRange(ctx context.Context, first int64, n int, dst []byte) error
		}); ok && len(ids) == hi-lo {
			err = rr.ReadRange(ctx, int64(lo), hi-lo, b)
		} else {
			b = b[:len(ids)*c.rowBytes]
			err = c.store.ReadRows(ctx, ids, b)
		}
		if err != nil {
			return loaded, fmt.Errorf("row cache: preloading rows %d to %d: %w", lo, hi-1, err)
		}
		for k, id := range ids {
			s := c.free[len(c.free)-1]
			c.free = c.free[:len(c.free)-1]
			c.setRow(s, b[k*c.rowBytes:(k+1)*c.rowBytes])
			c.slotOf[id], c.idOf[s], c.dirty[s], c.batch[s], c.uses[s] = s, id, false, 0, 0
			c.born[s] = c.calls
			c.pushBack(s)
			loaded++
		}
	}
	return loaded, nil
}

// The recency list.
