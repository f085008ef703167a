package table

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/tablerows"
)

// An IDMap maps raw 64-bit ids (any value) to the rows of a table of a
// fixed size: TorchRec's managed collision tables, TFRA's dynamic
// embeddings. An id gets a row once seen AdmitAfter times, keeps it
// while it is used, and loses it to a new id when the map is full
// (Evict) or after TTL unused steps. It is not safe for concurrent use.
type IDMap struct {
	name  string
	o     driver.IDMapOptions
	ids   map[int64]int32 // raw id -> row
	row   []rowEntry      // by row
	free  []int32         // rows held by no id
	head  int32           // the most recently used row, -1 for none
	tail  int32           // the least recently used
	stats driver.IDMapStats
	cms   []uint32 // the sketch: 4 rows of width counters
	mask  uint64
	pcg   *rand.PCG // rng's source, saved by State
	rng   *rand.Rand
	step  int64 // the last Map's step

	// check's scratch, kept from batch to batch: a map made afresh for
	// each batch is fresh memory, whose first writes fault.
	scratch struct {
		held    map[int64]bool
		heldFor int // the batch size held was made for
		fresh   []int64
		cells   map[int]uint32
	}
}

type rowEntry struct {
	id         int64
	last       int64  // the step of its last use
	uses       uint32 // its uses since admitted (EvictLFU)
	prev, next int32  // the recency list, -1 at its ends
	held       bool
}

// NewIDMap returns an empty map named name (its errors name it) of o.
func NewIDMap(name string, o driver.IDMapOptions) (*IDMap, error) {
	if err := o.Check(name); err != nil {
		return nil, err
	}
	if err := checkBytes(o, name); err != nil {
		return nil, err
	}
	o = o.Defaults()
	width := 1 << bits.Len(uint(o.SketchWidth-1))
	m := &IDMap{name: name, o: o, ids: make(map[int64]int32), row: make([]rowEntry, o.Rows), free: make([]int32, o.Rows),
		head: -1, tail: -1, pcg: rand.NewPCG(1, 2), step: -1 << 63}
	m.rng = rand.New(m.pcg)
	for r := range m.free {
		m.free[r] = int32(o.Rows - 1 - r) // row 0 first
		m.row[r].prev, m.row[r].next = -1, -1
	}
	if o.AdmitAfter > 1 {
		m.cms, m.mask = make([]uint32, 4*width), uint64(width-1)
	}
	return m, nil
}

// MaxIDMapBytes bounds the memory an IDMap takes when it is made: 36
// bytes a row (IDMapOptions.Rows) and, with admission, 16 bytes a sketch
// column (SketchWidth, rounded up to a power of two). Options past it
// are an error naming the bytes; the ids' index grows with the ids held,
// about 40 bytes each, and is not counted in it. It is 8 GiB, or 1 GiB
// where an int is 32 bits.
const MaxIDMapBytes int64 = 1 << (30 + 3*(strconv.IntSize/64))

// idMapBytes returns the bytes an IDMap of o takes when made (o's
// defaults applied), as a float64 so that no size overflows.
func idMapBytes(o driver.IDMapOptions) float64 {
	b := 36 * float64(o.Rows)
	if o.AdmitAfter > 1 {
		b += 16 * math.Exp2(float64(bits.Len(uint(o.SketchWidth-1))))
	}
	return b
}

// checkBytes returns an error naming the map name and the bytes if an
// IDMap of o would take more than MaxIDMapBytes.
func checkBytes(o driver.IDMapOptions, name string) error {
	if b := idMapBytes(o.Defaults()); b > float64(MaxIDMapBytes) {
		return fmt.Errorf("id map %q: Rows %d and SketchWidth %d take %.0f bytes, more than MaxIDMapBytes (%d): %w",
			name, o.Rows, o.SketchWidth, b, MaxIDMapBytes, errs.ErrOption)
	}
	return nil
}

