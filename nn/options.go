package nn

import (
	"fmt"
	"math"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
)

// An Option changes how a function of this package builds its layer:
// NewEmbedding, EmbeddingBag and (*Embedding).Bag take Options, and each
// option's doc says which of them accept it. An option given to a function
// that does not accept it is an error wrapping gather.ErrOption, as are
// options that contradict each other. The zero Option is invalid.
type Option struct {
	kind optKind
	name string // the function that made it, for error messages
	set  func(*config)
}

// EmbeddingOption is the former name of Option.
//
// Deprecated: use Option.
type EmbeddingOption = Option

// optKind is one bit per option, so that a function can list the options
// it accepts in one mask.
type optKind uint32

const (
	optInit optKind = 1 << iota
	optSeed
	optPadding
	optFrozen
	optSparse
	optMaxNorm
	optFreq
	optIncludeLast
	optIgnoreIndex
	optClassWeights
	optSmoothing
	optReduction
	optPosWeight
	optWeights
)

// The options each function accepts.
const (
	forNewEmbedding = optInit | optSeed | optPadding | optFrozen | optSparse | optMaxNorm | optFreq | optWeights
	forEmbeddingBag = optPadding | optFrozen | optFreq | optIncludeLast
	forBagMethod    = optIncludeLast
	forCrossEntropy = optIgnoreIndex | optClassWeights | optSmoothing | optReduction
	forNLLLoss      = optIgnoreIndex | optClassWeights | optReduction
	forBCE          = optPosWeight | optReduction
)

// config is the options of one call, as the options set them.
type config struct {
	init    gorgonia.InitWFn // nil: N(0, 1) from seed
	weights tensor.Tensor    // EmbeddingWeights
	seed    uint64
	hasPad  bool
	pad     int // normalised to [0, vocab) once the table is known
	frozen  bool
	sparse  bool

	maxNorm float64 // 0 for none
	freq    bool    // scale gradients by id frequency

	includeLast bool // offsets hold bags+1 entries, the last the number of ids

	loss lossConfig // the losses' options

	given optKind // the options given
}

// newConfig applies opts for the function named fn (e.g. "NewEmbedding"),
// which accepts the options in allowed; prefix starts its error messages.
func newConfig(prefix, fn string, allowed optKind, opts []Option) (config, error) {
	var c config
	for k, o := range opts {
		if o.set == nil {
			return c, fmt.Errorf("%s: option %d is the zero Option: %w", prefix, k, gather.ErrOption)
		}
		if o.kind&allowed == 0 {
			return c, fmt.Errorf("%s: %s does not apply to %s: %w", prefix, o.name, fn, gather.ErrOption)
		}
		o.set(&c)
		c.given |= o.kind
	}
	switch {
	case c.frozen && c.sparse:
		return c, fmt.Errorf("%s: EmbeddingFrozen and EmbeddingSparse contradict each other: a frozen table has no gradient, sparse or dense: %w", prefix, gather.ErrOption)
	case c.given&optMaxNorm != 0 && !(c.maxNorm > 0 && !math.IsInf(c.maxNorm, 1)):
		return c, fmt.Errorf("%s: EmbeddingMaxNorm(%v): the norm must be positive and finite: %w", prefix, c.maxNorm, gather.ErrOption)
	case c.given&optSmoothing != 0 && !(c.loss.smoothing >= 0 && c.loss.smoothing <= 1):
		return c, fmt.Errorf("%s: LabelSmoothing(%v): the smoothing must lie in [0, 1]: %w", prefix, c.loss.smoothing, gather.ErrOption)
	case c.given&optReduction != 0 && (c.loss.reduction < ReduceMean || c.loss.reduction > ReduceNone):
		return c, fmt.Errorf("%s: WithReduction(%v): use ReduceMean, ReduceSum or ReduceNone: %w", prefix, c.loss.reduction, gather.ErrOption)
	case c.given&optWeights != 0 && c.given&(optInit|optSeed) != 0:
		return c, fmt.Errorf("%s: EmbeddingWeights gives the table its values; EmbeddingInit and EmbeddingSeed contradict it: %w", prefix, gather.ErrOption)
	case c.given&optWeights != 0 && c.weights == nil:
		return c, fmt.Errorf("%s: EmbeddingWeights(nil): %w", prefix, gather.ErrShape)
	case c.given&optInit != 0 && c.init == nil:
		return c, fmt.Errorf("%s: EmbeddingInit(nil): give an initialiser, or leave the option out for N(0, 1): %w", prefix, gather.ErrOption)
	}
	return c, nil
}

