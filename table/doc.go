// Package table holds where an embedding table's rows live when they do
// not live in the Go heap: a file larger than memory, behind a cache of
// its hot rows, or any Store.
//
// Create makes a table file, initialised as nn.NewEmbedding initialises a
// table; with WithState each row carries its optimiser's state beside its
// values, and OpenCached opens it behind a cache of rows that
// nn.CachedEmbedding trains:
//
//	opt := optim.NewRowWiseAdagrad(0.05)
//	table.Create("words.safetensors", "words", 100_000_000, 64, tensor.Float32, table.WithSeed(1), table.WithState(opt.Columns(64)...))
//	c, _ := table.OpenCached(ctx, "words.safetensors", table.CacheOptions{Budget: 4 << 30}, table.FileOptions{})
//	emb, _ := nn.CachedEmbedding(ctx, g, c)
//	defer emb.Close(ctx)
//
// A Cached table reads the rows a batch misses with concurrent positioned
// reads, prefetches the next batch's while the current one computes, and
// writes changed rows back through a journal, so that a crash leaves the
// table of the last Sync. NewCached puts the same cache in front of any
// Store, such as a MemoryStore, or a cluster.Store: a table on a Redis
// Cluster. Every call that reaches a store takes
// a context first and stops when it is done.
//
// Whatever holds a table's rows steps them by a rule (driver.Rule: an
// optimiser of package optim), with one method, Step, which applies the
// rule to the rows a gradient names and counts the step: Cached.Step in
// the cache (rounding a half table's values and marking the rows for
// write-back), MemoryStore.Step under its lock, cluster.Store.Step on the
// cluster's servers (each row's update atomic and applied exactly once,
// by the rule's Lua encoding, cluster.RegisterRule). A store that steps its
// own rows lets several workers train one table (CacheOptions.Shared).
// The package knows no optimiser: a row's state is Columns, which the
// rule names, and a server's update the encoding its package registers.
//
// A table knows its Schema once opened (its name, rows, values, Format
// and state), from its file's metadata (LayoutKey), the cluster's record
// or the store it was made of: callers do not pass it again.
//
// A half-precision table (Create with WithHalf, NewHalfMemoryStore)
// stores two bytes a value, float16 or bfloat16, its optimiser state in
// float32. Its cache holds the values as float32, which the graph reads
// and the optimiser steps; each row a step changes is then rounded back
// to the format by Step, stochastically by default, so that
// updates smaller than the format's spacing survive on average.
//
// What a cache needs of a store beyond its rows it finds by assertion,
// as database/sql finds a driver's optional interfaces: a store that
// steps its own rows (driver.Stepper) can back a Shared cache. An id map
// that lives beside a store's rows (a StoreMapper) starts the rows it
// gives there and returns the rows it read (MapRead), whose copies the
// cache forgets (Cached.Forget).
//
// A Mapper maps raw 64-bit ids to the rows of a table of a fixed size,
// admitting and evicting ids. IDMap holds the map in memory;
// Cached.Reset and InitialRows start the rows it gives afresh (nn.RawIDs
// does both). It is a checkpoint.Part, and ReadIDMap reads one back from
// a checkpoint, options and all; FileOptions.IDMap keeps one in a table
// file's own rows instead, committed with each Sync. A StoreMapper
// (cluster.IDMap) keeps the map beside its store's rows, shared by every
// worker, and starts the rows it gives there.
//
// Open maps a table file without state read-write instead, for
// nn.OpenEmbedding: simpler, but each new row is a page fault, and a crash
// between syncs leaves rows of different steps.
//
// Errors wrap the sentinels of package gather (gather.ErrShape, ...), checkpoint.ErrFormat for a
// malformed file, checkpoint.ErrMismatch for a file that is not the table
// asked for, or this package's ErrClosed, ErrInUse, ErrCapacity,
// ErrJournal (a journal beside a table file that is not its own),
// and ErrJournalFull.
package table
