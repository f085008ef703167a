package table

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// refMap is an IDMap's LRU policy with AdmitAfter 1 written plainly: the
// ids in a slice, the most recently used last.
type refMap struct {
	rows   int
	ttl    int64
	refuse bool
	order  []int64         // ids, least recently used first
	row    map[int64]int64 // id -> row
	last   map[int64]int64 // id -> step of its last use
	free   []int64         // free rows, the next to give last
}

func newRef(rows int, ttl int64, refuse bool) *refMap {
	r := &refMap{rows: rows, ttl: ttl, refuse: refuse, row: map[int64]int64{}, last: map[int64]int64{}}
	for k := rows - 1; k >= 0; k-- {
		r.free = append(r.free, int64(k))
	}
	return r
}

func (r *refMap) drop(id int64) {
	r.free = append(r.free, r.row[id])
	delete(r.row, id)
	delete(r.last, id)
	r.order = slices.DeleteFunc(r.order, func(x int64) bool { return x == id })
}

func (r *refMap) touch(id, step int64) {
	r.order = slices.DeleteFunc(r.order, func(x int64) bool { return x == id })
	r.order = append(r.order, id)
	r.last[id] = step
}

// mapIDs is Map: the rows, the assignments, or false for ErrCapacity.
func (r *refMap) mapIDs(ids []int64, step int64) ([]int64, []Assignment, bool) {
	distinct := map[int64]bool{}
	held, fresh := 0, 0
	for _, id := range ids {
		if distinct[id] {
			continue
		}
		distinct[id] = true
		if _, ok := r.row[id]; ok && (r.ttl == 0 || r.last[id] >= step-r.ttl) {
			held++
		} else {
			fresh++
		}
	}
	expired := 0
	if r.ttl > 0 {
		for _, id := range r.order {
			if r.last[id] < step-r.ttl {
				expired++
			}
		}
	}
	avail := len(r.free) + expired
	if !r.refuse {
		avail = r.rows - held
	}
	if fresh > avail {
		return nil, nil, false
	}
	if r.ttl > 0 {
		for _, id := range slices.Clone(r.order) {
			if r.last[id] < step-r.ttl {
				r.drop(id)
			}
		}
	}
	rows := make([]int64, len(ids))
	for _, id := range ids {
		if _, ok := r.row[id]; ok {
			r.touch(id, step)
		}
	}
	var got []Assignment
	for k, id := range ids {
		if row, ok := r.row[id]; ok { // touched above, or given a row earlier in the batch
			rows[k] = row
			continue
		}
		if len(r.free) == 0 {
			r.drop(r.order[0])
		}
		row := r.free[len(r.free)-1]
		r.free = r.free[:len(r.free)-1]
		r.row[id] = row
		r.touch(id, step)
		rows[k] = row
		got = append(got, Assignment{Row: row, ID: id})
	}
	return rows, got, true
}

// FuzzIDMap holds an IDMap (LRU, every id admitted at once) against the
// plain model above: the same rows, the same rows given afresh, the same
// batches refused, with or without TTL, evicting or refusing.
func FuzzIDMap(f *testing.F) {
	f.Add([]byte{3, 0, 1, 2, 3, 4, 5, 1, 1, 9, 200, 7, 3})
	f.Add([]byte{2, 1, 250, 251, 252, 1, 2, 3, 1, 250, 4, 4})
	f.Add([]byte{5, 2, 0, 0, 0, 9, 8, 7, 6, 5, 4, 3, 2, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 2 {
			return
		}
		rows := 1 + int(b[0]%6)
		ttl, refuse := int64(b[1]%4), b[1]&4 != 0
		o := IDMapOptions{Rows: rows, TTL: ttl}
		if refuse {
			o.Evict = Refuse
		}
		m, err := NewIDMap("f", o)
		if err != nil {
			t.Fatal(err)
		}
		ref := newRef(rows, ttl, refuse)
		step := int64(0)
		for b = b[2:]; len(b) > 0; step++ {
			n := 1 + int(b[0]%8)
			b = b[1:]
			ids := make([]int64, 0, n)
			for ; len(ids) < n && len(b) > 0; b = b[1:] {
				ids = append(ids, int64(int8(b[0]))*1_000_003) // negative ids too
			}
			got := make([]int64, len(ids))
			assigned, err := m.Map(ids, got, step, nil)
			want, wantAssigned, ok := ref.mapIDs(ids, step)
			if !ok {
				if !errors.Is(err, ErrCapacity) {
					t.Fatalf("step %d %v: %v, want ErrCapacity", step, ids, err)
				}
				continue
			}
			if err != nil || !slices.Equal(got, want) || !slices.Equal(assigned, wantAssigned) {
				t.Fatalf("step %d %v: rows %v %v (%v), want %v %v", step, ids, got, assigned, err, want, wantAssigned)
			}
			if m.Stats().Used != len(ref.row) {
				t.Fatalf("step %d: %d rows used, want %d", step, m.Stats().Used, len(ref.row))
			}
		}
	})
}