// EmbeddingInit sets the initialiser of the table: fn(dt, vocab, dim) must
// return a []float32 or []float64 (as dt says) of vocab×dim values,
// row-major. The default draws from N(0, 1), as PyTorch does, from a
// generator seeded by EmbeddingSeed. For NewEmbedding.
func EmbeddingInit(fn gorgonia.InitWFn) Option {
	return Option{optInit, "EmbeddingInit", func(c *config) { c.init = fn }}
}

// EmbeddingWeights starts the table as a copy of t, a [vocab, dim] tensor
// of the table's dtype (PyTorch's nn.Embedding.from_pretrained; add
// EmbeddingFrozen to keep it fixed, as from_pretrained's freeze=True
// does). As in PyTorch, a padding row keeps t's values rather than being
// zeroed; it still gets no gradient. t is not modified, and a t of another
// shape or dtype is an error. For NewEmbedding; it contradicts
// EmbeddingInit and EmbeddingSeed.
func EmbeddingWeights(t tensor.Tensor) Option {
	return Option{optWeights, "EmbeddingWeights", func(c *config) { c.weights = t }}
}

// EmbeddingSeed seeds the default initialiser. Without it the seed is 0, so
// a program builds the same table on every run; give each table of a
// model its own seed to make them differ. For NewEmbedding.
func EmbeddingSeed(seed uint64) Option {
	return Option{optSeed, "EmbeddingSeed", func(c *config) { c.seed = seed }}
}

// EmbeddingPadding makes id i a padding id (PyTorch's padding_idx): its row
// receives no gradient and a bag skips it (it is not pooled and not
// counted in a mean). NewEmbedding also starts the row at zero, so that it
// looks up as zeros. Negative i counts from the end of the vocabulary, as
// PyTorch's padding_idx does. For NewEmbedding and EmbeddingBag.
func EmbeddingPadding(i int) Option {
	return Option{optPadding, "EmbeddingPadding", func(c *config) { c.hasPad, c.pad = true, i }}
}

// EmbeddingFrozen makes the table constant (PyTorch's requires_grad=False,
// or from_pretrained's freeze=True): lookups and bags pass it no gradient
// and Learnables is empty. For NewEmbedding and EmbeddingBag; it
// contradicts EmbeddingSparse.
func EmbeddingFrozen() Option {
	return Option{optFrozen, "EmbeddingFrozen", func(c *config) { c.frozen = true }}
}

// EmbeddingSparse makes the table's gradient row-sparse (PyTorch's
// sparse=True): a training step costs O(batch × dim) instead of
// O(vocab × dim). The table is then not differentiated by gorgonia.Grad;
// the graph differentiates GradNodes instead, and Step hands the rows a
// run touched to a row-sparse optimiser (SparseSGD, SparseAdam). GradNodes
// go to gorgonia.Grad only: the dense solver and BindDualValues get the
// other learnables (RowGrad fails if a solver moved them):
//
//	gorgonia.Grad(loss, append(dense, emb.GradNodes()...)...)
//	vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(dense...))
//	adam := nn.NewSparseAdam(1e-3)
//	for ... {
//		vm.RunAll()
//		emb.Step(adam)                                 // the table's touched rows
//		solver.Step(gorgonia.NodesToValueGrads(dense)) // the rest
//		vm.Reset()
//	}
//
// For NewEmbedding; it contradicts EmbeddingFrozen.
func EmbeddingSparse() Option {
	return Option{optSparse, "EmbeddingSparse", func(c *config) { c.sparse = true }}
}

// EmbeddingMaxNorm makes every lookup and bag first rescale, in place,
// each row its ids name whose L2 norm exceeds maxNorm, by
// maxNorm/(norm+1e-7) (PyTorch's max_norm); the gradient is that of a
// lookup of the rescaled table. This is the one case in which running the
// graph changes the table. Several lookups of one table in one graph each
// read rescaled rows, whatever order they run in. maxNorm must be positive
// and finite. For NewEmbedding.
func EmbeddingMaxNorm(maxNorm float64) Option {
	return Option{optMaxNorm, "EmbeddingMaxNorm", func(c *config) { c.maxNorm = maxNorm }}
}

