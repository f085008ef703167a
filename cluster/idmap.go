package cluster

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/gathergrad/gather/table/driver"

	"github.com/redis/go-redis/v9"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/tablerows"
)

// A IDMap is an IDMap that lives on the Redis Cluster of a table's
// Store, beside the rows it hands out, so that every worker
// training the table maps raw ids alike: two workers that admit the same
// new id at once give it one row. It maps raw 64-bit ids (any value) to
// rows 0 to Rows-1 of the table, with IDMapOptions' admission, eviction
// and TTL; row Rows is the default row.
//
// The map is split as the rows are, by hash tag: a raw id belongs to one
// of the 1024 tags by a hash of its value, and takes rows of that tag
// only (the rows r with r mod 1024 equal to it), so that a batch's
// mapping is one Function call per tag, beside the rows, and its rows'
// values come back in the same call: Map is the step's read of its rows,
// with no round trip of its own. A tag is full when its own rows are:
// about Rows/1024 of them (size Rows with room to spare for the ids of
// the busiest tag). Rows under 1024 would leave tags with no rows, whose
// ids could never be admitted: NewIDMap refuses them. In the same way, an id's sightings are counted in
// its tag's count-min sketch, of SketchWidth/1024 counters a row (at
// least 64), so that the error bound of IDMapOptions.AdmitAfter holds
// over the ids of a tag; TTL frees a tag's rows at that tag's next call.
// EvictLRU takes the row of the tag's id used at the earliest step (of
// ties, the row whose decimal digits sort first); EvictLFU, of the 16
// rows of the tag's ids used in the fewest steps, the first not used at
// this step (else as EvictLRU), not the random sample of IDMap. A row
// used at a worker's step is not taken by a call of that step.
//
// A row given to an id is missing on the cluster until its first step;
// a read of it (ReadRows, Export, in any process) gives its id's
// initial row, the RowInit the map's options record.
//
// Workers map at the same time, so a batch cannot be refused whole: a
// new id that finds no row (Refuse when its tag is full, or every row
// of its tag used at this step) reads the default row, counted in
// Stats.Rejected, and Map returns no error for it.
//
// Steps: a table with a IDMap is read and stepped through a Shared
// Cached table (nn.NewRawIDs). Map hands the rows it read to the
// store's next ReadRows of them, and the store's Step sends each row's
// raw id: a row taken for another id between a worker's Map and its Step
// keeps its new id's values (the gradient is dropped, counted in
// Stats.Dropped), and a row given to an id starts, at its first Step,
// from RowInit's values for the id and each state column's Init (the
// worker that mapped it sends them).
//
// Every Map is one update of the store (see ErrUnknownOutcome): a call
// retried after a failover that the server applied already answers what
// it answered the first time, so admissions, evictions and counts happen
// exactly once; the same Map again after an error wrapping
// ErrUnknownOutcome applies what the first did not. The map's keys
// persist as the rows do (Redis's own persistence and replicas;
// Options.Replicas).
type IDMap struct {
	s     *Store
	o     driver.IDMapOptions
	init  driver.RowInit
	width int // the counters of each row of a tag's sketch
	name  string
}

// mappedRow is a row the last Map of a store's IDMap gave: the raw
// id it belongs to, its bytes (as read, or its initial row if fresh),
// and whether ReadRows has served them yet.
type mappedRow struct {
	rowNum int64
	raw    int64
	row    []byte
	fresh  bool // the row was missing: it starts from row at its first Step
	read   bool
}

// mapKey is the key of one part of the map of tag tag: "ids" (raw id ->
// row), "owner" (row -> raw id), "last" (rows by the step of their last
// use), "uses" (rows by the steps they were used in, EvictLFU), "cms" (the
// sketch), "stats" (counts and the next row never given), "free" (rows
// freed by TTL).
func (s *Store) mapKey(tag int64, part string) string {
	return "gg:" + s.name + ":{" + strconv.FormatInt(tag, 10) + "}:map:" + part
}

var mapParts = []string{"ids", "owner", "last", "uses", "cms", "stats", "free"}

