package driver

import "context"

// A Store holds every row of a table: each row's values and, beside them,
// its optimiser state (table.WithState), RowBytes bytes in all, little-endian,
// as its Schema says. A table.Cached keeps the hot rows of a Store in
// memory. table.MemoryStore holds the rows in memory, cluster.Store on a Redis
// Cluster; table.OpenCached keeps a file's rows in a store of its own. A store
// with more to offer says so by implementing more methods, found by
// assertion: one that steps its own rows (Stepper, as table.MemoryStore
// and cluster.Store do) can back a Shared cache, one that keeps the workers'
// clocks (cluster.Store) an optim.SharedDense of several workers.
//
// A read or write stops when ctx is done and returns an error wrapping
// ctx.Err().
type Store interface {
	Schema() Schema
	RowBytes() int                                                // the size of a row
	Rows() int64                                                  // the number of rows; ids lie in [0, Rows())
	ReadRows(ctx context.Context, ids []int64, dst []byte) error  // row k into dst[k*RowBytes():]
	WriteRows(ctx context.Context, ids []int64, src []byte) error // row k from src[k*RowBytes():]
}

// A GroupStep is one table's part of a GroupStepper's step: its store,
// the rule and the gradient of its rows.
type GroupStep struct {
	Store Store
	Rule  Rule
	Grad  *RowGrad
}

// A GroupStepper is a store that steps several tables of its kind
// together, each as its own Step would, in fewer round trips than a Step
// each: cluster.Store, one pipelined round trip per master for all of
// them. StepTables is given its own store among the others.
type GroupStepper interface {
	StepTables(ctx context.Context, steps []GroupStep) error
}
