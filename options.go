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
	layer     label   // WithLayer: how errors name the layer; op "" for none
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

// WithName names the node the op is applied to, as gorgonia.ApplyOpWithName
// does; an *IndexError of the node carries the name.
func WithName(name string) Option { return func(cfg *config) { cfg.name = name } }

// WithLayer makes the op's index errors name the layer it serves rather
// than the op: an index out of range is an *IndexError with Op op, Name
// name and Arg arg, printed as
//
//	embedding "words": ids[1] = 9 is out of range [-5, 4] for axis 0 of size 5
//
// Package nn gives it to the Gather of each lookup, so that with two tables
// of one vocabulary a user can tell which lookup failed.
func WithLayer(op, name, arg string) Option {
	return func(cfg *config) { cfg.layer = label{op: op, name: name, arg: arg} }
}

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
	if c.layer.op != "" {
		s += fmt.Sprintf(", layer=%s %q %s", c.layer.op, c.layer.name, c.layer.arg)
	}
	return s
}
