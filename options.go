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
	if c.name != "" {
		s += fmt.Sprintf(", name=%q", c.name)
	}
	return s
}