// Map sets rows[k] to the row of ids[k] for step step (steps must not
// decrease), admitting new ids and evicting as the options say, and
// appends to assigned the rows it gave to ids they were not holding, in
// the order given: each must be started afresh. An id not admitted reads
// the default row, Rows. A row used at this step, by this batch or an
// earlier Map of the same step, is never taken: a batch with more new
// admitted ids than rows it may take is an error wrapping ErrCapacity
// naming the map (a Refuse map counts them in Stats.Rejected), and
// nothing else changed. A done ctx is an error wrapping ctx.Err(), and
// nothing changed.
func (m *IDMap) Map(ctx context.Context, ids, rows []int64, step int64, assigned []driver.Assignment) ([]driver.Assignment, error) {
	if err := ctx.Err(); err != nil {
		return assigned, fmt.Errorf("id map %q: %w", m.name, err)
	}
	if len(rows) != len(ids) {
		return assigned, fmt.Errorf("id map %q: %d rows for %d ids: %w", m.name, len(rows), len(ids), errs.ErrShape)
	}
	if step < m.step {
		return assigned, fmt.Errorf("id map %q: step %d after step %d: %w", m.name, step, m.step, errs.ErrOption)
	}
	if err := m.check(ids, step); err != nil {
		return assigned, err
	}
	m.step = step
	m.expire(step)
	// The ids that hold rows first, so that no new id takes their rows.
	pad := int64(m.o.Rows)
	for k, id := range ids {
		rows[k] = -1
		if m.o.Pad && id == m.o.PadID {
			rows[k] = pad
		} else if r, ok := m.ids[id]; ok {
			if m.row[r].last != step {
				m.use(r, step)
			}
			rows[k] = int64(r)
		}
	}
	for k, id := range ids {
		if rows[k] >= 0 {
			continue
		}
		if r, ok := m.ids[id]; ok { // named earlier in the batch
			rows[k] = int64(r)
			continue
		}
		if m.cms != nil && m.count(id, nil) < uint32(m.o.AdmitAfter) {
			m.stats.Pending++
			rows[k] = int64(m.o.Rows)
			continue
		}
		r := m.take(step)
		e := &m.row[r]
		e.id, e.held, e.uses = id, true, 0
		m.ids[id] = r
		m.use(r, step)
		m.stats.Admitted++
		rows[k] = int64(r)
		assigned = append(assigned, driver.Assignment{Row: int64(r), ID: id})
	}
	return assigned, nil
}

// check reports the error Map would meet part way through ids, before
// Map changes anything: more new ids than rows it may take. It runs
// Map's admission over the batch on a copy of the sketch cells the batch
// touches, so that the ids it counts are exactly those Map would admit,
// however many counters the batch's ids share.
func (m *IDMap) check(ids []int64, step int64) error {
	if m.o.Evict != driver.Refuse && m.o.Rows >= len(ids) && step != m.step {
		return nil // a batch cannot fill the map with its own rows
	}
	expired := func(r int32) bool { return m.o.TTL > 0 && m.row[r].last < step-m.o.TTL }
	// The rows this step uses: those an earlier Map of the step used, and
	// those the batch's holders use.
	busy := 0
	if step == m.step {
		for r := m.head; r >= 0 && m.row[r].last == step; r = m.row[r].next {
			busy++
		}
	}
	// held: ids holding a row that does not expire now. Scratch made
	// for a much larger batch is made again, as clearing a map takes
	// time in its size.
	sc := &m.scratch
	if sc.held == nil || sc.heldFor > 4*len(ids)+1024 {
		sc.held, sc.heldFor, sc.cells, sc.fresh = make(map[int64]bool, len(ids)), len(ids), nil, nil
	}
	held := sc.held
	clear(held)
	sc.heldFor = max(sc.heldFor, len(ids))
	for _, id := range ids {
		if r, ok := m.ids[id]; ok && !expired(r) && !held[id] {
			held[id] = true
			if m.row[r].last != step {
				busy++
			}
		}
	}
	// The batch's sightings of the others, in order, as Map counts them.
	fresh := sc.fresh[:0] // the ids Map would admit, in order
	var cells map[int]uint32
	if m.cms != nil {
		if sc.cells == nil {
			sc.cells = make(map[int]uint32)
		}
		cells = sc.cells
		clear(cells)
	}
	for _, id := range ids {
		if m.o.Pad && id == m.o.PadID || held[id] {
			continue
		}
		if m.cms != nil && m.count(id, cells) < uint32(m.o.AdmitAfter) {
			continue
		}
		held[id] = true // later sightings find its row
		fresh = append(fresh, id)
	}
	sc.fresh = fresh
	need := len(fresh)
	avail := len(m.free)
	if m.o.Evict != driver.Refuse {
		avail = m.o.Rows - busy
	} else if m.o.TTL > 0 {
		for r := m.tail; r >= 0 && expired(r); r = m.row[r].prev {
			avail++
		}
	}
	if need > avail {
		if m.o.Evict == driver.Refuse {
			m.stats.Rejected += uint64(need - avail)
		}
		return fmt.Errorf("id map %q: no row for id %d: the batch of step %d needs %d new rows and the map may give %d of its %d: %w",
			m.name, fresh[avail], step, need, avail, m.o.Rows, ErrCapacity)
	}
	return nil
}

