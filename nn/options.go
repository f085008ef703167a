package nn

import (
	"fmt"
	"math"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
)

// Each function of this package that takes options takes its own option
// type, an interface, so that an option it does not apply does not
// compile: NewEmbeddingOption (NewEmbedding), OpenOption (OpenEmbedding,
// CachedEmbedding), EmbeddingBagOption (EmbeddingBag), BagOption
// ((*Embedding).Bag), CrossEntropyOption, NLLLossOption, BCEOption and
// MSEOption. Each With function returns the type of the functions it
// applies to: WithInit, WithSeed and WithWeights a NewEmbeddingOption;
// WithSparse and WithMaxNorm an EmbeddingOption (every Embedding
// constructor); WithPadding, WithFrozen and WithScaleGradByFreq a
// LookupOption (those and EmbeddingBag); WithIncludeLastOffset an
// OffsetsOption (EmbeddingBag and Bag); WithLabelSmoothing a
// CrossEntropyOption; WithIgnoreIndex and WithClassWeights a ClassOption
// (CrossEntropy, NLLLoss); WithPosWeight a BCEOption; WithReduction a
// LossOption (every loss). Options that contradict each other are errors
// wrapping gather.ErrOption, and so is a nil option.
type (
	NewEmbeddingOption interface{ newEmbedding() option }
	OpenOption         interface{ openEmbedding() option }
	EmbeddingBagOption interface{ embeddingBag() option }
	BagOption          interface{ bagMethod() option }
	CrossEntropyOption interface{ crossEntropy() option }
	NLLLossOption      interface{ nllLoss() option }
	BCEOption          interface{ bce() option }
	MSEOption          interface{ mse() option }

	// An EmbeddingOption applies to every constructor of an Embedding.
	EmbeddingOption interface {
		NewEmbeddingOption
		OpenOption
	}
	// A LookupOption applies to an Embedding's constructors and to
	// EmbeddingBag.
	LookupOption interface {
		EmbeddingOption
		EmbeddingBagOption
	}
	// An OffsetsOption applies to EmbeddingBag and (*Embedding).Bag.
	OffsetsOption interface {
		EmbeddingBagOption
		BagOption
	}
	// A ClassOption applies to CrossEntropy and NLLLoss.
	ClassOption interface {
		CrossEntropyOption
		NLLLossOption
	}
	// A LossOption applies to every loss.
	LossOption interface {
		ClassOption
		BCEOption
		MSEOption
	}
)

// option is what every option holds.
type option struct {
	kind optKind
	name string // the function that made it, for error messages
	set  func(*config)
}

// The options' dynamic types, one for each set of functions: each has
// the methods of the interfaces it satisfies and no others.
type (
	newOnly    struct{ o option }
	tableOpt   struct{ o option }
	lookupOpt  struct{ o option }
	offsetsOpt struct{ o option }
	smoothOpt  struct{ o option }
	classOpt   struct{ o option }
	posOpt     struct{ o option }
	reduceOpt  struct{ o option }
)

func (x newOnly) newEmbedding() option    { return x.o }
func (x tableOpt) newEmbedding() option   { return x.o }
func (x tableOpt) openEmbedding() option  { return x.o }
func (x lookupOpt) newEmbedding() option  { return x.o }
func (x lookupOpt) openEmbedding() option { return x.o }
func (x lookupOpt) embeddingBag() option  { return x.o }
func (x offsetsOpt) embeddingBag() option { return x.o }
func (x offsetsOpt) bagMethod() option    { return x.o }
func (x smoothOpt) crossEntropy() option  { return x.o }
func (x classOpt) crossEntropy() option   { return x.o }
func (x classOpt) nllLoss() option        { return x.o }
func (x posOpt) bce() option              { return x.o }
func (x reduceOpt) crossEntropy() option  { return x.o }
func (x reduceOpt) nllLoss() option       { return x.o }
func (x reduceOpt) bce() option           { return x.o }
func (x reduceOpt) mse() option           { return x.o }

// The getters newConfig reads each function's options by.
var (
	forNewEmbedding = func(o NewEmbeddingOption) option { return o.newEmbedding() }
	forOpen         = func(o OpenOption) option { return o.openEmbedding() }
	forEmbeddingBag = func(o EmbeddingBagOption) option { return o.embeddingBag() }
	forBagMethod    = func(o BagOption) option { return o.bagMethod() }
	forCrossEntropy = func(o CrossEntropyOption) option { return o.crossEntropy() }
	forNLLLoss      = func(o NLLLossOption) option { return o.nllLoss() }
	forBCE          = func(o BCEOption) option { return o.bce() }
	forMSE          = func(o MSEOption) option { return o.mse() }
)

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

