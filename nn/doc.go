// Package nn holds the layers and losses built on package gather's ops, in
// the shape of their torch.nn counterparts:
//
//   - Embedding (nn.Embedding): a learnable [vocab, dim] table looked up by
//     Gather, with padding (WithPadding), frozen (WithFrozen), row-sparse
//     (WithSparse), max-norm (WithMaxNorm) and frequency-scaled
//     (WithScaleGradByFreq) modes, made from pretrained vectors with
//     WithWeights (nn.Embedding.from_pretrained), or mapped from a file
//     with OpenEmbedding (package table makes the file).
//
//   - EmbeddingBag (F.embedding_bag) and (*Embedding).Bag: pooled lookups
//     of bags of ids, sum, mean or max, with per-sample weights,
//     WithIncludeLastOffset, and PackBags for batches whose length varies.
//
//   - (*Embedding).Step and RowGrad: a sparse table's gradient held as the
//     rows a batch touched (an optim.RowGrad), handed to one of package
//     optim's sparse optimisers.
//
//   - BatchDot: the dot products of each row of one lookup with the rows
//     of another, as word2vec's skip-gram scores them.
//
//   - CrossEntropy (F.cross_entropy), NLLLoss (F.nll_loss) and
//     BCEWithLogits (F.binary_cross_entropy_with_logits), with PyTorch's
//     reductions (WithReduction), WithIgnoreIndex, WithClassWeights,
//     WithLabelSmoothing and WithPosWeight.
//
// Options are named With*, as PyTorch's keyword arguments are: tables and
// their lookups take EmbeddingOptions, losses LossOptions, so one of a
// loss given to a table does not compile; an option of the right kind that
// a function does not take (WithSparse for a bag) is an error. As in
// PyTorch, ids and targets lie in [0, vocab) (package gather's ops, which
// follow ONNX, also take negative indices).
//
// Errors wrap the sentinels of package gather (gather.ErrShape, ...), or
// table.ErrClosed for a file table used after Close; an id or target out
// of range is a *gather.IndexError.
package nn
