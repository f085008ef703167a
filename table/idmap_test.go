package table

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gathergrad/gather/table/driver"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/tablerows"
)

// refMap is an IDMap's LRU policy written plainly: the ids in a slice,
// the most recently used last, and the counts for admission exact or,
// with a width, kept in a count-min sketch of 4 rows of width counters
// (conservative update). A batch is mapped on a copy, kept only if
// every id it admits found a row.
type refMap struct {
	rows   int
	ttl    int64
	refuse bool
	admit  int             // AdmitAfter
	pad    bool            // id 0 is the padding id
	width  int             // the sketch's counters a row; 0: exact counts
	seen   map[int64]int   // id -> sightings while it held no row (exact counts)
	cms    map[int]int     // the sketch's counters by index (width > 0)
	order  []int64         // ids, least recently used first
	row    map[int64]int64 // id -> row
	last   map[int64]int64 // id -> step of its last use
	free   []int64         // free rows, the next to give last
	st     driver.IDMapStats
}

func newRef(rows int, ttl int64, refuse bool, admit int) *refMap {
	r := &refMap{rows: rows, ttl: ttl, refuse: refuse, admit: admit, seen: map[int64]int{}, cms: map[int]int{},
		row: map[int64]int64{}, last: map[int64]int64{}}
	for k := rows - 1; k >= 0; k-- {
		r.free = append(r.free, int64(k))
	}
	return r
}

func (r *refMap) clone() *refMap {
	c := *r
	c.seen, c.cms, c.row, c.last = maps.Clone(r.seen), maps.Clone(r.cms), maps.Clone(r.row), maps.Clone(r.last)
	c.order, c.free = slices.Clone(r.order), slices.Clone(r.free)
	return &c
}

// count adds a sighting of id and returns its count.
func (r *refMap) count(id int64) int {
	if r.width == 0 {
		r.seen[id]++
		return r.seen[id]
	}
	c := math.MaxInt
	for d := range 4 {
		c = min(c, r.cms[d*r.width+int(tablerows.Mix(uint64(id), uint64(d))%uint64(r.width))])
	}
	c++
	for d := range 4 {
		i := d*r.width + int(tablerows.Mix(uint64(id), uint64(d))%uint64(r.width))
		r.cms[i] = max(r.cms[i], c)
	}
	return c
}

func (r *refMap) drop(id int64) {
	r.free = append(r.free, r.row[id])
	delete(r.row, id)
	delete(r.last, id)
	r.order = slices.DeleteFunc(r.order, func(x int64) bool { return x == id })
}

func (r *refMap) touch(id, step int64) {
	if last, ok := r.last[id]; ok && last == step {
		return // the first use of a step places it
	}
	r.order = slices.DeleteFunc(r.order, func(x int64) bool { return x == id })
	r.order = append(r.order, id)
	r.last[id] = step
}

// mapIDs is Map: the rows, the assignments, or false for ErrCapacity.
func (r *refMap) mapIDs(ids []int64, step int64) ([]int64, []driver.Assignment, bool) {
	c := r.clone()
	rows, got, short := c.apply(ids, step)
	if short > 0 {
		if r.refuse {
			r.st.Rejected += uint64(short)
		}
		return nil, nil, false
	}
	*r = *c
	return rows, got, true
}

// apply maps ids at step, and returns how many ids it admitted found no
// row: a free one, or (evicting) the least recently used of an id not
// used at this step.
func (r *refMap) apply(ids []int64, step int64) ([]int64, []driver.Assignment, int) {
	if r.ttl > 0 {
		for _, id := range slices.Clone(r.order) {
			if r.last[id] < step-r.ttl {
				r.drop(id)
				r.st.Expired++
			}
		}
	}
	rows := make([]int64, len(ids))
	for _, id := range ids {
		if _, ok := r.row[id]; ok {
			r.touch(id, step)
		}
	}
	var got []driver.Assignment
	short := map[int64]bool{} // admitted ids that found no row
	for k, id := range ids {
		if r.pad && id == 0 || short[id] {
			rows[k] = int64(r.rows)
			continue
		}
		if row, ok := r.row[id]; ok { // touched above, or given a row earlier in the batch
			rows[k] = row
			continue
		}
		if r.admit > 1 && r.count(id) < r.admit {
			rows[k] = int64(r.rows) // the default row
			r.st.Pending++
			continue
		}
		if len(r.free) == 0 {
			if r.refuse || len(r.order) == 0 || r.last[r.order[0]] == step {
				short[id] = true
				continue
			}
			r.drop(r.order[0])
			r.st.Evicted++
		}
		row := r.free[len(r.free)-1]
		r.free = r.free[:len(r.free)-1]
		r.row[id] = row
		r.touch(id, step)
		rows[k] = row
		r.st.Admitted++
		got = append(got, driver.Assignment{Row: row, ID: id})
	}
	return rows, got, len(short)
}