// optionsKey records a map's options, which every worker must share.
func (s *Store) optionsKey() string { return "gg:" + s.name + ":map" }

// NewIDMap returns the map of the table of s, a float32 table of at
// least o.Rows+1 rows whose row o.Rows is the default row (as for
// IDMap), whose new rows start by init. The first worker records o and
// init on the cluster; a worker whose options differ gets an error
// wrapping checkpoint.ErrMismatch. A store has one map: a second is an
// error.
func NewIDMap(ctx context.Context, s *Store, o driver.IDMapOptions, init driver.RowInit) (*IDMap, error) {
	if s == nil {
		return nil, fmt.Errorf("id map: NewIDMap needs a store: %w", errs.ErrOption)
	}
	prefix := fmt.Sprintf("id map of table %q", s.name)
	if err := o.Check(s.name); err != nil {
		return nil, err
	}
	if err := init.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", prefix, err)
	}
	if o.Rows < redisGroups {
		return nil, fmt.Errorf("%s: Rows %d leaves hash tags with no rows, whose ids could never be admitted: a map on a Redis Cluster needs at least %d rows, one a hash tag: %w",
			prefix, o.Rows, redisGroups, errs.ErrOption)
	}
	if s.dt != tensor.Float32 || s.rows < int64(o.Rows)+1 {
		return nil, fmt.Errorf("%s: a map of %d rows needs a float32 table of at least %d rows, not %v of %d: %w",
			prefix, o.Rows, o.Rows+1, s.dt, s.rows, errs.ErrOption)
	}
	if o.AdmitAfter == 0 {
		o.AdmitAfter = 1
	}
	if o.SketchWidth == 0 {
		o.SketchWidth = 1 << 16
	}
	width := max(64, 1<<bits.Len(uint(max(o.SketchWidth/redisGroups, 1)-1)))
	desc := fmt.Sprintf("rows=%d;admit=%d;width=%d;evict=%d;ttl=%d;pad=%t;padid=%d;seed=%d;std=%s",
		o.Rows, o.AdmitAfter, width, o.Evict, o.TTL, o.Pad, o.PadID, init.Seed, strconv.FormatFloat(init.Std, 'g', -1, 64))
	var got string
	err := s.again(ctx, func(ctx context.Context) error {
		if err := s.c.SetNX(ctx, s.optionsKey(), desc, 0).Err(); err != nil {
			return err
		}
		var err error
		got, err = s.c.Get(ctx, s.optionsKey()).Result()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", prefix, redisError(err))
	}
	if got != desc {
		return nil, fmt.Errorf("%s: the cluster records the map's options as %q; these are %q: %w", prefix, got, desc, checkpoint.ErrMismatch)
	}
	s.mapMu.Lock()
	defer s.mapMu.Unlock()
	if s.idmap != nil {
		return nil, fmt.Errorf("%s: the store has a map already: %w", prefix, errs.ErrOption)
	}
	m := &IDMap{s: s, o: o, init: init, width: width, name: s.name}
	s.idmap = m
	return m, nil
}

// clearMap deletes the keys of the table's IDMap, if it has one: a
// table replaced starts with no map.
func (s *Store) clearMap(ctx context.Context) error {
	keys := []string{s.optionsKey()}
	for t := range int64(redisGroups) {
		for _, part := range mapParts {
			keys = append(keys, s.mapKey(t, part))
		}
	}
	return s.again(ctx, func(ctx context.Context) error {
		return s.onMasters(ctx, keys, writeCall, func(ctx context.Context, p redis.Pipeliner, k int) {
			p.Del(ctx, keys[k])
		})
	})
}

// Rows returns the rows the map hands out, which is also the default row.
func (m *IDMap) Rows() int { return m.o.Rows }

// Name returns the map's name, its table's.
func (m *IDMap) Name() string { return m.name }

// Store returns the store whose rows the map hands out, a *Store.
func (m *IDMap) Store() driver.Store { return m.s }

// RowInit returns how the rows the map gives start, as the cluster
// records it.
func (m *IDMap) RowInit() driver.RowInit { return m.init }

