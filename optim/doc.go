// Package optim holds the optimisers of package nn's tables, in the shape
// of torch.optim: SparseSGD, SparseAdam (torch.optim.SparseAdam) and
// RowWiseAdagrad (FBGEMM's EXACT_ROWWISE_ADAGRAD), which update only the
// rows a batch touched from a RowGrad, and State, which saves and restores
// an optimiser's state with package checkpoint for an exact resume.
//
// An optimiser steps a table through nn's Embedding.Step, or directly:
//
//	g, _ := optim.RowGradient(ids, grad, vocab, -1)
//	adam := optim.NewSparseAdam(1e-3)
//	adam.Step(table, g)
//
// For several workers on a Redis Cluster, the sparse optimisers are
// ServerSteppers (a table.CacheOptions.Shared table's rows are stepped on
// the servers), and SharedDense keeps a model's dense learnables there,
// parameter-server style, the workers at most SharedOptions.Staleness
// steps apart.
//
// Errors wrap the sentinels of package gather (gather.ErrOption for a bad
// learning rate, ...), ErrOtherTable or ErrStale.
package optim