// FuzzIDMap holds an IDMap (LRU) against the plain model above: the same
// rows, the same rows given afresh, the same batches refused and the
// same counts, with or without TTL and admission, evicting or refusing,
// over batches of up to 16 ids (many repeated) against maps of up to 6
// rows. The sketch is the default one, whose counts of the fuzzed ids
// are exact (checked first), or 1 to 64 counters wide, where ids share
// counters and a batch's own sightings admit its later ids. An EvictLFU
// map over the same batches is held to the invariants: no two ids of a
// batch on one row, no id moved off its row.
func FuzzIDMap(f *testing.F) {
	if !exactSketch() {
		f.Fatal("two fuzzed ids share all their counters: the model's exact counts would not be the sketch's")
	}
	f.Add([]byte{3, 0, 1, 2, 3, 4, 5, 1, 1, 9, 200, 7, 3})
	f.Add([]byte{2, 1, 250, 251, 252, 1, 2, 3, 1, 250, 4, 4})
	f.Add([]byte{5, 2, 0, 0, 0, 9, 8, 7, 6, 5, 4, 3, 2, 1})
	f.Add([]byte{1<<5 | 5, 4 | 2<<3, 4, 101, 102, 103, 104, 105}) // 2 rows, width 1, Refuse, AdmitAfter 3: 5 new ids
	f.Add([]byte{5 | 5<<5, 1<<3 | 1, 15, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 2 {
			return
		}
		rows := 1 + int(b[0]%6)
		width := []int{0, 1, 2, 4, 8, 16, 32, 64}[b[0]>>5]
		ttl, refuse, admit := int64(b[1]%4), b[1]&4 != 0, 1+int(b[1]>>3%3)
		o := driver.IDMapOptions{Rows: rows, TTL: ttl, AdmitAfter: admit, Pad: b[1]&0x80 != 0, SketchWidth: width}
		if refuse {
			o.Evict = driver.Refuse
		}
		m, err := NewIDMap("f", o)
		if err != nil {
			t.Fatal(err)
		}
		ref := newRef(rows, ttl, refuse, admit)
		ref.pad, ref.width = o.Pad, width
		var lfu *IDMap // EvictLFU's victims are drawn at random: held to invariants, not to the model
		if !refuse {
			o.Evict = driver.EvictLFU
			lfu, _ = NewIDMap("lfu", o)
		}
		step := int64(0)
		for b = b[2:]; len(b) > 0; step++ {
			n := 1 + int(b[0]%16)
			b = b[1:]
			ids := make([]int64, 0, n)
			for ; len(ids) < n && len(b) > 0; b = b[1:] {
				ids = append(ids, int64(int8(b[0]))*1_000_003) // negative ids too
			}
			got := make([]int64, len(ids))
			if lfu != nil {
				checkLFU(t, lfu, ids, step)
			}
			assigned, err := m.Map(context.Background(), ids, got, step, nil)
			want, wantAssigned, ok := ref.mapIDs(ids, step)
			if !ok {
				if !errors.Is(err, ErrCapacity) {
					t.Fatalf("step %d %v: %v (rows %v, %v), want ErrCapacity", step, ids, err, got, assigned)
				}
			} else if err != nil || !slices.Equal(got, want) || !slices.Equal(assigned, wantAssigned) {
				t.Fatalf("step %d %v: rows %v %v (%v), want %v %v", step, ids, got, assigned, err, want, wantAssigned)
			}
			want0 := ref.st
			want0.Used = len(ref.row)
			if st := statsOf(m); st != want0 {
				t.Fatalf("step %d %v: stats %+v, want %+v", step, ids, st, want0)
			}
		}
	})
}

// checkLFU maps ids with m at step and checks what holds whatever rows
// the policy takes: an id that held a row keeps it, distinct ids get
// distinct rows, the padding id and ids not admitted read the default
// row, the assignments are the ids that came to hold rows, and Used
// counts the ids that hold rows.
func checkLFU(t *testing.T, m *IDMap, ids []int64, step int64) {
	before := map[int64]int64{} // the ids holding rows that do not expire now
	for _, id := range ids {
		if r, ok := m.Row(id); ok && (m.o.TTL == 0 || m.row[r].last >= step-m.o.TTL) {
			before[id] = r
		}
	}
	rows := make([]int64, len(ids))
	assigned, err := m.Map(context.Background(), ids, rows, step, nil)
	if errors.Is(err, ErrCapacity) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	owner := map[int64]int64{} // row -> id
	fresh := map[int64]bool{}
	for _, a := range assigned {
		fresh[a.ID] = true
	}
	for k, id := range ids {
		r := rows[k]
		if r == int64(m.o.Rows) {
			if held, ok := before[id]; ok { // a sighting before its admission in the batch reads it too
				t.Fatalf("LFU step %d: id %d read the default row, holding row %d", step, id, held)
			}
			continue
		}
		if r < 0 || r > int64(m.o.Rows) {
			t.Fatalf("LFU step %d: id %d got row %d", step, id, r)
		}
		if b, ok := before[id]; ok && (b != r || fresh[id]) {
			t.Fatalf("LFU step %d: id %d moved from row %d to %d", step, id, b, r)
		}
		if o, ok := owner[r]; ok && o != id {
			t.Fatalf("LFU step %d: ids %d and %d share row %d", step, o, id, r)
		}
		owner[r] = id
		if _, ok := before[id]; !ok && !fresh[id] {
			t.Fatalf("LFU step %d: id %d came to hold row %d unannounced", step, id, r)
		}
	}
	used := 0
	for r := range m.o.Rows {
		if e := m.row[r]; e.held {
			if got, ok := m.Row(e.id); !ok || got != int64(r) {
				t.Fatalf("LFU step %d: row %d's id %d maps to %d", step, r, e.id, got)
			}
			used++
		}
	}
	if statsOf(m).Used != used {
		t.Fatalf("LFU step %d: Used %d, %d rows held", step, statsOf(m).Used, used)
	}
}

