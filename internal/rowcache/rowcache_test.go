package rowcache

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// memStore is a Store in memory that counts its reads and writes.
type memStore struct {
	rows          [][]byte
	reads, writes int
}

func newMemStore(n, size int) *memStore {
	s := &memStore{rows: make([][]byte, n)}
	for i := range s.rows {
		s.rows[i] = bytes.Repeat([]byte{byte(i)}, size)
	}
	return s
}

func (s *memStore) RowBytes() int { return len(s.rows[0]) }
func (s *memStore) Rows() int64   { return int64(len(s.rows)) }
func (s *memStore) ReadRows(ctx context.Context, ids []int64, dst []byte) error {
	for k, id := range ids {
		copy(dst[k*s.RowBytes():], s.rows[id])
	}
	s.reads += len(ids)
	return nil
}
func (s *memStore) WriteRows(ctx context.Context, ids []int64, src []byte) error {
	for k, id := range ids {
		copy(s.rows[id], src[k*s.RowBytes():(k+1)*s.RowBytes()])
	}
	s.writes += len(ids)
	return nil
}

// Batches of random ids, each row changed through its slot: the cache
// always shows the rows as a table updated in place would hold them, and
// after Sync the store does, though the cache is far smaller than the
// rows touched and evicts on every batch.
func TestCacheEqualsTable(t *testing.T) {
	for _, policy := range []Policy{LRU, LFU} {
		cacheEqualsTable(t, policy)
	}
}

func cacheEqualsTable(t *testing.T, policy Policy) {
	const rows, size, slots, batch = 1000, 12, 64, 40
	store := newMemStore(rows, size)
	want := newMemStore(rows, size) // the table updated in place
	c, err := New(store, slots, policy)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	ids := make([]int64, batch)
	got := make([]int32, batch)
	for step := range 300 {
		for k := range ids {
			if k%3 == 0 {
				ids[k] = int64(r.IntN(10)) // hot rows
			} else {
				ids[k] = int64(r.IntN(rows))
			}
		}
		if err := c.Fetch(context.Background(), ids, got); err != nil {
			t.Fatal(err)
		}
		for k, id := range ids {
			if !bytes.Equal(c.Row(got[k]), want.rows[id]) {
				t.Fatalf("step %d: row %d in slot %d differs from the table's", step, id, got[k])
			}
		}
		for k, id := range ids {
			if k%2 == 0 {
				c.Row(got[k])[step%size]++
				want.rows[id][step%size]++
				c.MarkDirty(got[k])
			}
		}
	}
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	for id := range rows {
		if !bytes.Equal(store.rows[id], want.rows[id]) {
			t.Fatalf("after Sync the store's row %d differs", id)
		}
	}
	hits, misses, _ := c.Stats()
	if hits+misses != 300*batch || hits == 0 || misses == 0 {
		t.Errorf("hits %d, misses %d", hits, misses)
	}
	if store.reads != int(misses) {
		t.Errorf("the store was read %d times for %d misses", store.reads, misses)
	}
}

// A batch of more distinct rows than slots is ErrCapacity, and the cache
// goes on as before; so is an id outside the store.
func TestCacheRefuses(t *testing.T) {
	store := newMemStore(100, 4)
	c, err := New(store, 3, LRU)
	if err != nil {
		t.Fatal(err)
	}
	slots := make([]int32, 4)
	if err := c.Fetch(context.Background(), []int64{1, 2, 1}, slots); err != nil {
		t.Fatal(err)
	}
	c.Row(slots[0])[0] = 99
	c.MarkDirty(slots[0])
	err = c.Fetch(context.Background(), []int64{5, 6, 7, 8}, slots)
	if !errors.Is(err, ErrCapacity) {
		t.Fatalf("four rows in three slots: %v", err)
	}
	if err := c.Fetch(context.Background(), []int64{100}, slots); err == nil {
		t.Fatal("an id outside the store: want an error")
	}
	if err := c.Fetch(context.Background(), []int64{1, 9}, slots); err != nil {
		t.Fatal(err)
	}
	if c.Row(slots[0])[0] != 99 {
		t.Fatal("row 1 lost its change")
	}
	if _, err := New(store, 0, LRU); !errors.Is(err, ErrCapacity) {
		t.Fatalf("no slots: %v", err)
	}
}