// An id gets a row at its AdmitAfter-th sighting, in any batch; before
// that it reads the default row and counts as pending.
func TestIDMapAdmission(t *testing.T) {
	m, err := NewIDMap("a", IDMapOptions{Rows: 4, AdmitAfter: 3})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]int64, 3)
	steps := [][]int64{{7, 8, 7}, {7, 9, 8}, {8, 9, 9}}
	want := [][]int64{{4, 4, 4}, {0, 4, 4}, {1, 4, 2}} // 9 is admitted at its third sighting
	for s, ids := range steps {
		if _, err := m.Map(ids, rows, int64(s), nil); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rows, want[s]) {
			t.Fatalf("step %d: %v, want %v", s, rows, want[s])
		}
	}
	if st := m.Stats(); st.Admitted != 3 || st.Pending != 6 || st.Used != 3 {
		t.Fatalf("%+v", st)
	}
}

// A full LFU map evicts a row of an id used less often than the others,
// never one of the batch's; a Refuse map names the id it has no row for
// and changes nothing.
func TestIDMapPolicies(t *testing.T) {
	m, _ := NewIDMap("lfu", IDMapOptions{Rows: 2, Evict: EvictLFU})
	rows := make([]int64, 1)
	for s, id := range []int64{1, 1, 1, 2, 3} {
		if _, err := m.Map([]int64{id}, rows, int64(s), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := m.Row(1); !ok {
		t.Fatal("LFU evicted the id used three times")
	}
	if _, ok := m.Row(2); ok {
		t.Fatal("LFU kept the id used once over the new one")
	}
	r, _ := NewIDMap("full", IDMapOptions{Rows: 1, Evict: Refuse})
	if _, err := r.Map([]int64{5}, rows, 0, nil); err != nil {
		t.Fatal(err)
	}
	_, err := r.Map([]int64{6}, rows, 1, nil)
	if !errors.Is(err, ErrCapacity) || !contains(err.Error(), `"full"`, "id 6") {
		t.Fatalf("a full map: %v", err)
	}
	if row, ok := r.Row(5); !ok || row != 0 || r.Stats().Rejected != 1 {
		t.Fatalf("the refused batch changed the map: %v %v %+v", row, ok, r.Stats())
	}
	two := make([]int64, 2)
	l, _ := NewIDMap("lru", IDMapOptions{Rows: 2})
	if _, err := l.Map([]int64{1, 2}, two, 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Map([]int64{3}, rows, 0, nil); !errors.Is(err, ErrCapacity) {
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
	m, _ := NewIDMap("b", IDMapOptions{Rows: 1 << 20})
	ids := make([]int64, 4096)
	for k := range ids {
		ids[k] = int64(mix(uint64(k), 9))
	}
	rows := make([]int64, len(ids))
	if _, err := m.Map(ids, rows, 0, nil); err != nil {
		b.Fatal(err)
	}
	step := int64(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Map(ids, rows, step, nil); err != nil {
			b.Fatal(err)
		}
		step++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ids)), "ns/id")
}