// exactSketch reports whether each of FuzzIDMap's 256 ids has a counter
// of the default sketch no other of them shares.
func exactSketch() bool {
	m, _ := NewIDMap("x", driver.IDMapOptions{Rows: 1, AdmitAfter: 2})
	width := len(m.cms) / 4
	at := func(id int64, d int) int { return d*width + int(tablerows.Mix(uint64(id), uint64(d))&m.mask) }
	users := map[int]int{}
	for v := range 256 {
		for d := range 4 {
			users[at(int64(int8(v))*1_000_003, d)]++
		}
	}
	for v := range 256 {
		alone := false
		for d := range 4 {
			alone = alone || users[at(int64(int8(v))*1_000_003, d)] == 1
		}
		if !alone {
			return false
		}
	}
	return true
}

// An id gets a row at its AdmitAfter-th sighting, in any batch; before
// that it reads the default row and counts as pending.
func TestIDMapAdmission(t *testing.T) {
	m, err := NewIDMap("a", driver.IDMapOptions{Rows: 4, AdmitAfter: 3})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]int64, 3)
	steps := [][]int64{{7, 8, 7}, {7, 9, 8}, {8, 9, 9}}
	want := [][]int64{{4, 4, 4}, {0, 4, 4}, {1, 4, 2}} // 9 is admitted at its third sighting
	for s, ids := range steps {
		if _, err := m.Map(context.Background(), ids, rows, int64(s), nil); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rows, want[s]) {
			t.Fatalf("step %d: %v, want %v", s, rows, want[s])
		}
	}
	if st := statsOf(m); st.Admitted != 3 || st.Pending != 6 || st.Used != 3 {
		t.Fatalf("%+v", st)
	}
}

