package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/localredis"
	"github.com/gathergrad/gather/internal/tablerows"
	"github.com/gathergrad/gather/table"
)

// mapTable writes a float32 table name of mo.Rows+1 rows of dim values
// to the cluster and returns a store of it with a IDMap of mo.
func mapTable(t *testing.T, o Options, name string, dim int, mo driver.IDMapOptions, init driver.RowInit) (*Store, *IDMap) {
	t.Helper()
	if err := Create(context.Background(), o, name, int64(mo.Rows)+1, dim, tensor.Float32, table.WithSeed(1)); err != nil {
		t.Fatal(err)
	}
	return openMap(t, o, name, mo, init)
}

// openMap opens the store of name with a IDMap of mo.
func openMap(t *testing.T, o Options, name string, mo driver.IDMapOptions, init driver.RowInit) (*Store, *IDMap) {
	t.Helper()
	s, err := Open(context.Background(), o, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	m, err := NewIDMap(context.Background(), s, mo, init)
	if err != nil {
		t.Fatal(err)
	}
	return s, m
}

// sameTag returns n raw ids of one hash tag, negative ones among them.
func sameTag(n int) []int64 {
	var out []int64
	for id := int64(-1 << 40); len(out) < n; id += 1 << 35 {
		if idTag(id) == idTag(-1<<40) {
			out = append(out, id)
		}
	}
	return out
}

// mapOK maps ids at step and returns the rows and the fresh ones.
func mapOK(t *testing.T, m *IDMap, ids []int64, step int64) ([]int64, []driver.Assignment) {
	t.Helper()
	rows := make([]int64, len(ids))
	fresh, err := m.Map(context.Background(), ids, rows, step, nil)
	if err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	return rows, fresh
}

func mapStats(t *testing.T, m driver.Mapper) driver.IDMapStats {
	t.Helper()
	st, err := m.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// sgdStep steps rows of s by testRule (w -= g) with a gradient of g in
// every value.
func sgdStep(s *Store, rows []int64, g float32) error {
	grad := make([]float32, len(rows)*s.dim)
	for i := range grad {
		grad[i] = g
	}
	v := tensor.New(tensor.WithShape(len(rows), s.dim), tensor.WithBacking(grad))
	return s.Step(context.Background(), testRule{}, &driver.RowGrad{Rows: rows, Values: v})
}

// A map on the cluster admits, evicts (LRU, LFU), expires and refuses
// within a tag's rows and reads the default row for ids not admitted;
// it hands the rows it read to the next read with no call, starts a new
// row at its first step from RowInit's values, and drops the gradient of
// a row taken for another id since its worker's Map.
func TestRedisIDMap(t *testing.T) {
	cl := localredis.Start(t, 3, 0)
	o := Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 5 * time.Second}
	ctx := context.Background()
	const dim = 4
	init := driver.RowInit{Seed: 3, Std: 0.5}
	ids := sameTag(4)
	tag := idTag(ids[0])
	initial := func(id int64) []float32 {
		v := make([]float32, dim)
		tablerows.FillRow(init.Seed, init.Std, v, id)
		return v
	}
	read := func(s *Store, rows ...int64) []float32 {
		t.Helper()
		b := make([]byte, len(rows)*s.RowBytes())
		if err := s.ReadRows(ctx, rows, b); err != nil {
			t.Fatal(err)
		}
		return fileio.Float32s(b)
	}
	minus := func(v []float32, g float32) []float32 {
		out := slices.Clone(v)
		for i := range out {
			out[i] -= g
		}
		return out
	}

	t.Run("lru", func(t *testing.T) {
		mo := driver.IDMapOptions{Rows: 2 * redisGroups} // 2 rows a tag
		s1, m1 := mapTable(t, o, "lru", dim, mo, init)
		s2, m2 := openMap(t, o, "lru", mo, init)
		rows, fresh := mapOK(t, m1, ids[:1], 0)
		if rows[0] != tag || !slices.Equal(fresh, []driver.Assignment{{Row: tag, ID: ids[0]}}) {
			t.Fatalf("the first id of tag %d: rows %v fresh %v", tag, rows, fresh)
		}
		// The new row reads as its initial row, from Map, once: a row
		// written on the servers since is read at the second read.
		other := make([]byte, s1.RowBytes())
		if err := s2.WriteRows(ctx, rows, other); err != nil {
			t.Fatal(err)
		}
		if got := read(s1, rows...); !slices.Equal(got, initial(ids[0])) {
			t.Fatalf("the new row read %v, want %v", got, initial(ids[0]))
		}
		if got := read(s1, rows...); !slices.Equal(got, make([]float32, dim)) {
			t.Fatalf("the second read gave %v, not the servers' row", got)
		}
		// A row missing on the servers (given, not stepped yet) reads,
		// in any process, as its id's initial row; its first step starts
		// from that row.
		if _, err := s2.c.Del(ctx, s1.key(rows[0])).Result(); err != nil {
			t.Fatal(err)
		}
		s3, err := Open(ctx, o, "lru")
		if err != nil {
			t.Fatal(err)
		}
		defer s3.Close()
		if got := read(s3, rows[0], tag+1); !slices.Equal(got[:dim], initial(ids[0])) {
			t.Fatalf("the row missing on the servers read %v, want %v", got[:dim], initial(ids[0]))
		}
		if err := s3.ReadRows(ctx, []int64{tag + 2}, make([]byte, s3.RowBytes())); err != nil {
			t.Fatal(err)
		}
		if _, err := s2.c.Del(ctx, s1.key(tag+2)).Result(); err != nil {
			t.Fatal(err)
		}
		if err := s3.ReadRows(ctx, []int64{tag + 2}, make([]byte, s3.RowBytes())); !errors.Is(err, checkpoint.ErrMismatch) {
			t.Fatalf("a missing row no id holds: %v", err)
		}
		if err := sgdStep(s1, rows, 1); err != nil {
			t.Fatal(err)
		}
		if got := read(s2, rows...); !slices.Equal(got, minus(initial(ids[0]), 1)) {
			t.Fatalf("after the first step: %v, want %v", got, minus(initial(ids[0]), 1))
		}
		// Another worker fills the tag and then evicts ids[0], the least
		// recently used, for ids[2], and steps it; the first worker's
		// step of ids[0]'s row, after, is dropped.
		if rows, _ := mapOK(t, m2, ids[1:2], 1); rows[0] != tag+redisGroups {
			t.Fatalf("the second id of the tag: row %d", rows[0])
		}
		if got, _ := mapOK(t, m2, ids[2:3], 2); got[0] != tag {
			t.Fatalf("the third id took row %d, not %d of the least recently used", got[0], tag)
		}
		if err := sgdStep(s2, []int64{tag}, 1); err != nil {
			t.Fatal(err)
		}
		if err := sgdStep(s1, rows, 1); err != nil {
			t.Fatal(err)
		}
		if got := read(s2, tag); !slices.Equal(got, minus(initial(ids[2]), 1)) {
			t.Fatalf("the row taken for id %d: %v, want %v", ids[2], got, minus(initial(ids[2]), 1))
		}
		st := mapStats(t, m1)
		want := driver.IDMapStats{Used: 2, Admitted: 3, Evicted: 1, Dropped: 1}
		if st != want {
			t.Fatalf("stats %+v, want %+v", st, want)
		}
		// Ids not in the map (and every tag but this one) are untouched:
		// a row not given is an error to step.
		if err := sgdStep(s2, []int64{tag + 1}, 1); !errors.Is(err, errs.ErrGraph) {
			t.Fatalf("stepping a row the map did not give: %v", err)
		}
	})

	t.Run("lfu", func(t *testing.T) {
		mo := driver.IDMapOptions{Rows: 2 * redisGroups, Evict: driver.EvictLFU}
		_, m := mapTable(t, o, "lfu", dim, mo, init)
		// ids[0] is used in 3 steps, ids[1] in 1, later: LFU takes
		// ids[1]'s row, where LRU would take ids[0]'s.
		for step := range int64(3) {
			mapOK(t, m, ids[:1], step)
		}
		if rows, _ := mapOK(t, m, ids[1:2], 3); rows[0] != tag+redisGroups {
			t.Fatalf("the second id: row %d", rows[0])
		}
		if rows, _ := mapOK(t, m, ids[2:3], 4); rows[0] != tag+redisGroups {
			t.Fatalf("LFU took row %d, not %d of the least used id", rows[0], tag+redisGroups)
		}
	})

	t.Run("admit ttl refuse", func(t *testing.T) {
		mo := driver.IDMapOptions{Rows: redisGroups, AdmitAfter: 3, TTL: 2, Evict: driver.Refuse, Pad: true, PadID: ids[3]}
		_, m := mapTable(t, o, "admit", dim, mo, init)
		pad := int64(mo.Rows)
		// Seen twice in one batch and once more: admitted at the third.
		if rows, _ := mapOK(t, m, []int64{ids[0], ids[0], ids[3]}, 0); !slices.Equal(rows, []int64{pad, pad, pad}) {
			t.Fatalf("ids seen twice: rows %v", rows)
		}
		if rows, _ := mapOK(t, m, ids[:1], 1); rows[0] != tag {
			t.Fatalf("an id seen 3 times: row %d", rows[0])
		}
		// The tag's one row is held: a new id is refused (the default
		// row, no error), until TTL frees it.
		mapOK(t, m, []int64{ids[1], ids[1], ids[1]}, 2)
		if rows, _ := mapOK(t, m, ids[1:2], 3); rows[0] != pad {
			t.Fatalf("a full Refuse map gave row %d", rows[0])
		}
		if rows, _ := mapOK(t, m, ids[1:2], 4); rows[0] != tag {
			t.Fatalf("after ids[0]'s TTL, ids[1] got row %d", rows[0])
		}
		st := mapStats(t, m)
		want := driver.IDMapStats{Used: 1, Admitted: 2, Expired: 1, Rejected: 2, Pending: 2}
		if st != want {
			t.Fatalf("stats %+v, want %+v", st, want)
		}
		// Options differ: refused.
		s, err := Open(ctx, o, "admit")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		mo.TTL = 3
		if _, err := NewIDMap(ctx, s, mo, init); !errors.Is(err, checkpoint.ErrMismatch) {
			t.Fatalf("other options: %v", err)
		}
		// Options that are no map's, a table too small or of float64,
		// a second map of a store: errors.
		for _, bad := range []driver.IDMapOptions{{Rows: 0}, {Rows: 10, AdmitAfter: -1}, {Rows: 10, Evict: 7}, {Rows: 1 << 20}} {
			s, err := Open(ctx, o, "admit")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := NewIDMap(ctx, s, bad, init); !errors.Is(err, errs.ErrOption) {
				t.Fatalf("options %+v: %v", bad, err)
			}
			s.Close()
		}
		if _, err := NewIDMap(ctx, nil, mo, init); !errors.Is(err, errs.ErrOption) {
			t.Fatalf("no store: %v", err)
		}
		s1, _ := openMap(t, o, "admit", driver.IDMapOptions{Rows: redisGroups, AdmitAfter: 3, TTL: 2, Evict: driver.Refuse, Pad: true, PadID: ids[3]}, init)
		if _, err := NewIDMap(ctx, s1, driver.IDMapOptions{Rows: redisGroups, AdmitAfter: 3, TTL: 2, Evict: driver.Refuse, Pad: true, PadID: ids[3]}, init); !errors.Is(err, errs.ErrOption) {
			t.Fatalf("a second map: %v", err)
		}
		if err := Create(ctx, o, "wide", redisGroups+1, dim, tensor.Float64); err != nil {
			t.Fatal(err)
		}
		s64, err := Open(ctx, o, "wide")
		if err != nil {
			t.Fatal(err)
		}
		defer s64.Close()
		if _, err := NewIDMap(ctx, s64, driver.IDMapOptions{Rows: redisGroups}, init); !errors.Is(err, errs.ErrOption) || !strings.Contains(err.Error(), "float32") {
			t.Fatalf("a float64 table: %v", err)
		}
		// Fewer rows than hash tags would leave tags whose ids are never
		// admitted; a RowInit that is no number makes no rows.
		if err := Create(ctx, o, "few", 601, dim, tensor.Float32); err != nil {
			t.Fatal(err)
		}
		few, err := Open(ctx, o, "few")
		if err != nil {
			t.Fatal(err)
		}
		defer few.Close()
		if _, err := NewIDMap(ctx, few, driver.IDMapOptions{Rows: 600}, init); !errors.Is(err, errs.ErrOption) || !strings.Contains(err.Error(), "Rows 600 leaves hash tags with no rows") {
			t.Fatalf("600 rows: %v", err)
		}
		if _, err := NewIDMap(ctx, s64, driver.IDMapOptions{Rows: redisGroups}, driver.RowInit{Std: math.NaN()}); !errors.Is(err, errs.ErrOption) || !strings.Contains(err.Error(), "Std NaN") {
			t.Fatalf("Std NaN: %v", err)
		}
		// A table replaced has no map: other options, and no ids.
		if err := Create(ctx, o, "admit", int64(mo.Rows)+1, dim, tensor.Float32, table.WithReplace()); err != nil {
			t.Fatal(err)
		}
		if _, m := openMap(t, o, "admit", mo, init); mapStats(t, m) != (driver.IDMapStats{}) {
			t.Fatalf("the replaced table's map: %+v", mapStats(t, m))
		}
	})
}

// Two workers that map the same new ids at once give each one row; a
// Map sent again under its update's name (its answer lost, as a retry
// after a failover sends it) answers the same rows and counts nothing
// again.
func TestRedisIDMapOnce(t *testing.T) {
	cl := localredis.Start(t, 3, 0)
	o := Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 5 * time.Second}
	mo := driver.IDMapOptions{Rows: 8 * redisGroups, AdmitAfter: 2}
	s1, m1 := mapTable(t, o, "once", 2, mo, driver.RowInit{Seed: 1, Std: 1})
	_, m2 := openMap(t, o, "once", mo, driver.RowInit{Seed: 1, Std: 1})
	ids := make([]int64, 500)
	for k := range ids {
		ids[k] = int64(k)*0x5e3779b97f4a7c15 - 7
	}
	batch := append(slices.Clone(ids), ids...) // each seen twice: admitted
	var wg sync.WaitGroup
	rows := [2][]int64{make([]int64, len(batch)), make([]int64, len(batch))}
	errs := make([]error, 2)
	for w, m := range []*IDMap{m1, m2} {
		wg.Go(func() { _, errs[w] = m.Map(context.Background(), batch, rows[w], 0, nil) })
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if !slices.Equal(rows[0], rows[1]) {
		t.Fatal("two workers got different rows for the same ids")
	}
	seen := map[int64]bool{}
	for _, r := range rows[0][:len(ids)] {
		if seen[r] || r >= int64(mo.Rows) {
			t.Fatalf("row %d given twice, or the default row", r)
		}
		seen[r] = true
	}
	st := mapStats(t, m1)
	if st.Admitted != uint64(len(ids)) || st.Used != len(ids) {
		t.Fatalf("two workers admitting %d ids at once: %+v", len(ids), st)
	}

	// The same update sent again: the same rows, nothing counted.
	fresh := []int64{-3, -3 << 50, 12345}
	r1, _ := mapOK(t, m1, fresh, 1) // seen once: the default row
	before := mapStats(t, m1)
	s1.updates--
	r2, _ := mapOK(t, m1, fresh, 1)
	if !slices.Equal(r1, r2) || mapStats(t, m1) != before {
		t.Fatalf("a Map sent twice: rows %v then %v, stats %+v then %+v", r1, r2, before, mapStats(t, m1))
	}
	if r3, _ := mapOK(t, m1, fresh, 2); slices.Contains(r3, int64(mo.Rows)) {
		t.Fatalf("the second sighting did not admit: rows %v", r3)
	}
	if st := mapStats(t, m1); st.Pending != before.Pending || st.Admitted != before.Admitted+3 {
		t.Fatalf("after the second sighting: %+v (before %+v)", st, before)
	}

	// A snapshot holds every id at its row, with the counts; its state
	// loads into an IDMap of its options.
	snapshot, err := m1.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	snap, err := table.HeldIDMap(*snapshot)
	if err != nil {
		t.Fatal(err)
	}
	r3, _ := mapOK(t, m1, fresh, 3)
	for k, id := range append(slices.Clone(ids), fresh...) {
		want := append(rows[0][:len(ids)], r3...)[k]
		if row, ok := snap.Row(id); !ok || row != want {
			t.Fatalf("the snapshot gives id %d row %d (%v), the map %d", id, row, ok, want)
		}
	}
	if st, want := mapStats(t, snap), mapStats(t, m1); st != want {
		t.Fatalf("the snapshot's stats %+v, the map's %+v", st, want)
	}
	state, err := snap.State()
	if err != nil {
		t.Fatal(err)
	}
	so := m1.o
	so.SketchWidth = m1.width * redisGroups
	back, err := table.NewIDMap("once", so)
	if err != nil {
		t.Fatal(err)
	}
	dense := map[string]*tensor.Dense{}
	for k, v := range state {
		dense[k] = v.(*tensor.Dense)
	}
	if err := back.SetState(dense); err != nil {
		t.Fatalf("the snapshot's state: %v", err)
	}
}

// Across the failover of a master, two workers map and step a stream in
// which 300 ids are seen 3 times (admitted at the third sighting, each
// by one call) and 600 ids twice (never admitted): every admission,
// sighting and step happens exactly once. The counts are exact (each id
// sighted once a call, the sketch wide enough that no two ids share all
// their counters) and each admitted id's row took exactly one step.
func TestRedisIDMapFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a failover")
	}
	cl := localredis.Start(t, 3, 1)
	if err := cl.Settled(time.Minute); err != nil {
		t.Fatal(err)
	}
	o := Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 2 * time.Second, Retry: time.Minute, Replicas: 1}
	const thrice, twice, batch, dim = 300, 600, 30, 2
	init := driver.RowInit{Seed: 9, Std: 1}
	mo := driver.IDMapOptions{Rows: 8 * redisGroups, AdmitAfter: 3, SketchWidth: 1 << 20}
	mapTable(t, o, "failover", dim, mo, init)
	ids := make([]int64, thrice+twice)
	for k := range ids {
		ids[k] = int64(k+1) * -0x2545f4914f6cdd1d
	}
	// Three rounds, each a whole number of batches: the thrice ids in
	// each, the twice ids in the first two; an id once a batch at most.
	r := rand.New(rand.NewPCG(5, 5))
	var stream [][]int64
	for round := range 3 {
		n := len(ids)
		if round == 2 {
			n = thrice
		}
		ord := slices.Clone(ids[:n])
		r.Shuffle(len(ord), func(i, j int) { ord[i], ord[j] = ord[j], ord[i] })
		for b := 0; b < n; b += batch {
			stream = append(stream, ord[b:b+batch])
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	progress := make(chan int, len(stream))
	var stores []*Store
	for w := range 2 {
		s, m := openMap(t, o, "failover", mo, init)
		stores = append(stores, s)
		wg.Go(func() {
			for b := w; b < len(stream); b += 2 {
				rows := make([]int64, batch)
				if _, err := m.Map(context.Background(), stream[b], rows, int64(b), nil); err != nil {
					errs[w] = fmt.Errorf("batch %d: %w", b, err)
					return
				}
				var held []int64
				for _, row := range rows {
					if row != int64(mo.Rows) {
						held = append(held, row)
					}
				}
				if len(held) > 0 {
					if err := sgdStep(s, held, 1); err != nil {
						errs[w] = fmt.Errorf("batch %d: %w", b, err)
						return
					}
				}
				progress <- b
			}
		})
	}
	for range len(stream) / 3 {
		<-progress
	}
	master := masterOf(t, cl)
	if err := cl.Kill(master); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("across the failover of %s: %v", master, err)
		}
	}
	s, m := openMap(t, o, "failover", mo, init)
	st := mapStats(t, m)
	want := driver.IDMapStats{Used: thrice, Admitted: thrice, Pending: 2 * (thrice + twice)}
	if st != want {
		t.Fatalf("after the failover of %s: stats %+v, want %+v", master, st, want)
	}
	rows, _ := mapOK(t, m, ids[:thrice], int64(len(stream)))
	got := make([]byte, thrice*s.RowBytes())
	if err := s.ReadRows(context.Background(), rows, got); err != nil {
		t.Fatal(err)
	}
	v := fileio.Float32s(got)
	for k, id := range ids[:thrice] {
		want := make([]float32, dim)
		tablerows.FillRow(init.Seed, init.Std, want, id)
		for j := range want {
			if want[j] -= 1; v[k*dim+j] != want[j] {
				t.Fatalf("id %d's row after one step: %v, want %v", id, v[k*dim:(k+1)*dim], want)
			}
		}
	}
	retries := stores[0].Stats().Retries + stores[1].Stats().Retries
	if retries == 0 {
		t.Fatal("no call met the failover")
	}
	t.Logf("master %s killed after %d of %d batches; %d calls retried", master, len(stream)/3, len(stream), retries)
}