// The rows of a batch are not evicted by that batch, and a dirty row is
// written back when it is evicted.
func TestCacheEviction(t *testing.T) {
	store := newMemStore(10, 2)
	c, err := New(store, 2, LRU)
	if err != nil {
		t.Fatal(err)
	}
	s := make([]int32, 2)
	if err := c.Fetch(context.Background(), []int64{1}, s); err != nil {
		t.Fatal(err)
	}
	c.Row(s[0])[1] = 42
	c.MarkDirty(s[0])
	if err := c.Fetch(context.Background(), []int64{2, 3}, s); err != nil { // evicts row 1
		t.Fatal(err)
	}
	if store.rows[1][1] != 42 || store.writes != 1 {
		t.Fatalf("row 1 not written back on eviction: %v, %d writes", store.rows[1], store.writes)
	}
	if !bytes.Equal(c.Row(s[0]), store.rows[2]) || !bytes.Equal(c.Row(s[1]), store.rows[3]) {
		t.Fatal("the batch's rows are not in their slots")
	}
}

// A FileStore reads and writes the rows of its file.
// rowsFile writes data to a new file in a temporary directory and
// returns its path and the file, open read-write until the test ends.
func rowsFile(t *testing.T, data []byte) (string, *os.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rows")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return path, f
}

func TestFileStore(t *testing.T) {
	data := make([]byte, 16+50*8)
	for i := range data {
		data[i] = byte(i)
	}
	path, f := rowsFile(t, data)
	if _, err := NewFileStore(f, 16, 8, 51, 4); err == nil {
		t.Fatal("51 rows in a file of 50: want an error")
	}
	fs, err := NewFileStore(f, 16, 8, 50, 4)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(fs, 4, LFU)
	if err != nil {
		t.Fatal(err)
	}
	s := make([]int32, 2)
	if err := c.Fetch(context.Background(), []int64{3, 49}, s); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.Row(s[1]), data[16+49*8:16+50*8]) {
		t.Fatal("row 49 read wrong")
	}
	copy(c.Row(s[0]), "ABCDEFGH")
	c.MarkDirty(s[0])
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	copy(data[16+3*8:], "ABCDEFGH")
	if !bytes.Equal(got, data) {
		t.Fatal("the file does not hold the synced row")
	}
}

// A row a Prefetch read is taken from its buffer once: after the row
// changed in the cache and left it, a Fetch reads the changed row from
// the store, not the copy read ahead.
func TestPrefetchTakenOnce(t *testing.T) {
	store := newMemStore(10, 4)
	c, err := New(store, 2, LRU)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := make([]int32, 2)
	c.Prefetch(context.Background(), []int64{5})
	if err := c.Fetch(context.Background(), []int64{5}, s); err != nil {
		t.Fatal(err)
	}
	c.Row(s[0])[0] = 99
	c.MarkDirty(s[0])
	if err := c.Fetch(context.Background(), []int64{1, 2}, s); err != nil { // evicts row 5, writing it back
		t.Fatal(err)
	}
	if err := c.Fetch(context.Background(), []int64{5}, s); err != nil {
		t.Fatal(err)
	}
	if got := c.Row(s[0])[0]; got != 99 {
		t.Fatalf("row 5 came back as %d, the value read ahead, not 99", got)
	}
	if _, _, pre := c.Stats(); pre != 1 {
		t.Fatalf("%d rows taken from the prefetch, want 1", pre)
	}
}

// Rows pinned stay through any batches; FetchMore adds to a batch whose
// rows all stay until NewBatch; a batch larger than the unpinned slots is
// ErrCapacity.
func TestPinAndFetchMore(t *testing.T) {
	store := newMemStore(10, 4)
	c, err := New(store, 3, LRU)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.Pin(context.Background(), 9)
	if err != nil {
		t.Fatal(err)
	}
	s := make([]int32, 2)
	for b := range 5 {
		c.NewBatch()
		if err := c.FetchMore(context.Background(), []int64{int64(b)}, s); err != nil {
			t.Fatal(err)
		}
		if err := c.FetchMore(context.Background(), []int64{int64(b + 1)}, s[1:]); err != nil {
			t.Fatal(err)
		}
		if s[0] == s[1] || s[0] == p || s[1] == p {
			t.Fatalf("batch %d: slots %v with the pinned %d", b, s, p)
		}
		if got, ok := c.Slot(9); !ok || got != p {
			t.Fatal("the pinned row left the cache")
		}
	}
	c.NewBatch()
	if err := c.FetchMore(context.Background(), []int64{1, 2, 3}, make([]int32, 3)); !errors.Is(err, ErrCapacity) {
		t.Fatalf("3 rows in 2 unpinned slots: %v", err)
	}
}