// Forget does nothing and returns nil: the rows Map gave start on the
// cluster, from the map's RowInit, at their first read or step by any
// worker, so a worker that could not start them has nothing to take
// back.
func (m *IDMap) Forget(context.Context, []driver.Assignment) error { return nil }

var _ driver.StoreMapper = (*IDMap)(nil)

// idTag returns the hash tag of raw id id.
func idTag(id int64) int64 { return int64(tablerows.Mix(uint64(id), 11) % redisGroups) }

// Map sets rows[k] to the row of raw[k] for step step, admitting new ids
// and evicting on the servers as the options say, and appends to
// assigned the rows it gave ids that must start afresh (rows now missing on the cluster:
// its Step starts them), in the order given. It reads the values of the
// rows it gives, in the same calls, for the store's next ReadRows of
// them. Steps are the worker's own; a row used at a worker's step is not
// taken for another id by a call of the same or an earlier step. On
// error rows is unchanged.
func (m *IDMap) Map(ctx context.Context, raw, rows []int64, step int64, assigned []driver.Assignment) ([]driver.Assignment, error) {
	s := m.s
	if len(rows) != len(raw) {
		return assigned, fmt.Errorf("id map %q: %d rows for %d ids: %w", m.name, len(rows), len(raw), errs.ErrShape)
	}
	if s.closed.Load() {
		return assigned, fmt.Errorf("id map %q: %w", m.name, driver.ErrClosed)
	}
	// The distinct ids of each tag, with their sightings, in order of
	// first sight.
	type seen struct {
		id    int64
		count int
	}
	at := make(map[int64]int, len(raw)) // raw id -> its index in byTag[its tag]
	byTag := map[int64][]seen{}
	for _, id := range raw {
		if m.o.Pad && id == m.o.PadID {
			continue
		}
		tag := idTag(id)
		if k, ok := at[id]; ok {
			byTag[tag][k].count++
			continue
		}
		at[id] = len(byTag[tag])
		byTag[tag] = append(byTag[tag], seen{id, 1})
	}
	tags := slices.Sorted(maps.Keys(byTag))
	o := m.o
	head := []any{strconv.FormatInt(step, 10), strconv.Itoa(o.AdmitAfter), strconv.Itoa(int(o.Evict)), strconv.FormatInt(o.TTL, 10)}
	calls := make([]tagCall, len(tags))
	for i, tag := range tags {
		ids := byTag[tag]
		keys := make([]string, len(mapParts))
		for k, part := range mapParts {
			keys[k] = s.mapKey(tag, part)
		}
		keys = append(keys, s.seenKey(tag))
		args := []any{strconv.FormatInt(tag, 10), strconv.Itoa(o.Rows), s.rowPrefix(tag), strconv.Itoa(len(ids))}
		for _, x := range ids {
			var cells string
			if o.AdmitAfter > 1 {
				var b strings.Builder
				for d := range 4 {
					if d > 0 {
						b.WriteByte(' ')
					}
					b.WriteString(strconv.Itoa(d*m.width + int(tablerows.Mix(uint64(x.id), uint64(d))&uint64(m.width-1))))
				}
				cells = b.String()
			}
			args = append(args, strconv.FormatInt(x.id, 10), strconv.Itoa(x.count), cells)
		}
		calls[i] = tagCall{keys: keys, args: args}
	}
	got := make(map[int64]mappedRow, len(at))
	var bad error
	reply := func(k int, r any) {
		v, ok := r.([]any)
		ids := byTag[tags[k]]
		var err error
		if !ok || len(v) != 2*len(ids) {
			err = fmt.Errorf("%d values for %d ids", len(v), len(ids))
		}
		if err != nil {
			bad = firstErr(bad, fmt.Errorf("the map's call for tag %d answered: %w", tags[k], err))
			return
		}
		for i, x := range ids {
			row, ok := v[2*i].(int64)
			b, _ := v[2*i+1].(string)
			switch {
			case !ok || row < -1 || row >= int64(o.Rows) || row >= 0 && row%redisGroups != tags[k]:
				bad = firstErr(bad, fmt.Errorf("the map gave id %d the row %v, not one of its tag %d", x.id, v[2*i], tags[k]))
			case row >= 0 && v[2*i+1] != nil && len(b) != s.rowBytes:
				bad = firstErr(bad, fmt.Errorf("the row %d of id %d holds %d bytes; a row is %d: %w", row, x.id, len(b), s.rowBytes, errMismatch))
			case row >= 0:
				got[x.id] = mappedRow{rowNum: row, raw: x.id, row: []byte(b), fresh: v[2*i+1] == nil}
			}
		}
	}
	if len(calls) > 0 {
		_, library := mapFunction()
		prefix := fmt.Sprintf("id map %q: mapping %d ids", m.name, len(raw))
		err := s.loading(ctx, library, prefix, func() error {
			err := s.numbered(ctx, func() [sha256.Size]byte { return callDigest(mapFn, head, calls) }, func(ctx context.Context, name []any) error {
				return s.send(ctx, mapFn, name, head, calls, reply)
			})
			if err != nil {
				return fmt.Errorf("%s: %w", prefix, err)
			}
			return nil
		})
		if err != nil {
			return assigned, err
		}
	}
	if bad != nil {
		return assigned, fmt.Errorf("id map %q: %w", m.name, bad)
	}
	// The rows, for the store's reads and steps; new rows' values.
	byRow := make(map[int64]mappedRow, len(got))
	fresh := assigned
	for _, id := range raw {
		x, ok := got[id]
		if !ok {
			continue
		}
		row := x.rowNum
		if _, done := byRow[row]; done {
			continue
		}
		if x.fresh {
			x.row = m.initialRow(id)
			fresh = append(fresh, driver.Assignment{Row: row, ID: id})
		}
		byRow[row] = x
	}
	for k, id := range raw {
		if _, ok := got[id]; ok {
			rows[k] = got[id].rowNum
		} else {
			rows[k] = int64(o.Rows)
		}
	}
	s.mapMu.Lock()
	s.mapped = byRow
	s.mapMu.Unlock()
	return fresh, nil
}