// masterOf returns a master of the cluster that has a live replica.
func masterOf(t *testing.T, cl *localredis.Cluster) string {
	t.Helper()
	nodes, err := cl.Nodes(cl.Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Role == "slave" && !n.Failing && cl.Running(n.Master) {
			return n.Master
		}
	}
	t.Fatalf("no master with a live replica: %+v", nodes)
	return ""
}

// tagModel is a plain Go model of the map of one hash tag, as the map's
// Function documents it: rows tag, tag+1024, ... below total; TTL rows
// freed first come first given; counts exact (width 0: a sketch wide
// enough that no two ids share all their counters) or in the tag's
// count-min sketch of width counters a row, an id's sightings in a batch
// added at once (conservative update).
type tagModel struct {
	o          driver.IDMapOptions
	tag, total int64
	ids        map[int64]int64 // id -> row
	owner      map[int64]int64 // row -> id
	last, uses map[int64]int64 // by row
	count      map[int64]int64 // sightings by id (width 0)
	width      int
	cms        map[int]int64 // the sketch's counters by index (width > 0)
	free       []int64
	next       int64
	st         driver.IDMapStats
}

func newTagModel(o driver.IDMapOptions, tag int64) *tagModel {
	return &tagModel{o: o, tag: tag, total: int64(o.Rows), ids: map[int64]int64{}, owner: map[int64]int64{},
		last: map[int64]int64{}, uses: map[int64]int64{}, count: map[int64]int64{}, cms: map[int]int64{}}
}