// A full LFU map evicts a row of an id used less often than the others,
// never one of the batch's; a Refuse map names the id it has no row for
// and changes nothing.
func TestIDMapPolicies(t *testing.T) {
	m, _ := NewIDMap("lfu", driver.IDMapOptions{Rows: 2, Evict: driver.EvictLFU})
	rows := make([]int64, 1)
	for s, id := range []int64{1, 1, 1, 2, 3} {
		if _, err := m.Map(context.Background(), []int64{id}, rows, int64(s), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := m.Row(1); !ok {
		t.Fatal("LFU evicted the id used three times")
	}
	if _, ok := m.Row(2); ok {
		t.Fatal("LFU kept the id used once over the new one")
	}
	r, _ := NewIDMap("full", driver.IDMapOptions{Rows: 1, Evict: driver.Refuse})
	if _, err := r.Map(context.Background(), []int64{5}, rows, 0, nil); err != nil {
		t.Fatal(err)
	}
	_, err := r.Map(context.Background(), []int64{6}, rows, 1, nil)
	if !errors.Is(err, ErrCapacity) || !contains(err.Error(), `"full"`, "id 6") {
		t.Fatalf("a full map: %v", err)
	}
	if row, ok := r.Row(5); !ok || row != 0 || statsOf(r).Rejected != 1 {
		t.Fatalf("the refused batch changed the map: %v %v %+v", row, ok, statsOf(r))
	}
	two := make([]int64, 2)
	l, _ := NewIDMap("lru", driver.IDMapOptions{Rows: 2})
	if _, err := l.Map(context.Background(), []int64{1, 2}, two, 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Map(context.Background(), []int64{3}, rows, 0, nil); !errors.Is(err, ErrCapacity) {
		t.Fatalf("a second Map of the same step took a row the step uses: %v", err)
	}
}

func contains(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

// BenchmarkIDMap remaps a batch of 4,096 ids that all hold rows.
func BenchmarkIDMap(b *testing.B) {
	m, _ := NewIDMap("b", driver.IDMapOptions{Rows: 1 << 20})
	ids := make([]int64, 4096)
	for k := range ids {
		ids[k] = int64(tablerows.Mix(uint64(k), 9))
	}
	rows := make([]int64, len(ids))
	if _, err := m.Map(context.Background(), ids, rows, 0, nil); err != nil {
		b.Fatal(err)
	}
	step := int64(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Map(context.Background(), ids, rows, step, nil); err != nil {
			b.Fatal(err)
		}
		step++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ids)), "ns/id")
}

// BenchmarkIDMapRefuse maps batches of 4,096 ids, a few new each step,
// with a Refuse map that admits at the second sighting: every batch
// takes the capacity check's path that counts the batch's sightings.
func BenchmarkIDMapRefuse(b *testing.B) {
	m, _ := NewIDMap("b", driver.IDMapOptions{Rows: 1 << 20, AdmitAfter: 2, Evict: driver.Refuse})
	batches := stream(2, 64, 4096, 20_000)
	rows := make([]int64, 4096)
	step := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Map(context.Background(), batches[step%64], rows, step, nil); err != nil {
			b.Fatal(err)
		}
		step++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/id")
}

// stream returns steps batches of ids from a set of live ids that drifts:
// each step a few ids leave and new ones arrive.
func stream(seed uint64, steps, batch, live int) [][]int64 {
	r := rand.New(rand.NewPCG(seed, 3))
	pool := make([]int64, live)
	for k := range pool {
		pool[k] = int64(r.Uint64())
	}
	out := make([][]int64, steps)
	for s := range out {
		for range 2 {
			pool[r.IntN(live)] = int64(r.Uint64())
		}
		for range batch {
			out[s] = append(out[s], pool[min(r.IntN(live), r.IntN(live))])
		}
	}
	return out
}

// A map saved with checkpoint.Save and loaded into a new map of the same
// options maps every later batch as the saved one does: the same rows,
// the same rows given afresh, the same errors and Stats, under each
// policy, with admission and TTL.
func TestIDMapStateResumes(t *testing.T) {
	for _, o := range []driver.IDMapOptions{
		{Rows: 12, Evict: driver.EvictLRU, AdmitAfter: 2, SketchWidth: 64},
		{Rows: 12, Evict: driver.EvictLFU, TTL: 3},
		{Rows: 30, Evict: driver.Refuse, TTL: 2, AdmitAfter: 3},
	} {
		s := stream(uint64(o.Rows)+uint64(o.Evict), 40, 6, 25)
		a, err := NewIDMap("user", o)
		require.NoError(t, err)
		rows := make([]int64, 6)
		for step, ids := range s[:20] {
			a.Map(context.Background(), ids, rows, int64(step), nil) // Refuse errors are part of the history
		}
		path := filepath.Join(t.TempDir(), "map.safetensors")
		require.NoError(t, checkpoint.Save(path, nil, a))
		b, err := NewIDMap("user", o)
		require.NoError(t, err)
		_, err = checkpoint.Load(path, b)
		require.NoError(t, err)
		require.Equal(t, statsOf(a), statsOf(b))
		ra, rb := make([]int64, 6), make([]int64, 6)
		for step, ids := range s[20:] {
			fa, ea := a.Map(context.Background(), ids, ra, int64(20+step), nil)
			fb, eb := b.Map(context.Background(), ids, rb, int64(20+step), nil)
			require.Equal(t, ea, eb, "%+v step %d", o, 20+step)
			require.Equal(t, ra, rb, "%+v step %d", o, 20+step)
			require.Equal(t, fa, fb, "%+v step %d", o, 20+step)
		}
		require.Equal(t, statsOf(a), statsOf(b))
		require.NotZero(t, statsOf(a).Evicted+statsOf(a).Expired+statsOf(a).Rejected, "%+v: the stream never filled the map", o)

		other, err := NewIDMap("user", driver.IDMapOptions{Rows: o.Rows, Evict: o.Evict, TTL: o.TTL + 1, AdmitAfter: o.AdmitAfter, SketchWidth: o.SketchWidth})
		require.NoError(t, err)
		_, err = checkpoint.Load(path, other)
		require.ErrorIs(t, err, checkpoint.ErrFormat)
		require.ErrorContains(t, err, "ttl")
		require.Zero(t, statsOf(other).Used, "a refused state changed the map")
	}
}

// FuzzIDMapState gives SetState any tensors of a three-row map, as the
// bytes encode writes (decode): an error naming the fault and an
// unchanged map, or a map that maps and saves.
func FuzzIDMapState(f *testing.F) {
	m, _ := NewIDMap("f", driver.IDMapOptions{Rows: 3})
	rows := make([]int64, 2)
	m.Map(context.Background(), []int64{5, 9}, rows, 0, nil)
	m.Map(context.Background(), []int64{7, 5}, rows, 1, nil)
	f.Add(m.encode()[len(idMapMagic):])
	empty, _ := NewIDMap("f", driver.IDMapOptions{Rows: 3})
	f.Add(empty.encode()[len(idMapMagic):])
	f.Fuzz(func(t *testing.T, b []byte) {
		m, _ := NewIDMap("f", driver.IDMapOptions{Rows: 3})
		if _, err := m.decode(append([]byte(idMapMagic), b...)); err != nil {
			if !errors.Is(err, checkpoint.ErrFormat) || statsOf(m).Used != 0 {
				t.Fatalf("%v; %+v", err, statsOf(m))
			}
			return
		}
		if m.step > math.MaxInt64-8 {
			return // no later step to map
		}
		rows, base := make([]int64, 3), m.step+1
		for step := int64(0); step < 4; step++ {
			if _, err := m.Map(context.Background(), []int64{step, 100 + step, 7}, rows, base+step, nil); err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if r < 0 || r > 3 {
					t.Fatalf("row %d", r)
				}
			}
		}
		if _, err := m.State(); err != nil {
			t.Fatal(err)
		}
	})
}

// Cached.Reset starts rows afresh in the cache and writes them back when
// they leave it: a store read after the cache evicted them holds
// InitialRow of each new id and the state columns' Init.
func TestCachedReset(t *testing.T) {
	cols := []driver.Column{{Name: "sum", Width: 1, Init: 0.5}}
	w := tensor.New(tensor.WithShape(5, 2), tensor.WithBacking([]float32{1, 1, 2, 2, 3, 3, 4, 4, 5, 5}))
	store, err := NewMemoryStore("t", w, cols...)
	require.NoError(t, err)
	c, err := NewCached(context.Background(), store, CacheOptions{Budget: 2 * (3*4 + 100)})
	require.NoError(t, err)
	defer c.Close(context.Background())
	fresh := []driver.Assignment{{Row: 1, ID: -77}, {Row: 3, ID: 1 << 40}}
	require.NoError(t, c.Reset(context.Background(), fresh, driver.RowInit{Seed: 4, Std: 1}))
	c.NewBatch()
	require.NoError(t, c.Fetch(context.Background(), []int64{0, 4}, make([]int32, 2))) // evicts rows 1 and 3
	read := func(row int64) []float32 {
		b := make([]byte, 12)
		require.NoError(t, store.ReadRows(context.Background(), []int64{row}, b))
		v := make([]float32, 3)
		for k := range v {
			v[k] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:]))
		}
		return v
	}
	for _, a := range fresh {
		want := make([]float32, 2)
		InitialRow(want, 4, a.ID)
		require.Equal(t, append(want, 0.5), read(a.Row), "row %d", a.Row)
	}
	require.Equal(t, []float32{3, 3, 0.5}, read(2), "a row not reset changed")
	shared, err := NewCached(context.Background(), store, CacheOptions{Budget: 1 << 10, Shared: &SharedOptions{}})
	require.NoError(t, err)
	defer shared.Close(context.Background())
	require.ErrorIs(t, shared.Reset(context.Background(), fresh, driver.RowInit{Seed: 4, Std: 1}), errs.ErrOption)
}