// firstErr returns err if it is the first error, else first.
func firstErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// initialRow returns the bytes of the row of raw id id as it starts: the
// RowInit's values, then each state column at its Init.
func (m *IDMap) initialRow(id int64) []byte { return m.s.initialRow(m.init, id) }

// initialRow returns the bytes of a row of the store's table given to
// raw id id as it starts by init.
func (s *Store) initialRow(init driver.RowInit, id int64) []byte {
	v := make([]float32, s.rowBytes/4)
	tablerows.FillRow(init.Seed, init.Std, v[:s.dim], id)
	at := s.dim
	for _, c := range s.cols {
		for i := range c.Width {
			v[at+i] = float32(c.Init)
		}
		at += c.Width
	}
	return slices.Clone(fileio.LittleEndianBytes(v))
}

// Stats returns the map's counts, summed over its tags on the cluster:
// Used, Admitted, Evicted, Expired, Rejected, Pending, and Dropped (the
// gradients of rows taken for another id between a worker's Map and its
// Step).
func (m *IDMap) Stats(ctx context.Context) (driver.IDMapStats, error) {
	s := m.s
	keys := make([]string, redisGroups)
	for t := range keys {
		keys[t] = s.mapKey(int64(t), "stats")
	}
	cmds := make([]*redis.SliceCmd, len(keys))
	err := s.again(ctx, func(ctx context.Context) error {
		return s.onMasters(ctx, keys, readCall, func(ctx context.Context, p redis.Pipeliner, k int) {
			cmds[k] = p.HMGet(ctx, keys[k], "used", "admitted", "evicted", "expired", "rejected", "pending", "dropped")
		})
	})
	if err != nil {
		return driver.IDMapStats{}, fmt.Errorf("id map %q: reading its counts: %w", m.name, redisError(err))
	}
	var st driver.IDMapStats
	for k, cmd := range cmds {
		v, err := cmd.Result()
		if err != nil {
			return driver.IDMapStats{}, fmt.Errorf("id map %q: reading %q: %w", m.name, keys[k], redisError(err))
		}
		var n [7]int64
		for i, x := range v {
			if x == nil {
				continue
			}
			str, _ := x.(string)
			if n[i], err = strconv.ParseInt(str, 10, 64); err != nil || n[i] < 0 {
				return driver.IDMapStats{}, fmt.Errorf("id map %q: the key %q holds %v, not a count: %w", m.name, keys[k], x, errMismatch)
			}
		}
		st.Used += int(n[0])
		st.Admitted += uint64(n[1])
		st.Evicted += uint64(n[2])
		st.Expired += uint64(n[3])
		st.Rejected += uint64(n[4])
		st.Pending += uint64(n[5])
		st.Dropped += uint64(n[6])
	}
	return st, nil
}