// config is the options of one call, as the options set them.
type config struct {
	init    gorgonia.InitWFn // nil: N(0, 1) from seed
	weights tensor.Tensor    // WithWeights
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

// newConfig applies opts, read by get; prefix starts its error messages.
func newConfig[O comparable](prefix string, get func(O) option, opts []O) (config, error) {
	var c config
	var none O
	for k, oo := range opts {
		if oo == none {
			return c, fmt.Errorf("%s: option %d is nil: %w", prefix, k, gather.ErrOption)
		}
		o := get(oo)
		o.set(&c)
		c.given |= o.kind
	}
	switch {
	case c.frozen && c.sparse:
		return c, fmt.Errorf("%s: WithFrozen and WithSparse contradict each other: a frozen table has no gradient, sparse or dense: %w", prefix, gather.ErrOption)
	case c.given&optMaxNorm != 0 && !(c.maxNorm > 0 && !math.IsInf(c.maxNorm, 1)):
		return c, fmt.Errorf("%s: WithMaxNorm(%v): the norm must be positive and finite: %w", prefix, c.maxNorm, gather.ErrOption)
	case c.given&optSmoothing != 0 && !(c.loss.smoothing >= 0 && c.loss.smoothing <= 1):
		return c, fmt.Errorf("%s: WithLabelSmoothing(%v): the smoothing must lie in [0, 1]: %w", prefix, c.loss.smoothing, gather.ErrOption)
	case c.given&optReduction != 0 && (c.loss.reduction < ReduceMean || c.loss.reduction > ReduceNone):
		return c, fmt.Errorf("%s: WithReduction(%v): use ReduceMean, ReduceSum or ReduceNone: %w", prefix, c.loss.reduction, gather.ErrOption)
	case c.given&optWeights != 0 && c.given&(optInit|optSeed) != 0:
		return c, fmt.Errorf("%s: WithWeights gives the table its values; WithInit and WithSeed contradict it: %w", prefix, gather.ErrOption)
	case c.given&optWeights != 0 && c.weights == nil:
		return c, fmt.Errorf("%s: WithWeights(nil): %w", prefix, gather.ErrShape)
	case c.given&optInit != 0 && c.init == nil:
		return c, fmt.Errorf("%s: WithInit(nil): give an initialiser, or leave the option out for N(0, 1): %w", prefix, gather.ErrOption)
	}
	return c, nil
}

// WithInit sets the initialiser of the table: fn(dt, vocab, dim) must
// return a []float32 or []float64 (as dt says) of vocab×dim values,
// row-major. The default draws from N(0, 1), as PyTorch does, from a
// generator seeded by WithSeed. For NewEmbedding.
func WithInit(fn gorgonia.InitWFn) NewEmbeddingOption {
	return newOnly{option{optInit, "WithInit", func(c *config) { c.init = fn }}}
}

// WithWeights starts the table as a copy of t, a [vocab, dim] tensor
// of the table's dtype (PyTorch's nn.Embedding.from_pretrained; add
// WithFrozen to keep it fixed, as from_pretrained's freeze=True
// does). As in PyTorch, a padding row keeps t's values rather than being
// zeroed; it still gets no gradient. t is not modified, and a t of another
// shape or dtype is an error. For NewEmbedding; it contradicts
// WithInit and WithSeed.
func WithWeights(t tensor.Tensor) NewEmbeddingOption {
	return newOnly{option{optWeights, "WithWeights", func(c *config) { c.weights = t }}}
}

// WithSeed seeds the default initialiser. Without it the seed is 0, so
// a program builds the same table on every run; give each table of a
// model its own seed to make them differ. For NewEmbedding.
func WithSeed(seed uint64) NewEmbeddingOption {
	return newOnly{option{optSeed, "WithSeed", func(c *config) { c.seed = seed }}}
}

// WithPadding makes id i a padding id (PyTorch's padding_idx): its row
// receives no gradient and a bag skips it (it is not pooled and not
// counted in a mean). NewEmbedding also starts the row at zero, so that it
// looks up as zeros. Negative i counts from the end of the vocabulary, as
// PyTorch's padding_idx does. For NewEmbedding and EmbeddingBag.
func WithPadding(i int) LookupOption {
	return lookupOpt{option{optPadding, "WithPadding", func(c *config) { c.hasPad, c.pad = true, i }}}
}

// WithFrozen makes the table constant (PyTorch's requires_grad=False,
// or from_pretrained's freeze=True): lookups and bags pass it no gradient
// and Learnables is empty. For NewEmbedding and EmbeddingBag; it
// contradicts WithSparse.
func WithFrozen() LookupOption {
	return lookupOpt{option{optFrozen, "WithFrozen", func(c *config) { c.frozen = true }}}
}

// WithSparse makes the table's gradient row-sparse (PyTorch's
// sparse=True): a training step costs O(batch × dim) instead of
// O(vocab × dim). The table is then not differentiated by gorgonia.Grad;
// the graph differentiates GradNodes instead, and Step hands the rows a
// run touched to a row-sparse optimiser (optim.SparseSGD, optim.SparseAdam). GradNodes
// go to gorgonia.Grad only: the dense solver and machine.WithGrads (or a
// TapeMachine's BindDualValues) get the other learnables (RowGrad fails
// if a solver moved them):
//
//	gorgonia.Grad(loss, append(dense, emb.GradNodes()...)...)
//	vm, err := machine.New(g, machine.WithGrads(dense...))
//	adam := optim.NewSparseAdam(1e-3)
//	for ... {
//		vm.RunAll()
//		emb.Step(adam)                                 // the table's touched rows
//		solver.Step(gorgonia.NodesToValueGrads(dense)) // the rest
//		vm.Reset()
//	}
//
// For NewEmbedding; it contradicts WithFrozen.
func WithSparse() EmbeddingOption {
	return tableOpt{option{optSparse, "WithSparse", func(c *config) { c.sparse = true }}}
}

// WithMaxNorm makes every lookup and bag first rescale, in place,
// each row its ids name whose L2 norm exceeds maxNorm, by
// maxNorm/(norm+1e-7) (PyTorch's max_norm); the gradient is that of a
// lookup of the rescaled table. This is the one case in which running the
// graph changes the table. Several lookups of one table in one graph each
// read rescaled rows, whatever order they run in. maxNorm must be positive
// and finite. For NewEmbedding.
func WithMaxNorm(maxNorm float64) EmbeddingOption {
	return tableOpt{option{optMaxNorm, "WithMaxNorm", func(c *config) { c.maxNorm = maxNorm }}}
}

// WithScaleGradByFreq divides each row's gradient by the number of
// times its id occurs in the ids of that lookup or bag (PyTorch's
// scale_grad_by_freq), for lookups and for sum and mean bags; the padding
// row still gets none. It applies to dense and row-sparse gradients. For
// NewEmbedding and EmbeddingBag.
func WithScaleGradByFreq() LookupOption {
	return lookupOpt{option{optFreq, "WithScaleGradByFreq", func(c *config) { c.freq = true }}}
}

// WithIncludeLastOffset makes offsets hold one entry more than there are bags,
// the last equal to the number of ids, so that bag b is
// ids[offsets[b]:offsets[b+1]] for every b (PyTorch's
// include_last_offset=True, the CSR layout). For EmbeddingBag and
// (*Embedding).Bag, with offsets.
func WithIncludeLastOffset() OffsetsOption {
	return offsetsOpt{option{optIncludeLast, "WithIncludeLastOffset", func(c *config) { c.includeLast = true }}}
}

// WithIgnoreIndex makes targets equal to i contribute nothing to the loss and
// its gradient, and leaves them out of the mean's count (PyTorch's
// ignore_index). i may lie outside [0, classes), as PyTorch's default -100
// does; without this option every target must lie in [0, classes). For
// CrossEntropy and NLLLoss.
func WithIgnoreIndex(i int) ClassOption {
	return classOpt{option{optIgnoreIndex, "WithIgnoreIndex", func(c *config) { c.loss.hasIgnore, c.loss.ignore = true, int64(i) }}}
}

// WithClassWeights weighs each example's loss by w[target] (PyTorch's weight):
// w is a [classes] vector of the logits' dtype, copied when the loss is
// built. Under ReduceMean the loss is divided by the sum of the weights of
// the targets counted, not by their number, as PyTorch does. For
// CrossEntropy and NLLLoss.
func WithClassWeights(w tensor.Tensor) ClassOption {
	return classOpt{option{optClassWeights, "WithClassWeights", func(c *config) { c.loss.weights, c.loss.hasWeights = w, true }}}
}

// WithLabelSmoothing mixes the one-hot target with the uniform distribution
// over the classes: the loss is (1-eps) times the loss of the target plus
// eps/classes times the sum of the losses of every class (with
// WithClassWeights, each class's weighted by its weight, and the mean divided
// as without smoothing), PyTorch 1.13's label_smoothing. eps lies in
// [0, 1]. For CrossEntropy.
func WithLabelSmoothing(eps float64) CrossEntropyOption {
	return smoothOpt{option{optSmoothing, "WithLabelSmoothing", func(c *config) { c.loss.smoothing = eps }}}
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

// String returns "mean", "sum" or "none", PyTorch's names of the
// reductions.
func (r Reduction) String() string {
	if r >= ReduceMean && r <= ReduceNone {
		return [...]string{"mean", "sum", "none"}[r]
	}
	return fmt.Sprintf("Reduction(%d)", int(r))
}

// WithReduction sets how a loss combines its examples' losses; the
// default is ReduceMean. For CrossEntropy, NLLLoss and BCEWithLogits.
func WithReduction(r Reduction) LossOption {
	return reduceOpt{option{optReduction, "WithReduction", func(c *config) { c.loss.reduction = r }}}
}

// WithPosWeight weighs the positive part of each example's loss by w[j], j
// its position on the last axis (PyTorch's pos_weight): w is a [classes]
// vector of the logits' dtype, copied when the loss is built. For
// BCEWithLogits.
func WithPosWeight(w tensor.Tensor) BCEOption {
	return posOpt{option{optPosWeight, "WithPosWeight", func(c *config) { c.loss.posWeight = w }}}
}

// lossConfig holds the losses' options as given.
type lossConfig struct {
	reduction  Reduction
	hasIgnore  bool
	ignore     int64
	hasWeights bool
	weights    tensor.Tensor // WithClassWeights
	smoothing  float64
	posWeight  tensor.Tensor
}