// ReadIDMap finds a map in a checkpoint beside other tensors, with the
// options it was saved with, and maps as the saved map does; a file
// without it is a format error.
func TestReadIDMap(t *testing.T) {
	o := driver.IDMapOptions{Rows: 6, AdmitAfter: 2, SketchWidth: 100, TTL: 4, Pad: true, PadID: -1}
	a, err := NewIDMap("item", o)
	require.NoError(t, err)
	s := stream(5, 30, 5, 12)
	rows := make([]int64, 5)
	for step, ids := range s[:15] {
		_, err := a.Map(context.Background(), ids, rows, int64(step), nil)
		require.NoError(t, err)
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	w := tensor.New(tensor.WithShape(7, 2), tensor.WithBacking(make([]float32, 14)))
	require.NoError(t, checkpoint.Write(path, map[string]tensor.Tensor{"item.weight": w}, nil))
	st, err := a.State()
	require.NoError(t, err)
	st["item.weight"] = w
	require.NoError(t, checkpoint.Write(path, st, nil))
	b, err := ReadIDMap(path, "item")
	require.NoError(t, err)
	require.Equal(t, a.o, b.o)
	ra, rb := make([]int64, 5), make([]int64, 5)
	for step, ids := range s[15:] {
		fa, ea := a.Map(context.Background(), ids, ra, int64(15+step), nil)
		fb, eb := b.Map(context.Background(), ids, rb, int64(15+step), nil)
		require.Equal(t, ea, eb)
		require.Equal(t, ra, rb)
		require.Equal(t, fa, fb)
	}
	ids, held := b.Held()
	for k, id := range ids {
		r, ok := b.Row(id)
		require.True(t, ok)
		require.Equal(t, held[k], r)
	}
	_, err = ReadIDMap(path, "user")
	require.ErrorIs(t, err, checkpoint.ErrFormat)

	// The resume: the weights and the map ReadIDMap returned, as parts of
	// one Load. Without the map, the error names it.
	c, err := ReadIDMap(path, "item")
	require.NoError(t, err)
	wp := weightPart{tensor.New(tensor.WithShape(7, 2), tensor.Of(tensor.Float32))}
	_, err = checkpoint.Load(path, wp)
	require.ErrorIs(t, err, checkpoint.ErrMismatch)
	require.ErrorContains(t, err, `"item.idmap.`)
	require.ErrorContains(t, err, `pass the parts that saved them`)
	_, err = checkpoint.Load(path, wp, c)
	require.NoError(t, err)
	require.Equal(t, b.o, c.o)
}

// weightPart is the checkpoint.Part of one tensor, "item.weight".
type weightPart struct{ w *tensor.Dense }

func (p weightPart) State() (map[string]tensor.Tensor, error) {
	return map[string]tensor.Tensor{"item.weight": p.w}, nil
}

func (p weightPart) SetState(m map[string]*tensor.Dense) error {
	return checkpoint.CopyInto(p.w, m["item.weight"])
}

// FuzzReadIDMap reads any file as a saved map: an error, or a map that
// maps.
func FuzzReadIDMap(f *testing.F) {
	m, _ := NewIDMap("m", driver.IDMapOptions{Rows: 3, AdmitAfter: 2, SketchWidth: 4})
	rows := make([]int64, 2)
	m.Map(context.Background(), []int64{4, 4}, rows, 0, nil)
	m.Map(context.Background(), []int64{9, 9}, rows, 1, nil)
	st, _ := m.State()
	dir := f.TempDir()
	p := filepath.Join(dir, "seed")
	if err := checkpoint.Write(p, st, nil); err != nil {
		f.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := ReadIDMap(p, "m")
		if err != nil || m.step > math.MaxInt64-2 {
			return
		}
		rows := make([]int64, 3)
		if _, err := m.Map(context.Background(), []int64{1, 2, 1}, rows, max(m.step, 0)+1, nil); err != nil && !errors.Is(err, ErrCapacity) {
			t.Fatal(err)
		}
	})
}

// A saved map that claims more rows than its file holds is a format
// error, found before the map's memory is made.
func TestReadIDMapHuge(t *testing.T) {
	m, _ := NewIDMap("m", driver.IDMapOptions{Rows: 2})
	st, _ := m.State()
	meta := st["m.idmap.meta"].(*tensor.Dense).Int64s()
	meta[0] = 1 << 30
	path := filepath.Join(t.TempDir(), "huge")
	require.NoError(t, checkpoint.Write(path, st, nil))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadIDMap(path, "m")
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, checkpoint.ErrFormat)
	require.ErrorContains(t, err, "no id tensor of shape [1073741824]")
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20))
}

