package driver

import (
	"context"
)

// A Mapper gives raw 64-bit ids (user ids, item ids, hashed crosses) the
// rows of a table, as they come, and takes rows back as ids fade: table.IDMap
// holds the map in memory, cluster.IDMap on a Redis Cluster beside the
// table's rows. nn.RawIDs feeds an embedding through any Mapper.
type Mapper interface {
	// Name returns the map's name, its table's.
	Name() string
	// Rows returns how many rows the map hands out, [0, Rows()); ids it
	// has not admitted read row Rows(), the default row.
	Rows() int
	// Map sets rows[k] to the row of raw[k] at step (steps must not
	// decrease) and appends to assigned the rows it gave ids that did not
	// hold them, which start afresh.
	Map(ctx context.Context, raw, rows []int64, step int64, assigned []Assignment) ([]Assignment, error)
	// Forget takes back the rows of a, assignments of the last Map, whose
	// rows could not be started: their ids get rows anew at a later Map.
	Forget(ctx context.Context, a []Assignment) error
	// Stats returns what the map did so far.
	Stats(ctx context.Context) (IDMapStats, error)
}

// A StoreMapper is a Mapper that lives beside the rows of its store and
// starts the rows it gives there, from its RowInit, such as
// cluster.IDMap: the table it maps is read and stepped through a Shared
// table.Cached of that store (table.CheckMapper).
type StoreMapper interface {
	Mapper
	// Store returns the store whose rows the map gives.
	Store() Store
	// RowInit returns how the rows it gives start.
	RowInit() RowInit
	// MapRead is Map that also appends to read the rows whose values it
	// read beside the store's rows (those it gave, started or kept):
	// a cache's copies of them are stale (table.Cached.Forget), and the batch's
	// Fetch takes them from what the map read.
	MapRead(ctx context.Context, raw, rows []int64, step int64, assigned []Assignment, read []int64) ([]Assignment, []int64, error)
}