// Preload fills the cache with the first rows, and evicts them last row
// first, row 0 last.
func TestPreload(t *testing.T) {
	store := newMemStore(10, 4)
	c, err := New(store, 4, LRU)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n, err := c.Preload(context.Background(), 100)
	if err != nil || n != 4 {
		t.Fatalf("preloaded %d rows, %v; want 4", n, err)
	}
	for id := range int64(4) {
		s, ok := c.Slot(id)
		if !ok || !bytes.Equal(c.Row(s), store.rows[id]) {
			t.Fatalf("row %d not preloaded", id)
		}
	}
	s := make([]int32, 1)
	for _, id := range []int64{7, 8, 9} {
		if err := c.Fetch(context.Background(), []int64{id}, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := c.Slot(0); !ok {
		t.Fatal("row 0 was evicted before rows 1 to 3")
	}
	if hits, misses, _ := c.Stats(); hits != 0 || misses != 3 {
		t.Fatalf("hits %d misses %d", hits, misses)
	}
}

// With SetMaxAge(2), a row the store changes under the cache is served as
// read for two batches and read again in the third, or by the Prefetch
// before it (made when the current batch does not name the row, whose
// step could change it); a dirty row is kept.
func TestMaxAge(t *testing.T) {
	for _, prefetch := range []bool{false, true} {
		store := newMemStore(10, 4)
		c, err := New(store, 8, LRU)
		if err != nil {
			t.Fatal(err)
		}
		c.SetMaxAge(2)
		slots := make([]int32, 2)
		fetch := func(want ...byte) {
			t.Helper()
			if err := c.Fetch(context.Background(), []int64{1, 2}, slots); err != nil {
				t.Fatal(err)
			}
			for k, s := range slots {
				if got := c.Row(s)[0]; got != want[k] {
					t.Fatalf("prefetch %v: row %d reads %d, want %d", prefetch, k+1, got, want[k])
				}
			}
		}
		fetch(1, 2)
		c.Row(slots[1])[0] = 20 // row 2 changed here, marked dirty
		c.MarkDirty(slots[1])
		store.rows[1][0], store.rows[2][0] = 11, 22 // and both by another worker
		fetch(1, 20)
		if prefetch {
			c.NewBatch() // a batch that does not name them
			c.Prefetch(context.Background(), []int64{1, 2})
		}
		fetch(11, 20)
		if hits, misses, staged := c.Stats(); misses != 3 || hits != 3 || prefetch != (staged == 1) {
			t.Fatalf("prefetch %v: %d hits, %d misses, %d prefetched", prefetch, hits, misses, staged)
		}
		c.Close()
	}
}

// WriteSorted leaves the file as a row-by-row write of the same rows
// would: rows alone, adjacent runs, gaps below and above spanGap, spans
// cut at spanBytes, the first and last rows; out-of-order or
// out-of-range ids are refused.
func TestWriteSorted(t *testing.T) {
	const rowBytes, rows, header = 260, 12_000, 24
	r := rand.New(rand.NewPCG(3, 4))
	data := make([]byte, header+rows*rowBytes)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	path, f := rowsFile(t, data)
	fs, err := NewFileStore(f, header, rowBytes, rows, 8)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for id := int64(0); id < rows; {
		ids = append(ids, id)
		switch r.IntN(4) {
		case 0:
			id++ // adjacent
		case 1:
			id += 1 + r.Int64N(spanGap/rowBytes) // within a span's gap
		case 2:
			id += spanGap/rowBytes + 1 + r.Int64N(200) // past it
		default:
			id += 1 + r.Int64N(8)
		}
	}
	if ids[len(ids)-1] != rows-1 {
		ids = append(ids, rows-1)
	}
	src := make([]byte, len(ids)*rowBytes)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	want := slices.Clone(data)
	for k, id := range ids {
		copy(want[header+id*rowBytes:], src[k*rowBytes:(k+1)*rowBytes])
	}
	if err := fs.WriteSorted(ids, src); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("byte %d (row %d) differs from a row-by-row write", i, (i-header)/rowBytes)
			}
		}
	}
	for _, bad := range [][]int64{{3, 2}, {4, 4}, {-1}, {rows}} {
		if err := fs.WriteSorted(bad, make([]byte, len(bad)*rowBytes)); err == nil {
			t.Errorf("ids %v: want an error", bad)
		}
	}
}
