package table

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
)

// The tensors of an IDMap's State, each named "<map name>.idmap.<key>".
const (
	stateID     = "id"     // Int64 [Rows]: the id each row holds (0 for a free row)
	stateLast   = "last"   // Int64 [Rows]: the step of each row's last use
	stateUses   = "uses"   // Uint32 [Rows]: each row's uses since admitted
	stateLinks  = "links"  // Int32 [Rows, 2]: each held row's neighbours in recency order, -1 at the ends
	stateFree   = "free"   // Int32 [Rows]: the free rows, the next to give last, then -1s
	stateSketch = "sketch" // Uint32 [4, width]: the admission sketch (AdmitAfter > 1 only)
	stateRNG    = "rng"    // Uint8 [20]: the generator of EvictLFU's draws
	stateMeta   = "meta"   // Int64 [15]: options, clock and counts (metaFields)
)

// metaFields are the values of the "meta" tensor, in order.
var metaFields = []string{"rows", "admit_after", "sketch_width", "evict", "ttl", "pad", "pad_id", "head", "tail", "step",
	"admitted", "evicted", "expired", "rejected", "pending"}

// metaOptions returns the options as the first values of the "meta"
// tensor.
func (m *IDMap) metaOptions() []int64 {
	pad := int64(0)
	if m.o.Pad {
		pad = 1
	}
	return []int64{int64(m.o.Rows), int64(m.o.AdmitAfter), int64(m.o.SketchWidth), int64(m.o.Evict), m.o.TTL, pad, m.o.PadID}
}

// State returns the map as tensors (checkpoint.Part), named
// "<name>.idmap.<what>": which id holds each row, the rows' recency and
// use counts, the free rows, the admission sketch, the eviction draws'
// generator, the options and Stats. checkpoint.Save writes them beside
// the table, and a map that Load restores maps the next batch as this
// one would. The tensors are copies.
func (m *IDMap) State() (map[string]tensor.Tensor, error) {
	n := m.o.Rows
	id, last, uses := make([]int64, n), make([]int64, n), make([]uint32, n)
	links, free := make([]int32, 2*n), make([]int32, n)
	for r, e := range m.row {
		if e.held {
			id[r], last[r], uses[r] = e.id, e.last, e.uses
		}
		links[2*r], links[2*r+1] = e.prev, e.next
	}
	for k := range free {
		free[k] = -1
	}
	copy(free, m.free)
	rng, err := m.pcg.MarshalBinary()
	if err != nil {
		return nil, err
	}
	s := m.stats
	meta := append(m.metaOptions(), int64(m.head), int64(m.tail), m.step, int64(s.Admitted), int64(s.Evicted), int64(s.Expired), int64(s.Rejected), int64(s.Pending))
	st := map[string]tensor.Tensor{
		stateID:    tensor.New(tensor.WithShape(n), tensor.WithBacking(id)),
		stateLast:  tensor.New(tensor.WithShape(n), tensor.WithBacking(last)),
		stateUses:  tensor.New(tensor.WithShape(n), tensor.WithBacking(uses)),
		stateLinks: tensor.New(tensor.WithShape(n, 2), tensor.WithBacking(links)),
		stateFree:  tensor.New(tensor.WithShape(n), tensor.WithBacking(free)),
		stateRNG:   tensor.New(tensor.WithShape(len(rng)), tensor.WithBacking(rng)),
		stateMeta:  tensor.New(tensor.WithShape(len(meta)), tensor.WithBacking(meta)),
	}
	if m.cms != nil {
		st[stateSketch] = tensor.New(tensor.WithShape(4, len(m.cms)/4), tensor.WithBacking(append([]uint32(nil), m.cms...)))
	}
	named := make(map[string]tensor.Tensor, len(st))
	for k, v := range st {
		named[m.name+".idmap."+k] = v
	}
	return named, nil
}

