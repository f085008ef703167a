package gather

import (
	"fmt"
	"strconv"
)

// An Option changes how Gather or GatherElements builds its node. Every
// option is part of the op's identity, so two nodes that differ in any
// option are never merged by Gorgonia's hash-consing.
type Option func(*config)

type config struct {
	gradScale float64 // multiplies the gradient sent to data
	noGrad    bool    // no gradient flows to data
	name      string  // node name; empty for Gorgonia's default
	hasPad    bool    // a padding index was given
	pad       int     // the padding index, normalised once the op is built
}

func newConfig(opts []Option) config {
	c := config{gradScale: 1}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithGradScale multiplies the gradient that flows back to data by c
// (LabVIEW's "lda coeff"). The forward result is unchanged.
func WithGradScale(c float64) Option { return func(cfg *config) { cfg.gradScale = c } }

// WithoutGrad makes the op non-differentiable with respect to data, for a
// frozen table such as a pretrained embedding (LabVIEW's "training?" =
// false). gorgonia.Grad then sends data no gradient through this op.
func WithoutGrad() Option { return func(cfg *config) { cfg.noGrad = true } }

// WithPaddingIndex makes index i a padding index for Gather (PyTorch's
// padding_idx): the slice of data it selects along axis receives no
// gradient, so a padding row of an embedding table never changes. The
// forward result is unchanged. i lies in [-s, s-1] for an axis of size s;
// GatherElements does not accept this option.
func WithPaddingIndex(i int) Option { return func(cfg *config) { cfg.hasPad, cfg.pad = true, i } }

// WithName names the node the op is applied to, as gorgonia.ApplyOpWithName does.
func WithName(name string) Option { return func(cfg *config) { cfg.name = name } }

// String lists the options that differ from the defaults, e.g. ", gradScale=2, noGrad".
func (c config) String() string {
	s := ""
	if c.gradScale != 1 {
		s += ", gradScale=" + strconv.FormatFloat(c.gradScale, 'g', -1, 64)
	}
	if c.noGrad {
		s += ", noGrad"
	}
	if c.hasPad {
		s += ", padding=" + strconv.Itoa(c.pad)
	}
	if c.name != "" {
		s += fmt.Sprintf(", name=%q", c.name)
	}
	return s
}