// EmbeddingScaleGradByFreq divides each row's gradient by the number of
// times its id occurs in the ids of that lookup or bag (PyTorch's
// scale_grad_by_freq), for lookups and for sum and mean bags; the padding
// row still gets none. It applies to dense and row-sparse gradients. For
// NewEmbedding and EmbeddingBag.
func EmbeddingScaleGradByFreq() Option {
	return Option{optFreq, "EmbeddingScaleGradByFreq", func(c *config) { c.freq = true }}
}

// IncludeLastOffset makes offsets hold one entry more than there are bags,
// the last equal to the number of ids, so that bag b is
// ids[offsets[b]:offsets[b+1]] for every b (PyTorch's
// include_last_offset=True, the CSR layout). For EmbeddingBag and
// (*Embedding).Bag, with offsets.
func IncludeLastOffset() Option {
	return Option{optIncludeLast, "IncludeLastOffset", func(c *config) { c.includeLast = true }}
}

// IgnoreIndex makes targets equal to i contribute nothing to the loss and
// its gradient, and leaves them out of the mean's count (PyTorch's
// ignore_index). i may lie outside [0, classes), as PyTorch's default -100
// does; without this option every target must lie in [0, classes). For
// CrossEntropy and NLLLoss.
func IgnoreIndex(i int) Option {
	return Option{optIgnoreIndex, "IgnoreIndex", func(c *config) { c.loss.hasIgnore, c.loss.ignore = true, int64(i) }}
}

// ClassWeights weighs each example's loss by w[target] (PyTorch's weight):
// w is a [classes] vector of the logits' dtype, copied when the loss is
// built. Under ReduceMean the loss is divided by the sum of the weights of
// the targets counted, not by their number, as PyTorch does. For
// CrossEntropy and NLLLoss.
func ClassWeights(w tensor.Tensor) Option {
	return Option{optClassWeights, "ClassWeights", func(c *config) { c.loss.weights, c.loss.hasWeights = w, true }}
}

// LabelSmoothing mixes the one-hot target with the uniform distribution
// over the classes: the loss is (1-eps) times the loss of the target plus
// eps/classes times the sum of the losses of every class (with
// ClassWeights, each class's weighted by its weight, and the mean divided
// as without smoothing), PyTorch 1.13's label_smoothing. eps lies in
// [0, 1]. For CrossEntropy.
func LabelSmoothing(eps float64) Option {
	return Option{optSmoothing, "LabelSmoothing", func(c *config) { c.loss.smoothing = eps }}
}

// A Reduction says how a loss combines the losses of its examples.
type Reduction int

// The reductions of the losses (PyTorch's reduction="mean", "sum",
// "none").
const (
	ReduceMean Reduction = iota // the mean over the examples counted (the default)
	ReduceSum                   // the sum
	ReduceNone                  // one loss per example, shaped like the targets
)

func (r Reduction) String() string {
	switch r {
	case ReduceMean:
		return "mean"
	case ReduceSum:
		return "sum"
	case ReduceNone:
		return "none"
	}
	return fmt.Sprintf("Reduction(%d)", int(r))
}

// WithReduction sets how a loss combines its examples' losses; the
// default is ReduceMean. For CrossEntropy, NLLLoss and BCEWithLogits.
func WithReduction(r Reduction) Option {
	return Option{optReduction, "WithReduction", func(c *config) { c.loss.reduction = r }}
}

// PosWeight weighs the positive part of each example's loss by w[j], j
// its position on the last axis (PyTorch's pos_weight): w is a [classes]
// vector of the logits' dtype, copied when the loss is built. For
// BCEWithLogits.
func PosWeight(w tensor.Tensor) Option {
	return Option{optPosWeight, "PosWeight", func(c *config) { c.loss.posWeight = w }}
}

// lossConfig holds the losses' options as given.
type lossConfig struct {
	reduction  Reduction
	hasIgnore  bool
	ignore     int64
	hasWeights bool
	weights    tensor.Tensor // ClassWeights
	smoothing  float64
	posWeight  tensor.Tensor
}
