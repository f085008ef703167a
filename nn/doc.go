// Package nn holds the training pieces built on package gather's ops, in
// the shape of their PyTorch counterparts:
//
//   - Embedding (nn.Embedding): a learnable [vocab, dim] table looked up by
//     Gather, with padding (EmbeddingPadding), frozen (EmbeddingFrozen),
//     row-sparse (EmbeddingSparse), max-norm (EmbeddingMaxNorm) and
//     frequency-scaled (EmbeddingScaleGradByFreq) modes.
//
//   - EmbeddingBag (F.embedding_bag) and (*Embedding).Bag: pooled lookups
//     of bags of ids, sum, mean or max, with per-sample weights,
//     IncludeLastOffset, and PackBags for batches whose length varies.
//
//   - RowGrad, RowGradient: a table's gradient held as the rows a batch
//     touched, and SparseSGD, SparseAdam (torch.optim.SparseAdam) and
//     RowWiseAdagrad, which update only those rows; OptimizerState saves
//     and loads an optimiser's state with package checkpoint.
//
//   - BatchDot: the dot products of each row of one lookup with the rows
//     of another, as word2vec's skip-gram scores them.
//
//   - CrossEntropy (F.cross_entropy), NLLLoss (F.nll_loss) and
//     BCEWithLogits (F.binary_cross_entropy_with_logits), with PyTorch's
//     reductions (WithReduction), IgnoreIndex, ClassWeights,
//     LabelSmoothing and PosWeight.
//
//   - CreateTable, OpenEmbedding: a table in a file, mapped into memory,
//     which may be larger than memory.
//
//   - ReadVectors, WriteVectors, EmbeddingWeights: word vectors in
//     word2vec, GloVe and fastText's text and binary formats, and a table
//     made from them (nn.Embedding.from_pretrained).
//
// Every option of the package is an Option; a function given an option it
// does not take returns an error. As in PyTorch, ids and targets lie in
// [0, vocab) (package gather's ops, which follow ONNX, also take negative
// indices).
//
// Errors wrap the sentinels of package gather (gather.ErrShape, ...) or
// this package's ErrOtherTable, ErrClosed and ErrInUse; an id or target
// out of range is a *gather.IndexError.
package nn
