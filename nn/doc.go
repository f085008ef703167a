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
//   - Linear (F.linear, weight [out, in]), Concat (torch.cat) and
//     LogSoftmax (F.log_softmax): the dense layers a model puts on top of
//     its pooled lookups, each one op with its gradient, where Gorgonia's
//     own ops copy transposes or walk elements one by one.
//
//   - CrossEntropy (F.cross_entropy), NLLLoss (F.nll_loss) and
//     BCEWithLogits (F.binary_cross_entropy_with_logits), with PyTorch's
//     reductions (WithReduction), WithIgnoreIndex, WithClassWeights,
//     WithLabelSmoothing and WithPosWeight.
//
// EmbeddingBag pools, without making the [n, dim] array of rows: bags are
// ids [bags, k] with nil offsets, or ids [n] with offsets [bags] (bag b is
// ids[offsets[b]:offsets[b+1]], the last to n; WithIncludeLastOffset takes
// offsets [bags+1], the CSR layout); an empty bag pools to zeros. Weights
// are nil or shaped like ids: sum Σ wᵢ·rowᵢ, mean (1/m)·Σ wᵢ·rowᵢ (m the
// ids that are not padding), max the elementwise max of wᵢ·rowᵢ. Padding
// ids are neither pooled nor counted, and their row gets no gradient. The
// gradients reach the table and the weights in both machines (max sends
// each element's to the bag's first maximum), bit-identical for any
// GOMAXPROCS.
//
// The losses are PyTorch 1.13's: WithReduction (ReduceNone gives a loss
// per example, shaped like the targets), WithIgnoreIndex (no default:
// without it every target must lie in [0, C)), WithClassWeights (the mean
// divides by the sum of the counted targets' weights), WithLabelSmoothing
// (combined with weights as 1.13 does) and WithPosWeight (a [C] vector
// for the last axis). All targets ignored under the mean give NaN, as in
// PyTorch; BCEWithLogits is finite for logits of any size.
//
// Options are named With*, as PyTorch's keyword arguments are: each
// function takes its own option type (NewEmbeddingOption, OpenOption,
// EmbeddingBagOption, BagOption, CrossEntropyOption, ...), and each With
// function returns the type of the functions it applies to, so an option
// given where it does not apply (WithSparse to a bag) does not compile. As in
// PyTorch, ids and targets lie in [0, vocab) (package gather's ops, which
// follow ONNX, also take negative indices).
//
// Errors wrap the sentinels of package gather (gather.ErrShape, ...), or
// table.ErrClosed for a file table used after Close; an id or target out
// of range is a *gather.IndexError.
package nn