// take returns a row for a new id at step: a free row, else one the
// policy evicts.
func (m *IDMap) take(step int64) int32 {
	if n := len(m.free); n > 0 {
		r := m.free[n-1]
		m.free = m.free[:n-1]
		return r
	}
	victim := m.tail // EvictLRU; Refuse never gets here (check)
	if m.o.Evict == driver.EvictLFU {
		victim = -1
		for range 16 {
			r := int32(m.rng.IntN(m.o.Rows))
			if e := m.row[r]; e.last != step && (victim < 0 || e.uses < m.row[victim].uses) {
				victim = r
			}
		}
		if victim < 0 {
			victim = m.tail
		}
	}
	m.release(victim)
	m.stats.Evicted++
	m.free = m.free[:len(m.free)-1]
	return victim
}

// hold gives row r to id, last used at step last (the most recent so
// far) in uses steps: for a map built from another's rows, oldest
// first, and then freed.
func (m *IDMap) hold(r int32, id int64, last int64, uses uint32) {
	m.ids[id] = r
	e := &m.row[r]
	e.id, e.held = id, true
	m.use(r, last)
	e.uses = uses
	m.step = max(m.step, last)
}

// freed makes the free list the rows no id holds, row 0 first.
func (m *IDMap) freed() {
	m.free = m.free[:0]
	for r := int32(m.o.Rows) - 1; r >= 0; r-- {
		if !m.row[r].held {
			m.free = append(m.free, r)
		}
	}
}

// expire frees the rows of ids unused for TTL steps.
func (m *IDMap) expire(step int64) {
	if m.o.TTL <= 0 {
		return
	}
	for m.tail >= 0 && m.row[m.tail].last < step-m.o.TTL {
		m.release(m.tail)
		m.stats.Expired++
	}
}

// release frees row r: its id loses it.
func (m *IDMap) release(r int32) {
	e := &m.row[r]
	delete(m.ids, e.id)
	m.unlink(r)
	e.held = false
	m.free = append(m.free, r)
}

// use records a use of row r at step, the first of the step: the front
// of the recency list. Later uses in the same step change nothing, so
// that the list orders rows by their last step, and rows of one step by
// their first use in it.
func (m *IDMap) use(r int32, step int64) {
	e := &m.row[r]
	e.last = step
	e.uses++
	if m.head == r {
		return
	}
	if e.prev >= 0 || e.next >= 0 || m.tail == r {
		m.unlink(r)
	}
	e.prev, e.next = -1, m.head
	if m.head >= 0 {
		m.row[m.head].prev = r
	}
	m.head = r
	if m.tail < 0 {
		m.tail = r
	}
}