// sight adds n sightings of id and returns its count.
func (m *tagModel) sight(id int64, n int) int64 {
	if m.width == 0 {
		m.count[id] += int64(n)
		return m.count[id]
	}
	var at [4]int
	c := int64(math.MaxInt64)
	for d := range at {
		at[d] = d*m.width + int(tablerows.Mix(uint64(id), uint64(d))%uint64(m.width))
		c = min(c, m.cms[at[d]])
	}
	c += int64(n)
	for _, i := range at {
		m.cms[i] = max(m.cms[i], c)
	}
	return c
}

// byScore returns the held rows ordered as a sorted set orders them by
// score: score, then the row's decimal string.
func (m *tagModel) byScore(score map[int64]int64) []int64 {
	rows := slices.Collect(func(yield func(int64) bool) {
		for r := range m.owner {
			if !yield(r) {
				return
			}
		}
	})
	slices.SortFunc(rows, func(a, b int64) int {
		if score[a] != score[b] {
			return cmp.Compare(score[a], score[b])
		}
		return strings.Compare(strconv.FormatInt(a, 10), strconv.FormatInt(b, 10))
	})
	return rows
}

func (m *tagModel) release(r int64) {
	delete(m.ids, m.owner[r])
	delete(m.owner, r)
	delete(m.last, r)
	delete(m.uses, r)
	m.st.Used--
}