// Snapshot returns the map as it is on the cluster now: its options,
// each held id with its row, the step of its last use and the steps it
// was used in, and the counts of Stats. It reads the whole map (three
// keys a tag, one pipeline a master), so that a table trained on the
// cluster can be served or saved with its map: table.HeldIDMap makes of
// it a map in memory (for serve.NewIDs, or a checkpoint.Part). The
// sketch is not read: ids seen but not admitted start uncounted there. Workers that map while it reads may leave it
// a mix of their steps.
func (m *IDMap) Snapshot(ctx context.Context) (*driver.IDMapState, error) {
	s := m.s
	o := m.o
	o.SketchWidth = m.width * redisGroups
	if err := o.Check(m.name); err != nil {
		return nil, err
	}
	st, err := m.Stats(ctx)
	if err != nil {
		return nil, err
	}
	parts := []string{"owner", "last", "uses"}
	keys := make([]string, 0, len(parts)*redisGroups)
	for t := range int64(redisGroups) {
		for _, part := range parts {
			keys = append(keys, s.mapKey(t, part))
		}
	}
	owners := make([]*redis.MapStringStringCmd, redisGroups)
	scores := make([]*redis.ZSliceCmd, 2*redisGroups)
	err = s.again(ctx, func(ctx context.Context) error {
		return s.onMasters(ctx, keys, readCall, func(ctx context.Context, p redis.Pipeliner, k int) {
			if k%3 == 0 {
				owners[k/3] = p.HGetAll(ctx, keys[k])
			} else {
				scores[2*(k/3)+k%3-1] = p.ZRangeWithScores(ctx, keys[k], 0, -1)
			}
		})
	})
	if err != nil {
		return nil, fmt.Errorf("id map %q: reading it: %w", m.name, redisError(err))
	}
	var all []driver.HeldRow
	for t := range redisGroups {
		last, uses := map[string]float64{}, map[string]float64{}
		for i, into := range []map[string]float64{last, uses} {
			zs, err := scores[2*t+i].Result()
			if err != nil {
				return nil, fmt.Errorf("id map %q: reading tag %d: %w", m.name, t, redisError(err))
			}
			for _, z := range zs {
				into[fmt.Sprint(z.Member)] = z.Score
			}
		}
		own, err := owners[t].Result()
		if err != nil {
			return nil, fmt.Errorf("id map %q: reading tag %d: %w", m.name, t, redisError(err))
		}
		for r, id := range own {
			row, err1 := strconv.ParseInt(r, 10, 64)
			raw, err2 := strconv.ParseInt(id, 10, 64)
			l, ok := last[r]
			if err1 != nil || err2 != nil || !ok || row < 0 || row >= int64(o.Rows) || row%redisGroups != int64(t) {
				return nil, fmt.Errorf("id map %q: tag %d holds row %q of id %q, which is not a row of the map: %w", m.name, t, r, id, errMismatch)
			}
			all = append(all, driver.HeldRow{Row: row, ID: raw, Last: int64(l), Uses: uint32(uses[r])})
		}
	}
	return &driver.IDMapState{Name: m.name, Options: o, Held: all, Stats: st}, nil
}
