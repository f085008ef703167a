// Package optim holds the optimisers of package nn's tables, in the shape
// of torch.optim, and of a model's dense learnables.
//
// A sparse optimiser (Sparse) is a row rule: the state each row carries
// beside its values (Columns), its update of the rows a RowGrad names
// (StepRows), and the same update as a store applies it on its servers
// (ServerRule). SparseSGD, SparseAdam (torch.optim.SparseAdam),
// SparseAdagrad (torch.optim.Adagrad on a sparse gradient) and
// RowWiseAdagrad (FBGEMM's EXACT_ROWWISE_ADAGRAD) are Sparse. An
// optimiser keeps no state of its own: the table keeps it, per row, with
// one step count, wherever its rows live (an nn.Embedding in memory or
// mapped from a file, a table.Cached, a Redis Cluster), and State saves
// and restores it with package checkpoint for an exact resume. An
// optimiser steps a table through nn's Embedding.Step, or a tensor
// directly through a Table:
//
//	g, _ := optim.RowGradient(ids, grad, vocab, -1)
//	adam := optim.NewSparseAdam(1e-3)
//	tab, _ := optim.NewTable(weights, adam)
//	tab.Step(adam, g)
//
// Each rule is written once in Go (its kernel) and once in Lua
// (lua/<name>.lua, which a table.RedisStore runs on its servers), to the
// same bits on float32 rows. SharedDense keeps a model's dense
// learnables on a Redis Cluster, parameter-server style, the workers at
// most SharedOptions.Staleness steps apart.
//
// Errors wrap the sentinels of package gather (gather.ErrOption for a bad
// learning rate, ...), ErrNotFinite or ErrStale.
package optim