// SetState restores the map from tensors that State returned
// (checkpoint.Part): checkpoint.Load calls it. The map's options must be
// those the tensors were saved with, and the tensors must describe a map
// (each row held by one id or free, one recency order through the held
// rows, no use after the saved step): anything else is an error wrapping
// checkpoint.ErrFormat that names what is wrong, and the map is
// unchanged.
func (m *IDMap) SetState(tensors map[string]*tensor.Dense) error {
	get := func(key string, dt tensor.Dtype, size int) (*tensor.Dense, error) {
		t, ok := tensors[m.name+".idmap."+key]
		if !ok || t.Dtype() != dt || t.Shape().TotalSize() != size {
			return nil, m.formatError("no %s tensor of %d %v values", key, size, dt)
		}
		return t, nil
	}
	n := m.o.Rows
	var ts [7]*tensor.Dense
	for k, want := range []struct {
		key  string
		dt   tensor.Dtype
		size int
	}{{stateID, tensor.Int64, n}, {stateLast, tensor.Int64, n}, {stateUses, tensor.Uint32, n},
		{stateLinks, tensor.Int32, 2 * n}, {stateFree, tensor.Int32, n}, {stateMeta, tensor.Int64, len(metaFields)}, {stateRNG, tensor.Uint8, 20}} {
		t, err := get(want.key, want.dt, want.size)
		if err != nil {
			return err
		}
		ts[k] = t
	}
	id, last, uses, links, free, meta := ts[0].Int64s(), ts[1].Int64s(), ts[2].Uint32s(), ts[3].Int32s(), ts[4].Int32s(), ts[5].Int64s()
	opts := m.metaOptions()
	for k, v := range opts {
		if meta[k] != v {
			return m.formatError("saved with %s %d; this map has %d", metaFields[k], meta[k], v)
		}
	}
	var pcg rand.PCG
	if err := pcg.UnmarshalBinary(ts[6].Uint8s()); err != nil {
		return m.formatError("the generator: %v", err)
	}
	o := len(opts)
	for k, v := range meta[o+3:] {
		if v < 0 {
			return m.formatError("%s is %d", metaFields[o+3+k], v)
		}
	}
	head, tail, step := meta[o], meta[o+1], meta[o+2]

	// The free rows: distinct rows, then -1s.
	isFree := make([]bool, n)
	var freeRows []int32
	for k, r := range free {
		if r < 0 {
			if r != -1 || (k+1 < n && free[k+1] != -1) {
				return m.formatError("free list entry %d is %d", k, r)
			}
			break
		}
		if int(r) >= n || isFree[r] {
			return m.formatError("free list entry %d is row %d", k, r)
		}
		isFree[r] = true
		freeRows = append(freeRows, r)
	}
	// The held rows: distinct ids, one recency order from head to tail.
	rows := make([]rowEntry, n)
	ids := make(map[int64]int32, n)
	for r := range rows {
		e := &rows[r]
		e.prev, e.next = links[2*r], links[2*r+1]
		if isFree[r] {
			if e.prev != -1 || e.next != -1 {
				return m.formatError("free row %d has neighbours %d and %d", r, e.prev, e.next)
			}
			continue
		}
		if last[r] > step {
			return m.formatError("row %d was last used at step %d, after the map's step %d", r, last[r], step)
		}
		if m.o.Pad && id[r] == m.o.PadID {
			return m.formatError("row %d holds the padding id %d", r, id[r])
		}
		if other, dup := ids[id[r]]; dup {
			return m.formatError("rows %d and %d hold id %d", other, r, id[r])
		}
		e.id, e.last, e.uses, e.held = id[r], last[r], uses[r], true
		ids[id[r]] = int32(r)
	}
	held := len(ids)
	if (held == 0) != (head == -1) || (held == 0) != (tail == -1) || head < -1 || tail < -1 || head >= int64(n) || tail >= int64(n) {
		return m.formatError("head %d and tail %d for %d held rows", head, tail, held)
	}
	prev, seen := int32(-1), 0
	for r := int32(head); r >= 0; r = rows[r].next {
		if seen == held || int(r) >= n || !rows[r].held || rows[r].prev != prev {
			return m.formatError("the recency order breaks at row %d", r)
		}
		prev, seen = r, seen+1
	}
	if seen != held || int64(prev) != tail || (prev >= 0 && rows[prev].next != -1) {
		return m.formatError("the recency order holds %d of %d held rows and ends at row %d, not %d", seen, held, prev, tail)
	}
	var cms []uint32
	if m.cms != nil {
		t, err := get(stateSketch, tensor.Uint32, len(m.cms))
		if err != nil {
			return err
		}
		cms = append([]uint32(nil), t.Uint32s()...)
	}

	m.ids, m.row, m.free, m.head, m.tail, m.step = ids, rows, freeRows, int32(head), int32(tail), step
	if cms != nil {
		m.cms = cms
	}
	*m.pcg = pcg
	c := meta[o+3:]
	m.stats = driver.IDMapStats{Admitted: uint64(c[0]), Evicted: uint64(c[1]), Expired: uint64(c[2]), Rejected: uint64(c[3]), Pending: uint64(c[4])}
	return nil
}

func (m *IDMap) formatError(format string, args ...any) error {
	return fmt.Errorf("id map %q: state: %s: %w", m.name, fmt.Sprintf(format, args...), checkpoint.ErrFormat)
}

// Held returns the ids that hold rows and their rows, in row order:
// copies, for a server that maps ids as training left them (serve.IDs).
func (m *IDMap) Held() (ids, rows []int64) {
	for r, e := range m.row {
		if e.held {
			ids, rows = append(ids, e.id), append(rows, int64(r))
		}
	}
	return ids, rows
}

// metaPart is the "meta" tensor of a map's state alone, as a
// checkpoint.Part.
type metaPart struct {
	name string
	meta *tensor.Dense
}

