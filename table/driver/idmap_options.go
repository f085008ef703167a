package driver

import (
	"fmt"
	"math"

	"github.com/gathergrad/gather/internal/errs"
)

// An Eviction says which row a table.IDMap that is full gives a new id.
type Eviction int

// The eviction policies.
const (
	// EvictLRU takes the row of the id used longest ago: of the ids last
	// used at the earliest step, the one first used in it, where Map
	// counts the ids of a batch that held rows as used before the
	// batch's new ids (in the batch's order within each).
	EvictLRU Eviction = iota
	// EvictLFU takes, of 16 rows drawn at random, the row of the id
	// used in the fewest steps since it was admitted.
	EvictLFU
	// Refuse evicts nothing: a new id of a full map is an error wrapping
	// table.ErrCapacity naming the map and the id, and the batch changes
	// nothing.
	Refuse
)

// IDMapOptions configure an id map (table.IDMap, cluster.IDMap).
type IDMapOptions struct {
	// Rows is how many rows the map hands out: rows 0 to Rows-1, at
	// most 2³¹-2 and within table.MaxIDMapBytes. Row Rows is the default row,
	// which ids not yet admitted read: make the table Rows+1 rows with
	// its padding row at Rows (nn.WithPadding), so that they read zeros
	// and their gradients are dropped.
	Rows int
	// AdmitAfter is how many times an id must be seen before it gets a
	// row; 0 means 1, and at most 2³²-1, the sketch's largest count. Ids
	// are counted in a count-min sketch (4 rows of
	// SketchWidth counters): a count is never below the true one and
	// above it by at most e·N/SketchWidth, N the ids counted, with
	// probability 1 - e⁻⁴, so an id may be admitted early, never late.
	AdmitAfter int
	// SketchWidth is the counters of each row of the sketch, rounded up
	// to a power of two; 0 means 1<<16. The map's memory is bounded
	// (table.MaxIDMapBytes).
	SketchWidth int
	// Evict is the policy of a full map.
	Evict Eviction
	// TTL, if above 0, frees the row of an id not used for TTL steps:
	// it is evicted at the next Map, whatever the policy.
	TTL int64
	// Pad, if set, makes PadID the padding id: it always reads the
	// default row and is never counted or given a row, as a bag's
	// padding_idx (the fill of bags shorter than their tensor).
	Pad   bool
	PadID int64
}

// IDMapStats count what an id map did.
type IDMapStats struct {
	Used     int    // rows held by an id now
	Admitted uint64 // ids given a row
	Evicted  uint64 // ids whose row was taken for another (LRU, LFU)
	Expired  uint64 // ids whose row was freed after TTL steps unused
	Rejected uint64 // ids a Refuse map had no row for
	Pending  uint64 // sightings of ids not yet admitted: they read the default row, their gradients dropped
	Dropped  uint64 // gradients of rows taken for another id between a worker's Map and its Step (cluster.IDMap)
}

// An Assignment is a row given to a raw id by Map: the row's values and
// optimiser state must be started afresh for the id (table.InitialRow), for
// it held another id's or none.
type Assignment struct{ Row, ID int64 }

// Check returns an error wrapping gather.ErrOption naming the map name,
// the one option that is wrong and its limit, if o are not options of a
// map.
func (o IDMapOptions) Check(name string) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("id map %q: %s: %w", name, fmt.Sprintf(format, a...), errs.ErrOption)
	}
	switch {
	case o.Rows <= 0 || o.Rows >= 1<<31-1:
		return bad("Rows %d must lie in [1, %d]", o.Rows, 1<<31-2)
	case o.AdmitAfter < 0 || uint64(o.AdmitAfter) > math.MaxUint32:
		return bad("AdmitAfter %d must lie in [0, %d], the sketch's largest count", o.AdmitAfter, uint64(math.MaxUint32))
	case o.SketchWidth < 0 || int64(o.SketchWidth) > 1<<40:
		return bad("SketchWidth %d must lie in [0, %d]", o.SketchWidth, int64(1)<<40)
	case o.TTL < 0:
		return bad("TTL %d must be at least 0", o.TTL)
	case o.Evict < EvictLRU || o.Evict > Refuse:
		return bad("Evict %d is not a policy (EvictLRU %d, EvictLFU %d, Refuse %d)", o.Evict, EvictLRU, EvictLFU, Refuse)
	}
	return nil
}

// Defaults returns o with its zero values replaced by their defaults.
func (o IDMapOptions) Defaults() IDMapOptions {
	if o.AdmitAfter == 0 {
		o.AdmitAfter = 1
	}
	if o.SketchWidth == 0 {
		o.SketchWidth = 1 << 16
	}
	return o
}

// A RowInit says how a row given to a new raw id starts: Std times
// N(0, 1) draws from a generator seeded by (Seed, id) (table.InitialRow), so
// that an id starts with the same values on every worker and after a
// restart, whichever row it gets. Each value is the float64 product
// draw·Std rounded once to the table's dtype. Std 0 starts rows at
// zeros; a negative or non-finite Std is an error (Check).
type RowInit struct {
	Seed uint64
	Std  float64
}

// Check returns an error wrapping gather.ErrOption, naming Std, if Std
// is negative or not finite.
func (init RowInit) Check() error {
	if !(init.Std >= 0 && init.Std <= math.MaxFloat64) {
		return fmt.Errorf("row init: Std %v must be finite and at least 0: %w", init.Std, errs.ErrOption)
	}
	return nil
}

// A HeldRow is a row of an id map held by an id: its last use was at
// step Last, and it was used in Uses steps since its id was admitted.
type HeldRow struct {
	Row, ID, Last int64
	Uses          uint32
}

// An IDMapState is an id map as it was read at one moment: its name, its
// options, the rows its ids held and its counts (cluster.IDMap.Snapshot),
// from which table.HeldIDMap makes a map in memory to serve or save.
type IDMapState struct {
	Name    string
	Options IDMapOptions
	Held    []HeldRow
	Stats   IDMapStats
}