func (m *IDMap) unlink(r int32) {
	e := &m.row[r]
	if e.prev >= 0 {
		m.row[e.prev].next = e.next
	} else if m.head == r {
		m.head = e.next
	}
	if e.next >= 0 {
		m.row[e.next].prev = e.prev
	} else if m.tail == r {
		m.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

// cells returns the indices in m.cms of id's 4 counters.
func (m *IDMap) cells(id int64) (at [4]int) {
	for d := range at {
		at[d] = d*int(m.mask+1) + int(tablerows.Mix(uint64(id), uint64(d))&m.mask)
	}
	return at
}

// count adds a sighting of id to the sketch (conservative update: only
// the smallest counters grow, and none past the largest uint32) and
// returns its estimated count. With cells, it counts on a copy: cells
// holds the counters changed so far by their index, and m.cms is left
// as it is.
func (m *IDMap) count(id int64, cells map[int]uint32) uint32 {
	at := m.cells(id)
	c := ^uint32(0)
	for _, i := range at {
		v, ok := cells[i]
		if !ok {
			v = m.cms[i]
		}
		c = min(c, v)
	}
	if c < ^uint32(0) {
		c++
	}
	for _, i := range at {
		if cells == nil {
			m.cms[i] = max(m.cms[i], c)
		} else if v, ok := cells[i]; ok && v < c || !ok && m.cms[i] < c {
			cells[i] = c
		}
	}
	return c
}

// Row returns the row of id, if it holds one.
func (m *IDMap) Row(id int64) (int64, bool) {
	r, ok := m.ids[id]
	return int64(r), ok
}

// Forget frees the rows of a, assignments the last Map made, whose rows
// could not be started afresh (a store's error): their ids hold no row
// again, and a later Map gives them rows anew. An assignment whose id no
// longer holds that row is skipped.
func (m *IDMap) Forget(_ context.Context, a []driver.Assignment) error {
	for _, x := range a {
		if r, ok := m.ids[x.ID]; ok && int64(r) == x.Row {
			m.release(r)
			m.stats.Admitted--
		}
	}
	return nil
}

// Rows returns the rows the map hands out (IDMapOptions.Rows), which is
// also the default row.
func (m *IDMap) Rows() int { return m.o.Rows }

// Name returns the map's name.
func (m *IDMap) Name() string { return m.name }

// Stats returns what the map did so far; the error is always nil.
func (m *IDMap) Stats(context.Context) (driver.IDMapStats, error) {
	s := m.stats
	s.Used = len(m.ids)
	return s, nil
}

var _ driver.Mapper = (*IDMap)(nil)

// InitialRow fills dst with the initial values of the row of raw id id:
// N(0, 1) draws from a generator seeded by (seed, id), so that an id
// starts with the same values on every worker and after a restart,
// whichever row it gets. It is RowInit{Seed: seed, Std: 1}'s row.
func InitialRow[T float32 | float64](dst []T, seed uint64, id int64) {
	fillRow(driver.RowInit{Seed: seed, Std: 1}, dst, id)
}

// initialRows starts the rows at slots of w (a [n, dim] float32 or
// float64 matrix) and of its state columns afresh for the ids of fresh:
// init's values, and each column's Init.
func initialRows(w *tensor.Dense, state []*tensor.Dense, cols []driver.Column, fresh []driver.Assignment, slots []int64, init driver.RowInit) {
	dim := w.Shape()[1]
	if w.Dtype() == tensor.Float32 {
		startRows(w.Float32s(), dim, state, cols, fresh, slots, init, (*tensor.Dense).Float32s)
	} else {
		startRows(w.Float64s(), dim, state, cols, fresh, slots, init, (*tensor.Dense).Float64s)
	}
}

func startRows[T float32 | float64](w []T, dim int, state []*tensor.Dense, cols []driver.Column, fresh []driver.Assignment, slots []int64, init driver.RowInit, data func(*tensor.Dense) []T) {
	for k, a := range fresh {
		s := int(slots[k])
		fillRow(init, w[s*dim:(s+1)*dim], a.ID)
	}
	for c, st := range state {
		v, width, init := data(st), cols[c].Width, T(cols[c].Init)
		for _, s := range slots[:len(fresh)] {
			row := v[int(s)*width : int(s+1)*width]
			for i := range row {
				row[i] = init
			}
		}
	}
}

// InitialRows starts the rows of fresh (IDMap.Map's assignments) of the
// table w, a [rows, dim] float32 or float64 matrix, and of its optimiser
// state afresh: row a.Row gets init's values for a.ID, and each state
// tensor ([rows, width] by column of cols, as optim.MemoryTable keeps
// them) its column's Init. A row outside w is an error wrapping
// gather.ErrIndexOutOfRange, and then nothing changed.
func InitialRows(w *tensor.Dense, state []*tensor.Dense, cols []driver.Column, fresh []driver.Assignment, init driver.RowInit) error {
	if w == nil || len(w.Shape()) != 2 || len(state) != len(cols) {
		return fmt.Errorf("table: InitialRows needs a matrix and one state tensor per column: %w", errs.ErrShape)
	}
	if err := operand.CheckFloat("table", "the table", w.Dtype()); err != nil {
		return err
	}
	if err := init.Check(); err != nil {
		return fmt.Errorf("table: InitialRows: %w", err)
	}
	n := w.Shape()[0]
	slots := make([]int64, len(fresh))
	for k, a := range fresh {
		if a.Row < 0 || a.Row >= int64(n) {
			return fmt.Errorf("table: row %d of id %d is outside the table's %d rows: %w", a.Row, a.ID, n, errs.ErrIndexOutOfRange)
		}
		slots[k] = a.Row
	}
	for c, st := range state {
		if st.Dtype() != w.Dtype() || !st.Shape().Eq(tensor.Shape{n, cols[c].Width}) {
			return fmt.Errorf("table: state %q is %v %v; the table's rows need %v [%d %d]: %w", cols[c].Name, st.Dtype(), st.Shape(), w.Dtype(), n, cols[c].Width, errs.ErrShape)
		}
	}
	initialRows(w, state, cols, fresh, slots, init)
	return nil
}

// fillRow sets dst to init's values for the row of id.
func fillRow[T float32 | float64](init driver.RowInit, dst []T, id int64) {
	tablerows.FillRow(init.Seed, init.Std, dst, id)
}