// mapIDs maps the distinct ids of the tag, each seen count times, at step.
func (m *tagModel) mapIDs(ids []int64, counts []int, step int64) []int64 {
	if m.o.TTL > 0 {
		for _, r := range m.byScore(m.last) {
			if m.last[r] < step-m.o.TTL {
				m.release(r)
				m.free = append(m.free, r)
				m.st.Expired++
			}
		}
	}
	out := make([]int64, len(ids))
	for i, id := range ids {
		if r, ok := m.ids[id]; ok {
			if m.last[r] < step {
				m.last[r] = step
				m.uses[r]++
			}
			out[i] = r
			continue
		}
		out[i] = -1
		if m.o.AdmitAfter > 1 {
			if m.sight(id, counts[i]) < int64(m.o.AdmitAfter) {
				m.st.Pending += uint64(counts[i])
				continue
			}
		}
		r := int64(-1)
		switch {
		case len(m.free) > 0:
			r, m.free = m.free[0], m.free[1:]
		case m.tag+m.next*redisGroups < m.total:
			r = m.tag + m.next*redisGroups
			m.next++
		case m.o.Evict != driver.Refuse:
			if m.o.Evict == driver.EvictLFU {
				for _, c := range m.byScore(m.uses)[:min(16, len(m.owner))] {
					if m.last[c] < step {
						r = c
						break
					}
				}
			}
			if r < 0 {
				for _, c := range m.byScore(m.last) {
					if m.last[c] < step {
						r = c
					}
					break
				}
			}
			if r >= 0 {
				m.release(r)
				m.st.Evicted++
			}
		}
		if r < 0 {
			m.st.Rejected++
			continue
		}
		m.ids[id], m.owner[r], m.last[r], m.uses[r] = r, id, step, 1
		m.st.Admitted++
		m.st.Used++
		out[i] = r
	}
	return out
}