// A map kept in a table file's rows (FileOptions.IDMap) is committed
// with each Sync: the files a crash leaves after unsynced steps reopen
// with the map of the last Sync, and after Close with the last map. Other
// options and rows that overlap the map's are errors, and leave the file
// as it was.
func TestKeepIDMap(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.safetensors")
	o := driver.IDMapOptions{Rows: 20, AdmitAfter: 2, SketchWidth: 64, Evict: driver.EvictLFU}
	cols := []driver.Column{{Name: "sum", Width: 1}}
	k, err := IDMapRows(o, 4*3)
	require.NoError(t, err)
	vocab := int64(o.Rows+1) + k
	require.NoError(t, Create(path, "t", int(vocab), 2, tensor.Float32, WithState(cols...)))
	ctx := context.Background()
	m, _ := NewIDMap("t", o)
	c, err := OpenCached(ctx, path, CacheOptions{Budget: 1 << 16}, FileOptions{IDMap: m, IDMapRow: int64(o.Rows + 1)})
	require.NoError(t, err)
	require.Zero(t, statsOf(m).Used, "a new file's rows held a map")
	s := stream(3, 20, 6, 40)
	rows := make([]int64, 6)
	for step, ids := range s[:10] {
		m.Map(context.Background(), ids, rows, int64(step), nil)
	}
	require.NoError(t, c.Sync(ctx))
	synced := m.encode()
	for step, ids := range s[10:] {
		m.Map(context.Background(), ids, rows, int64(10+step), nil)
	}
	require.NotEqual(t, synced, m.encode())
	require.NoError(t, c.writeIDMap(ctx)) // a Sync's first part: the map's rows in the journal, not committed

	// A crash now: the files as they are, copied before anything closes.
	crash := filepath.Join(dir, "crash")
	require.NoError(t, os.Mkdir(crash, 0o755))
	for _, name := range []string{"t.safetensors", "t.safetensors.journal"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(crash, name), b, 0o644))
	}
	require.NoError(t, c.Close(ctx))
	reopen := func(p string) *IDMap {
		m, _ := NewIDMap("t", o)
		c, err := OpenCached(ctx, p, CacheOptions{Budget: 1 << 16}, FileOptions{IDMap: m, IDMapRow: int64(o.Rows + 1)})
		require.NoError(t, err)
		defer c.Close(ctx)
		return m
	}
	require.Equal(t, synced, reopen(filepath.Join(crash, "t.safetensors")).encode(), "the crash's map is not the last Sync's")
	require.Equal(t, m.encode(), reopen(path).encode(), "Close did not keep the last map")

	other, _ := NewIDMap("t", driver.IDMapOptions{Rows: 20, AdmitAfter: 2, SketchWidth: 64, Evict: driver.EvictLRU})
	keep := func(m *IDMap, row int64) error {
		c, err := OpenCached(ctx, path, CacheOptions{Budget: 1 << 16}, FileOptions{IDMap: m, IDMapRow: row})
		if err == nil {
			c.Close(ctx)
		}
		return err
	}
	require.ErrorIs(t, keep(other, int64(o.Rows+1)), checkpoint.ErrFormat)
	require.Zero(t, statsOf(other).Used)
	require.ErrorIs(t, keep(other, int64(o.Rows)), errs.ErrOption)
	require.ErrorIs(t, keep(other, vocab-k+1), errs.ErrOption)
	require.Equal(t, m.encode(), reopen(path).encode(), "a refused map changed the file")
}

// FuzzIDMapDecode gives a map any bytes as the rows FileOptions.IDMap reads: an
// error and an unchanged map, or a map that maps.
func FuzzIDMapDecode(f *testing.F) {
	o := driver.IDMapOptions{Rows: 3, AdmitAfter: 2, SketchWidth: 4}
	m, _ := NewIDMap("f", o)
	rows := make([]int64, 2)
	m.Map(context.Background(), []int64{5, 5}, rows, 0, nil)
	m.Map(context.Background(), []int64{6, 6}, rows, 1, nil)
	f.Add(m.encode())
	f.Add(append([]byte(idMapMagic), make([]byte, 40)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, _ := NewIDMap("f", o)
		if _, err := m.decode(b); err != nil {
			if !errors.Is(err, checkpoint.ErrFormat) || statsOf(m).Used != 0 {
				t.Fatalf("%v; %+v", err, statsOf(m))
			}
			return
		}
		if m.step > math.MaxInt64-2 {
			return
		}
		rows := make([]int64, 3)
		if _, err := m.Map(context.Background(), []int64{1, 2, 1}, rows, max(m.step, 0)+1, nil); err != nil && !errors.Is(err, ErrCapacity) {
			t.Fatal(err)
		}
	})
}

