// Package rowcache keeps the hot rows of a table in memory, in front of a
// Store that holds every row (a file, a remote server): rows, not pages,
// evicted least recently used first, dirty rows written back when they are
// evicted and on Sync, the rows a batch names kept until the next batch.
// A row is an opaque run of bytes: a table's values and, beside them, its
// optimiser state.
package rowcache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"

	"github.com/gathergrad/gather/internal/fileio"
)

// A Store holds every row of a table, each RowBytes long.
type Store interface {
	// RowBytes returns the size of a row.
	RowBytes() int
	// Rows returns the number of rows; ids lie in [0, Rows()).
	Rows() int64
	// ReadRows reads the rows ids names into dst, row k at
	// dst[k*RowBytes():].
	ReadRows(ids []int64, dst []byte) error
	// WriteRows writes the rows ids names from src, row k from
	// src[k*RowBytes():].
	WriteRows(ids []int64, src []byte) error
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

// ErrCapacity: a batch names more distinct rows than the cache holds.
var ErrCapacity = errors.New("the batch's rows do not fit the cache")

// none marks a free slot, and the ends of the recency list.
const none = -1

// A Cache holds up to a fixed number of rows of a Store in slots: Fetch
// maps a batch's ids to slots (reading the rows it misses), Row gives a
// slot's bytes to read or change, MarkDirty marks a changed row for
// write-back, Sync writes back every dirty row. A Cache is not safe for
// concurrent use.
type Cache struct {
	store    Store
	policy   Policy
	rowBytes int
	data     []byte // slot s at data[s*rowBytes:]

	slotOf     map[int64]int32
	idOf       []int64 // per slot: its row, or none
	dirty      []bool
	batch      []uint64 // per slot: the Fetch that last named it
	calls      uint64   // Fetch calls so far
	prev, next []int32  // the recency list, most recent at head
	head, tail int32
	free       []int32
	uses       []uint32 // per slot: how often Fetch named its row since it came in (LFU)
	rng        *rand.Rand

	hits, misses uint64

	// scratch of Fetch, kept across calls
	missIDs, evictIDs     []int64
	missSlots, evictSlots []int32
	buf                   []byte
}

// New returns a cache of slots rows in front of store that evicts by
// policy. Fewer than one slot is an error.
func New(store Store, slots int, policy Policy) (*Cache, error) {
	if store == nil || store.RowBytes() <= 0 {
		return nil, fmt.Errorf("row cache: needs a store with rows of at least one byte")
	}
	if slots < 1 {
		return nil, fmt.Errorf("row cache: %d slots; a cache needs at least one: %w", slots, ErrCapacity)
	}
	c := &Cache{
		store: store, rowBytes: store.RowBytes(), data: make([]byte, slots*store.RowBytes()),
		slotOf: make(map[int64]int32, slots), idOf: make([]int64, slots), dirty: make([]bool, slots),
		batch: make([]uint64, slots), prev: make([]int32, slots), next: make([]int32, slots),
		head: none, tail: none, free: make([]int32, slots),
		policy: policy, uses: make([]uint32, slots), rng: rand.New(rand.NewPCG(uint64(slots), 1)),
	}
	for s := range slots {
		c.idOf[s], c.prev[s], c.next[s] = none, none, none
		c.free[s] = int32(slots - 1 - s) // slot 0 first
	}
	return c, nil
}

// Slots returns the number of rows the cache holds.
func (c *Cache) Slots() int { return len(c.idOf) }

// Fetch sets slots[k] to the slot holding row ids[k], reading the rows the
// cache misses from the store, together; to make room it evicts the least
// recently used rows that this batch does not name, writing back the dirty
// ones first. The rows of the batch stay in their slots at least until the
// next Fetch. An id outside the store's rows, or a batch of more distinct
// rows than the cache has slots (ErrCapacity, naming both), is an error,
// and then the cache is as it was, but for rows already written back.
func (c *Cache) Fetch(ids []int64, slots []int32) error {
	if len(slots) < len(ids) {
		return fmt.Errorf("row cache: %d slots for %d ids", len(slots), len(ids))
	}
	n := c.store.Rows()
	for k, id := range ids {
		if id < 0 || id >= n {
			return fmt.Errorf("row cache: ids[%d] = %d is outside the store's %d rows", k, id, n)
		}
	}
	// This call's number marks the slots of the rows it names, which are
	// then not evicted; a call that fails leaves only stale marks.
	c.calls++
	c.missIDs = c.missIDs[:0]
	resident := 0
	for _, id := range ids {
		s, ok := c.slotOf[id]
		switch {
		case !ok:
			c.missIDs = append(c.missIDs, id)
		case c.batch[s] != c.calls:
			c.batch[s] = c.calls
			resident++
		}
	}
	slices.Sort(c.missIDs)
	c.missIDs = slices.Compact(c.missIDs)
	if distinct := resident + len(c.missIDs); distinct > len(c.idOf) {
		return fmt.Errorf("row cache: the batch names %d distinct rows, the cache holds %d: %w", distinct, len(c.idOf), ErrCapacity)
	}
	if err := c.makeRoom(len(c.missIDs)); err != nil {
		return err
	}
	if err := c.load(); err != nil {
		return err
	}
	for k, id := range ids {
		s := c.slotOf[id]
		slots[k] = s
		c.touch(s)
		c.uses[s]++
	}
	c.misses += uint64(len(c.missIDs))
	c.hits += uint64(len(ids) - len(c.missIDs))
	return nil
}

// makeRoom frees want slots, evicting from the tail of the recency list
// rows no row of this batch is, and writing back the dirty ones first.
func (c *Cache) makeRoom(want int) error {
	c.evictIDs, c.evictSlots = c.evictIDs[:0], c.evictSlots[:0]
	if c.policy == LFU {
		c.pickLFU(want - len(c.free))
	} else {
		for s := c.tail; len(c.free)+len(c.evictSlots) < want && s != none; s = c.prev[s] {
			if c.batch[s] == c.calls {
				continue // named by this batch
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
	if err := c.writeBack(dirty); err != nil {
		return err
	}
	for _, s := range c.evictSlots {
		delete(c.slotOf, c.idOf[s])
		c.idOf[s] = none
		c.unlink(s)
		c.free = append(c.free, s)
	}
	return nil
}

// pickLFU adds n rows to evict to c.evictSlots: each the least used of
// lfuSample resident rows drawn at random that this batch does not name
// and that are not chosen already. The capacity check of Fetch makes
// enough such rows exist.
func (c *Cache) pickLFU(n int) {
	chosen := c.batch // marks chosen slots with calls+1 until the end
	for range n {
		best := int32(none)
		for tries := 0; best == none || tries < lfuSample; tries++ {
			s := int32(c.rng.IntN(len(c.idOf)))
			if c.idOf[s] == none || chosen[s] >= c.calls {
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

// load reads the missed rows into free slots.
func (c *Cache) load() error {
	if len(c.missIDs) == 0 {
		return nil
	}
	c.buf = slices.Grow(c.buf[:0], len(c.missIDs)*c.rowBytes)[:len(c.missIDs)*c.rowBytes]
	if err := c.store.ReadRows(c.missIDs, c.buf); err != nil {
		return fmt.Errorf("row cache: reading %d rows: %w", len(c.missIDs), err)
	}
	for k, id := range c.missIDs {
		s := c.free[len(c.free)-1]
		c.free = c.free[:len(c.free)-1]
		copy(c.Row(s), c.buf[k*c.rowBytes:(k+1)*c.rowBytes])
		c.slotOf[id], c.idOf[s], c.dirty[s], c.batch[s], c.uses[s] = s, id, false, c.calls, 0
		c.pushFront(s)
	}
	return nil
}

// writeBack writes the rows of slots to the store and marks them clean.
func (c *Cache) writeBack(slots []int32) error {
	if len(slots) == 0 {
		return nil
	}
	ids := make([]int64, len(slots))
	buf := make([]byte, len(slots)*c.rowBytes)
	for k, s := range slots {
		ids[k] = c.idOf[s]
		copy(buf[k*c.rowBytes:], c.Row(s))
	}
	if err := c.store.WriteRows(ids, buf); err != nil {
		return fmt.Errorf("row cache: writing back %d rows: %w", len(ids), err)
	}
	for _, s := range slots {
		c.dirty[s] = false
	}
	return nil
}

// Row returns the bytes of slot s, the cache's own memory.
func (c *Cache) Row(s int32) []byte {
	return c.data[int(s)*c.rowBytes : (int(s)+1)*c.rowBytes : (int(s)+1)*c.rowBytes]
}

// MarkDirty records that the row in slot s changed, so that it is written
// back before it leaves the cache and on Sync.
func (c *Cache) MarkDirty(s int32) { c.dirty[s] = true }

// Sync writes every dirty row back to the store and then, if the store
// has a Sync method (Journaled), calls it.
func (c *Cache) Sync() error {
	var dirty []int32
	for s, d := range c.dirty {
		if d {
			dirty = append(dirty, int32(s))
		}
	}
	if err := c.writeBack(dirty); err != nil {
		return err
	}
	if s, ok := c.store.(interface{ Sync() error }); ok {
		return s.Sync()
	}
	return nil
}

// Stats returns how many ids Fetch found in the cache and how many it read.
func (c *Cache) Stats() (hits, misses uint64) { return c.hits, c.misses }

// The recency list.

func (c *Cache) touch(s int32) {
	if c.head == s {
		return
	}
	c.unlink(s)
	c.pushFront(s)
}

func (c *Cache) pushFront(s int32) {
	c.prev[s], c.next[s] = none, c.head
	if c.head != none {
		c.prev[c.head] = s
	}
	c.head = s
	if c.tail == none {
		c.tail = s
	}
}

func (c *Cache) unlink(s int32) {
	p, n := c.prev[s], c.next[s]
	switch {
	case p != none:
		c.next[p] = n
	case c.head == s:
		c.head = n
	default:
		return // not in the list
	}
	if n != none {
		c.prev[n] = p
	} else {
		c.tail = p
	}
	c.prev[s], c.next[s] = none, none
}

// A FileStore is a Store of rows rows of rowBytes each, laid out one after
// another in a file from offset on, read and written with depth
// positioned reads or writes in flight (fileio.ReadRows).
type FileStore struct {
	f        *os.File
	offset   int64
	rowBytes int
	rows     int64
	depth    int
	offs     []int64
}

// NewFileStore returns the FileStore of rows rows of rowBytes each in f
// from offset on. A file too short to hold them is an error naming it.
func NewFileStore(f *os.File, offset int64, rowBytes int, rows int64, depth int) (*FileStore, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if rowBytes <= 0 || rows < 0 || offset < 0 || st.Size() < offset+rows*int64(rowBytes) {
		return nil, fmt.Errorf("row cache: %s holds %d bytes, not %d rows of %d bytes from offset %d", f.Name(), st.Size(), rows, rowBytes, offset)
	}
	return &FileStore{f: f, offset: offset, rowBytes: rowBytes, rows: rows, depth: depth}, nil
}

func (s *FileStore) RowBytes() int { return s.rowBytes }
func (s *FileStore) Rows() int64   { return s.rows }

func (s *FileStore) ReadRows(ids []int64, dst []byte) error {
	return fileio.ReadRows(s.f, s.offsets(ids), s.rowBytes, dst, s.depth)
}

func (s *FileStore) WriteRows(ids []int64, src []byte) error {
	return fileio.WriteRows(s.f, s.offsets(ids), s.rowBytes, src, s.depth)
}

func (s *FileStore) offsets(ids []int64) []int64 {
	s.offs = s.offs[:0]
	for _, id := range ids {
		s.offs = append(s.offs, s.offset+id*int64(s.rowBytes))
	}
	return s.offs
}
