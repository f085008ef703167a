package gather

import "github.com/gathergrad/gather/internal/operand"

// A GatherOption changes how Gather builds its node. Every option is part
// of the op's identity, so two nodes that differ in any option are never
// merged by Gorgonia's hash-consing. The With functions make them; the
// method's parameter is an internal type, so no other package does.
type GatherOption interface {
	ApplyGather(*operand.Config)
}

// An Option changes how Gather or GatherElements builds its node: it is a
// GatherOption too. The options of Gather alone (WithPaddingIndex,
// WithScaleGradByFreq) are GatherOptions only, so that giving one to
// GatherElements does not compile.
type Option interface {
	GatherOption
	ApplyElements(*operand.Config)
}

// option applies to both ops; gatherOption to Gather alone.
type (
	option       = operand.Func
	gatherOption = operand.GatherFunc
)

type config = operand.Config

func gatherConfig(opts []GatherOption) config {
	c := config{GradScale: 1}
	for _, o := range opts {
		o.ApplyGather(&c)
	}
	return c
}

func elementsConfig(opts []Option) config {
	c := config{GradScale: 1}
	for _, o := range opts {
		o.ApplyElements(&c)
	}
	return c
}

// WithGradScale multiplies the gradient that flows back to data by c: the
// forward result is unchanged, and data receives c times the gradient of a
// plain Gather. c = 0 sends zeros; WithoutGrad sends nothing at all.
func WithGradScale(c float64) Option { return option(func(cfg *config) { cfg.GradScale = c }) }

// WithoutGrad makes the op non-differentiable with respect to data, for a
// frozen table such as a pretrained embedding (PyTorch's
// requires_grad=False). gorgonia.Grad then sends data no gradient through
// this op.
func WithoutGrad() Option { return option(func(cfg *config) { cfg.NoGrad = true }) }

// WithPaddingIndex makes index i a padding index for Gather (PyTorch's
// padding_idx): the slice of data it selects along axis receives no
// gradient, so a padding row of an embedding table never changes. The
// forward result is unchanged. i lies in [-s, s-1] for an axis of size s.
// It is a GatherOption: GatherElements does not take it.
func WithPaddingIndex(i int) GatherOption {
	return gatherOption(func(cfg *config) { cfg.HasPad, cfg.Pad = true, i })
}

// WithScaleGradByFreq divides the gradient Gather sends to each slice of
// data by the number of times its index occurs in the indices (PyTorch's
// scale_grad_by_freq): a frequent id moves no faster than a rare one. It
// is a GatherOption: GatherElements does not take it.
func WithScaleGradByFreq() GatherOption {
	return gatherOption(func(cfg *config) { cfg.ScaleByFreq = true })
}

// WithName names the node the op is applied to, as gorgonia.ApplyOpWithName
// does; an *IndexError of the node carries the name.
func WithName(name string) Option { return option(func(cfg *config) { cfg.Name = name }) }