// A sketch of one counter counts every id of a batch in it: the batch's
// own sightings admit its later ids. A Refuse map of 2 rows refuses the
// batch whose third admitted id finds no row, evicting nothing, and an
// LRU map never gives one row to two ids of the batch.
func TestIDMapNarrowSketch(t *testing.T) {
	ids := []int64{101, 102, 103, 104, 105}
	m, err := NewIDMap("x", driver.IDMapOptions{Rows: 2, AdmitAfter: 3, SketchWidth: 1, Evict: driver.Refuse})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]int64, len(ids))
	a, err := m.Map(context.Background(), ids, rows, 0, nil)
	if !errors.Is(err, ErrCapacity) || len(a) != 0 {
		t.Fatalf("Refuse: rows %v, assigned %v, %v; want ErrCapacity", rows, a, err)
	}
	if !strings.Contains(err.Error(), `id map "x": no row for id 105`) {
		t.Fatalf("the error does not name the map and the id: %v", err)
	}
	if st := statsOf(m); st != (driver.IDMapStats{Rejected: 1}) {
		t.Fatalf("Refuse: %+v after a refused batch", st)
	}
	// The refused batch counted nothing: the same batch with the map's
	// rows one larger admits 103, 104 and 105.
	m, _ = NewIDMap("x", driver.IDMapOptions{Rows: 3, AdmitAfter: 3, SketchWidth: 1, Evict: driver.Refuse})
	if _, err := m.Map(context.Background(), ids, rows, 0, nil); err != nil || !slices.Equal(rows, []int64{3, 3, 0, 1, 2}) {
		t.Fatalf("Refuse, 3 rows: %v, %v", rows, err)
	}
	for _, evict := range []driver.Eviction{driver.EvictLRU, driver.EvictLFU} {
		m, _ := NewIDMap("x", driver.IDMapOptions{Rows: 2, AdmitAfter: 3, SketchWidth: 1, Evict: evict})
		a, err := m.Map(context.Background(), ids, rows, 0, nil)
		if !errors.Is(err, ErrCapacity) || len(a) != 0 || statsOf(m) != (driver.IDMapStats{}) {
			t.Fatalf("%v: rows %v, assigned %v, %+v, %v; want ErrCapacity", evict, rows, a, statsOf(m), err)
		}
		// The refused batch counted nothing: four of its ids admit 103 and 104.
		if _, err := m.Map(context.Background(), ids[:4], rows[:4], 1, nil); err != nil || !slices.Equal(rows[:4], []int64{2, 2, 0, 1}) {
			t.Fatalf("%v: %v, %v", evict, rows[:4], err)
		}
	}
}

// Each wrong option is an error naming it, its value and its limit; a
// map whose memory would pass MaxIDMapBytes is refused before any is
// taken, naming the bytes; a RowInit's Std must be finite and at least 0.
func TestIDMapOptionsChecked(t *testing.T) {
	type bad struct {
		o    driver.IDMapOptions
		want string
	}
	cases := []bad{
		{driver.IDMapOptions{Rows: 0}, "Rows 0 must lie in [1, 2147483646]"},
		{driver.IDMapOptions{Rows: 5, AdmitAfter: -1}, "AdmitAfter -1 must lie in [0, 4294967295]"},
		{driver.IDMapOptions{Rows: 5, SketchWidth: -3}, "SketchWidth -3 must lie in [0, 1099511627776]"},
		{driver.IDMapOptions{Rows: 5, TTL: -1}, "TTL -1 must be at least 0"},
		{driver.IDMapOptions{Rows: 5, Evict: 9}, "Evict 9 is not a policy"},
		{driver.IDMapOptions{Rows: 1<<31 - 2}, fmt.Sprintf("Rows 2147483646 and SketchWidth 0 take 77309411256 bytes, more than MaxIDMapBytes (%d)", MaxIDMapBytes)},
		{driver.IDMapOptions{Rows: 5, AdmitAfter: 2, SketchWidth: 1 << 30}, "Rows 5 and SketchWidth 1073741824 take 17179869364 bytes"},
	}
	if strconv.IntSize == 64 {
		big := int64(1) << 31
		cases = append(cases, bad{driver.IDMapOptions{Rows: int(big)}, "Rows 2147483648 must lie in [1, 2147483646]"},
			bad{driver.IDMapOptions{Rows: 5, AdmitAfter: int(2 * big)}, "AdmitAfter 4294967296 must lie in [0, 4294967295]"})
	}
	for _, c := range cases {
		_, err := NewIDMap("o", c.o)
		if !errors.Is(err, errs.ErrOption) || !strings.Contains(err.Error(), `id map "o": `+c.want) {
			t.Errorf("%+v: %v, want ErrOption naming %q", c.o, err, c.want)
		}
	}
	// AdmitAfter at the sketch's largest count (or int's) is a map, whose
	// ids wait.
	m, err := NewIDMap("o", driver.IDMapOptions{Rows: 5, AdmitAfter: int(min(math.MaxUint32, math.MaxInt)), SketchWidth: 64})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]int64, 3)
	if _, err := m.Map(context.Background(), []int64{1, 1, 1}, rows, 0, nil); err != nil || !slices.Equal(rows, []int64{5, 5, 5}) {
		t.Fatalf("AdmitAfter 2³²-1: rows %v, %v", rows, err)
	}
	for _, std := range []float64{math.NaN(), math.Inf(1), -1} {
		err := driver.RowInit{Std: std}.Check()
		if !errors.Is(err, errs.ErrOption) || !strings.Contains(err.Error(), fmt.Sprintf("Std %v must be finite and at least 0", std)) {
			t.Errorf("Std %v: %v", std, err)
		}
		w := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, 4}))
		if err := InitialRows(w, nil, nil, []driver.Assignment{{Row: 0, ID: 3}}, driver.RowInit{Std: std}); !errors.Is(err, errs.ErrOption) || w.Float32s()[0] != 1 {
			t.Errorf("InitialRows, Std %v: %v, row %v", std, err, w.Float32s()[:2])
		}
	}
}

// A float32 row of a RowInit is each draw times Std in float64, rounded
// once to float32.
func TestRowInitRoundsOnce(t *testing.T) {
	init := driver.RowInit{Seed: 4, Std: 0.05}
	got := make([]float32, 64)
	if err := InitialRows(tensor.New(tensor.WithShape(1, 64), tensor.WithBacking(got)), nil, nil, []driver.Assignment{{Row: 0, ID: 77}}, init); err != nil {
		t.Fatal(err)
	}
	draws := make([]float64, 64)
	InitialRow(draws, init.Seed, 77)
	for i, d := range draws {
		if want := float32(d * init.Std); got[i] != want {
			t.Fatalf("value %d: %v, want float32(%v·%v) = %v", i, got[i], d, init.Std, want)
		}
	}
}