// The map's Function against a plain Go model of it, over random
// batches of up to 12 ids (repeated ones among them) most of which share
// one tag of 3 rows (admission, eviction, TTL and refusal all at work),
// for LRU, LFU and Refuse, with a wide sketch and the narrowest (64
// counters a row: the tag's ids share counters): the same rows for every
// id of every batch, and the same counts. Whatever the model, no two ids
// of a batch share a row and a Refuse map evicts nothing.
func TestRedisIDMapModel(t *testing.T) {
	cl := localredis.Start(t, 3, 0)
	o := Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 5 * time.Second}
	hot := sameTag(40)
	tag := idTag(hot[0])
	others := []int64{1, 2, 3, -4, 5 << 40}
	for _, width := range []int{1 << 20, 1} {
		for _, evict := range []driver.Eviction{driver.EvictLRU, driver.EvictLFU, driver.Refuse} {
			t.Run(fmt.Sprint(evict, "/width", width), func(t *testing.T) {
				mo := driver.IDMapOptions{Rows: 3 * redisGroups, AdmitAfter: 3, TTL: 4, Evict: evict, SketchWidth: width}
				_, m := mapTable(t, o, fmt.Sprint("model", evict, "w", width), 2, mo, driver.RowInit{})
				models := map[int64]*tagModel{}
				r := rand.New(rand.NewPCG(uint64(evict), uint64(width)))
				step := int64(0)
				for call := range 300 {
					step += int64(r.IntN(2)) // some calls share a step
					batch := make([]int64, 1+r.IntN(12))
					for k := range batch {
						if r.IntN(4) == 0 {
							batch[k] = others[r.IntN(len(others))]
						} else {
							batch[k] = hot[r.IntN(len(hot))>>(k%2*2)] // the first ten more often
						}
					}
					rows, _ := mapOK(t, m, batch, step)
					// The model, tag by tag, ids in order of first sight.
					want := map[int64]int64{}
					byTag := map[int64][]int64{}
					counts := map[int64]int{}
					for _, id := range batch {
						if counts[id] == 0 {
							byTag[idTag(id)] = append(byTag[idTag(id)], id)
						}
						counts[id]++
					}
					for tg, ids := range byTag {
						if models[tg] == nil {
							models[tg] = newTagModel(mo, tg)
							if width < redisGroups {
								models[tg].width = 64
							}
						}
						n := make([]int, len(ids))
						for i, id := range ids {
							n[i] = counts[id]
						}
						for i, row := range models[tg].mapIDs(ids, n, step) {
							want[ids[i]] = row
						}
					}
					owner := map[int64]int64{}
					for k, id := range batch {
						w := want[id]
						if w < 0 {
							w = int64(mo.Rows)
						}
						if rows[k] != w {
							t.Fatalf("call %d (step %d), batch %v: id %d got row %d, the model %d (tag %d)", call, step, batch, id, rows[k], w, tag)
						}
						if o, ok := owner[rows[k]]; ok && o != id && rows[k] != int64(mo.Rows) {
							t.Fatalf("call %d (step %d), batch %v: ids %d and %d share row %d", call, step, batch, o, id, rows[k])
						}
						owner[rows[k]] = id
					}
				}
				var want driver.IDMapStats
				for _, md := range models {
					want.Used += md.st.Used
					want.Admitted += md.st.Admitted
					want.Evicted += md.st.Evicted
					want.Expired += md.st.Expired
					want.Rejected += md.st.Rejected
					want.Pending += md.st.Pending
				}
				if got := mapStats(t, m); got != want {
					t.Fatalf("stats %+v, the model's %+v", got, want)
				}
				if evict == driver.Refuse && want.Evicted != 0 {
					t.Fatalf("a Refuse map evicted %d ids", want.Evicted)
				}
				t.Logf("%+v", want)
			})
		}
	}
}