func (p *metaPart) State() (map[string]tensor.Tensor, error) {
	return map[string]tensor.Tensor{p.name + ".idmap." + stateMeta: p.meta}, nil
}

func (p *metaPart) SetState(ts map[string]*tensor.Dense) error {
	t, ok := ts[p.name+".idmap."+stateMeta]
	if !ok {
		return fmt.Errorf("id map %q: no state: %w", p.name, checkpoint.ErrFormat)
	}
	copy(p.meta.Int64s(), t.Int64s())
	return nil
}

// ReadIDMap returns the map named name that checkpoint.Save wrote to the
// file at path (with the rest of a model, or alone), with the options it
// was saved with. A file without it, or whose state does not describe a
// map, is an error wrapping checkpoint.ErrFormat or
// checkpoint.ErrMismatch. To resume a model saved with its map, pass the
// map ReadIDMap returns to checkpoint.Load with the model's other parts
// (Load restores it again, to the same state): a strict Load refuses a
// file with tensors no part holds, and its error names the map.
func ReadIDMap(path, name string) (*IDMap, error) {
	mp := &metaPart{name: name, meta: tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(len(metaFields)))}
	r, err := checkpoint.LoadWith(path, checkpoint.LoadOptions{NonStrict: true}, mp)
	if err != nil {
		return nil, err
	}
	if len(r.Missing) > 0 {
		return nil, fmt.Errorf("id map %q: %s holds no map of that name: %w", name, path, checkpoint.ErrFormat)
	}
	v := mp.meta.Int64s()
	if v[0] <= 0 || v[0] >= 1<<31-1 || v[1] < 0 || v[1] > math.MaxUint32 || v[2] < 0 || v[2] > 1<<30 || v[3] < 0 || v[4] < 0 {
		return nil, fmt.Errorf("id map %q: %s: options %v: %w", name, path, v[:7], checkpoint.ErrFormat)
	}
	o := driver.IDMapOptions{Rows: int(v[0]), AdmitAfter: int(v[1]), SketchWidth: int(v[2]), Evict: driver.Eviction(v[3]), TTL: v[4], Pad: v[5] != 0, PadID: v[6]}
	// The map's memory follows its tensors' sizes in the file, so that a
	// hostile file cannot ask for more than it holds.
	infos, _, err := checkpoint.Inspect(path)
	if err != nil {
		return nil, err
	}
	want := map[string][]int{stateID: {o.Rows}}
	if o.AdmitAfter > 1 {
		want[stateSketch] = []int{4, 1 << bits.Len(uint(max(o.SketchWidth, 1)-1))}
	}
	for key, shape := range want {
		k := slices.IndexFunc(infos, func(i checkpoint.TensorInfo) bool { return i.Name == name+".idmap."+key })
		if k < 0 || !slices.Equal(infos[k].Shape, shape) {
			return nil, fmt.Errorf("id map %q: %s: no %s tensor of shape %v: %w", name, path, key, shape, checkpoint.ErrFormat)
		}
	}
	m, err := NewIDMap(name, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (%w)", path, err, checkpoint.ErrFormat)
	}
	if _, err := checkpoint.LoadWith(path, checkpoint.LoadOptions{NonStrict: true}, m); err != nil {
		return nil, err
	}
	return m, nil
}

// HeldIDMap returns the map s describes: named s.Name, of s.Options, its
// rows s.Held held and the others free, its Stats s.Stats (Used aside):
// a map read from elsewhere, such as cluster.IDMap.Snapshot's. Its
// recency order is that of Last (then Row), its clock the latest Last,
// and its sketch empty. Invalid options, a row outside [0, Rows), or a row or an id
// held twice is an error wrapping gather.ErrOption naming it.
func HeldIDMap(s driver.IDMapState) (*IDMap, error) {
	name, o, held, st := s.Name, s.Options, s.Held, s.Stats
	m, err := NewIDMap(name, o)
	if err != nil {
		return nil, err
	}
	held = slices.Clone(held)
	slices.SortFunc(held, func(a, b driver.HeldRow) int { return cmp.Or(cmp.Compare(a.Last, b.Last), cmp.Compare(a.Row, b.Row)) })
	for _, h := range held {
		if h.Row < 0 || h.Row >= int64(m.o.Rows) || m.row[h.Row].held {
			return nil, fmt.Errorf("id map %q: row %d of id %d is not a row of the map, or held twice: %w", name, h.Row, h.ID, errs.ErrOption)
		}
		if _, ok := m.ids[h.ID]; ok {
			return nil, fmt.Errorf("id map %q: id %d holds two rows: %w", name, h.ID, errs.ErrOption)
		}
		m.hold(int32(h.Row), h.ID, h.Last, h.Uses)
	}
	m.freed()
	m.stats = st
	m.stats.Used = 0
	return m, nil
}