// EvictLRU's ties: of the ids last used at the earliest step, the one
// first used in it goes first, and a batch's ids that held rows count as
// used before its new ids, whatever their order in the batch.
func TestIDMapLRUTies(t *testing.T) {
	m, err := NewIDMap("t", driver.IDMapOptions{Rows: 3})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]int64, 2)
	for s, ids := range [][]int64{{10, 20}, {30, 10}, {40, 40}, {50, 50}} {
		if _, err := m.Map(context.Background(), ids, rows, int64(s), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Step 2: 40 took 20's row (step 0). Step 3: of 30 and 10, both last
	// used at step 1, 10 held its row then and counts as used first,
	// though 30 came first in the batch: 50 takes 10's row.
	for id, want := range map[int64]bool{10: false, 20: false, 30: true, 40: true, 50: true} {
		if _, ok := m.Row(id); ok != want {
			t.Errorf("id %d holds a row: %v, want %v", id, ok, want)
		}
	}
	if r, _ := m.Row(50); r != 0 {
		t.Errorf("50 has row %d, want 10's row 0", r)
	}
}

// statsOf returns m's Stats.
func statsOf(m driver.Mapper) driver.IDMapStats {
	s, err := m.Stats(context.Background())
	if err != nil {
		panic(err)
	}
	return s
}

// HeldIDMap gives each held id its row, in the recency order of Last,
// frees the other rows, keeps the counts; a row outside the map, a row
// held twice or an id holding two rows is an error naming it.
func TestHeldIDMap(t *testing.T) {
	o := driver.IDMapOptions{Rows: 4, Evict: driver.EvictLRU}
	st := driver.IDMapStats{Admitted: 7, Evicted: 4, Used: 99}
	m, err := HeldIDMap(driver.IDMapState{Name: "h", Options: o, Held: []driver.HeldRow{{Row: 2, ID: -5, Last: 9, Uses: 3}, {Row: 0, ID: 11, Last: 4, Uses: 1}}, Stats: st})
	require.NoError(t, err)
	for id, want := range map[int64]int64{-5: 2, 11: 0} {
		row, ok := m.Row(id)
		require.True(t, ok)
		require.Equal(t, want, row)
	}
	got := statsOf(m)
	require.Equal(t, driver.IDMapStats{Used: 2, Admitted: 7, Evicted: 4}, got)
	// Full: two new ids take the free rows 1 and 3; a third evicts the
	// least recent, id 11 (last used at 4), not -5 (at 9).
	rows := make([]int64, 3)
	_, err = m.Map(context.Background(), []int64{100, 101, 102}, rows, 10, nil)
	require.NoError(t, err)
	require.ElementsMatch(t, []int64{1, 3, 0}, rows)
	_, held := m.Row(11)
	require.False(t, held)
	for _, bad := range [][]driver.HeldRow{
		{{Row: 4, ID: 1}},
		{{Row: -1, ID: 1}},
		{{Row: 1, ID: 1}, {Row: 1, ID: 2}},
		{{Row: 1, ID: 1}, {Row: 2, ID: 1}},
	} {
		_, err := HeldIDMap(driver.IDMapState{Name: "h", Options: o, Held: bad})
		require.ErrorIs(t, err, errs.ErrOption, "%v", bad)
	}
}

// The capacity check keeps its scratch from batch to batch: a batch of
// ids that all hold rows maps without allocating, and a batch after a
// much larger one (whose scratch is made again) is checked as before,
// its error naming the first id without a row.
func TestIDMapCheckScratch(t *testing.T) {
	ctx := context.Background()
	m, err := NewIDMap("s", driver.IDMapOptions{Rows: 4096, Evict: driver.Refuse})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, 2048)
	for k := range ids {
		ids[k] = int64(tablerows.Mix(uint64(k), 5))
	}
	rows := make([]int64, len(ids))
	if _, err := m.Map(ctx, ids, rows, 0, nil); err != nil {
		t.Fatal(err)
	}
	step := int64(1)
	if a := testing.AllocsPerRun(20, func() {
		if _, err := m.Map(ctx, ids, rows, step, nil); err != nil {
			t.Fatal(err)
		}
		step++
	}); a != 0 {
		t.Errorf("Map of held ids: %v allocations, want 0", a)
	}

	small, _ := NewIDMap("small", driver.IDMapOptions{Rows: 100, Evict: driver.Refuse})
	big := make([]int64, 5000)
	for k := range big {
		big[k] = int64(k) * 7
	}
	_, err = small.Map(ctx, big, make([]int64, len(big)), 0, nil)
	if !errors.Is(err, ErrCapacity) || !strings.Contains(err.Error(), "no row for id 700:") {
		t.Fatalf("5000 new ids into 100 rows: %v, want ErrCapacity naming id 700", err)
	}
	if _, err := small.Map(ctx, big[:10], make([]int64, 10), 1, nil); err != nil {
		t.Fatalf("10 new ids into 100 rows: %v", err)
	}
	_, err = small.Map(ctx, big[:200], make([]int64, 200), 2, nil)
	if !errors.Is(err, ErrCapacity) || !strings.Contains(err.Error(), "no row for id 700:") ||
		!strings.Contains(err.Error(), "needs 190 new rows and the map may give 90 of its 100") {
		t.Fatalf("190 new ids into 90 free rows: %v, want ErrCapacity naming id 700", err)
	}
	if st := statsOf(small); st.Used != 10 {
		t.Errorf("after the refused batches %d rows used, want 10", st.Used)
	}
}
