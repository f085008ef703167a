// Package optim holds the optimisers of package nn's tables, in the shape
// of torch.optim, and of a model's dense learnables.
//
// A sparse optimiser (Sparse, a driver.Rule) is a row rule: its name, the
// state each row carries beside its values (Columns), its update of the
// rows a RowGrad names (StepRows), and the checks of that update for a
// store that applies it on its servers (Check). SparseSGD, SparseAdam (torch.optim.SparseAdam),
// SparseAdagrad (torch.optim.Adagrad on a sparse gradient) and
// RowWiseAdagrad (FBGEMM's EXACT_ROWWISE_ADAGRAD) are Sparse. An
// optimiser keeps no state of its own: the table keeps it, per row, with
// one step count, wherever its rows live, and whatever holds them steps
// them by it (driver.Stepper): a MemoryTable (an nn.Embedding in memory or
// mapped from a file, or a tensor stepped directly), a table.Cached, a
// table.MemoryStore, a cluster.Store. State saves and restores it
// with package checkpoint for an exact resume.
//
//	g, _ := optim.RowGradient(ids, grad, vocab, -1)
//	adam := optim.NewSparseAdam(1e-3)
//	tab, _ := optim.NewMemoryTable(weights, adam)
//	tab.Step(ctx, adam, g)
//
// Each rule is written once in Go (its kernel) and once in Lua
// (optim/clusterlua/lua/<name>.lua, registered with package cluster by
// importing optim/clusterlua), to the same bits on float32 rows. A new
// rule is three files: its type, its kernel, its Lua. SharedDense keeps
// a model's dense learnables in a store that steps its rows (a Redis
// Cluster, parameter-server style, the workers at most
// SharedOptions.Staleness steps apart).
//
// Errors wrap the sentinels of package gather (gather.ErrOption for a bad
// learning rate, ...), ErrNotFinite or ErrStale.
package optim
