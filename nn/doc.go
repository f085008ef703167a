// Package nn holds the training pieces built on package gather's ops, in
// the shape of their PyTorch counterparts:
//
//   - Embedding (nn.Embedding): a learnable [vocab, dim] table looked up by
//     Gather, with padding (EmbeddingPadding), frozen (EmbeddingFrozen),
//     row-sparse (EmbeddingSparse), max-norm (EmbeddingMaxNorm) and
//     frequency-scaled (EmbeddingScaleGradByFreq) modes.
//   - EmbeddingBag (F.embedding_bag) and (*Embedding).Bag: pooled lookups
//     of bags of ids, sum, mean or max, with per-sample weights,
//     IncludeLastOffset, and PackBags for batches whose length varies.
//   - RowGrad, RowGradient: a table's gradient held as the rows a batch
//     touched, and SparseSGD and SparseAdam (torch.optim.SparseAdam), which
//     update only those rows.
//   - CrossEntropy (F.cross_entropy), NLLLoss (F.nll_loss) and
//     BCEWithLogits (F.binary_cross_entropy_with_logits), with PyTorch's
//     reductions (WithReduction), IgnoreIndex, ClassWeights,
//     LabelSmoothing and PosWeight.
//
// Every option of the package is an Option; a function given an option it
// does not take returns an error. As in PyTorch, ids and targets lie in
// [0, vocab) (package gather's ops, which follow ONNX, also take negative
// indices).
//
// Errors wrap the sentinels of package gather (gather.ErrShape, ...); an
// id or target out of range is a *gather.IndexError.
package nn
