// Package nn holds the training pieces built on package gather's ops, in
// the shape of their PyTorch counterparts:
//
//   - Embedding (nn.Embedding): a learnable [vocab, dim] table looked up by
//     Gather, with padding (EmbeddingPadding), frozen (EmbeddingFrozen) and
//     row-sparse (EmbeddingSparse) modes.
//   - RowGrad, RowGradient: a table's gradient held as the rows a batch
//     touched, and SparseSGD and SparseAdam (torch.optim.SparseAdam), which
//     update only those rows.
//   - CrossEntropy (F.cross_entropy) and NLLLoss (F.nll_loss) with mean
//     reduction over integer targets; NLLLoss is a GatherElements.
//
// Errors wrap the sentinels of package gather (gather.ErrShape, ...); an
// id or target out of range is a *gather.IndexError.
package nn
