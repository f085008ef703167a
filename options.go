package gather

import "github.com/gathergrad/gather/internal/dense"

// An Option changes how Gather or GatherElements builds its node. Every
// option is part of the op's identity, so two nodes that differ in any
// option are never merged by Gorgonia's hash-consing.
type Option func(*config)

type config = dense.Config

func newConfig(opts []Option) config {
	c := config{GradScale: 1}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithGradScale multiplies the gradient that flows back to data by c
// (LabVIEW's "lda coeff"). The forward result is unchanged.
func WithGradScale(c float64) Option { return func(cfg *config) { cfg.GradScale = c } }

// WithoutGrad makes the op non-differentiable with respect to data, for a
// frozen table such as a pretrained embedding (LabVIEW's "training?" =
// false). gorgonia.Grad then sends data no gradient through this op.
func WithoutGrad() Option { return func(cfg *config) { cfg.NoGrad = true } }

// WithPaddingIndex makes index i a padding index for Gather (PyTorch's
// padding_idx): the slice of data it selects along axis receives no
// gradient, so a padding row of an embedding table never changes. The
// forward result is unchanged. i lies in [-s, s-1] for an axis of size s;
// GatherElements does not accept this option.
func WithPaddingIndex(i int) Option { return func(cfg *config) { cfg.HasPad, cfg.Pad = true, i } }

// WithScaleGradByFreq divides the gradient Gather sends to each slice of
// data by the number of times its index occurs in the indices (PyTorch's
// scale_grad_by_freq): a frequent id moves no faster than a rare one.
// GatherElements does not accept this option.
func WithScaleGradByFreq() Option { return func(cfg *config) { cfg.ScaleByFreq = true } }

// WithName names the node the op is applied to, as gorgonia.ApplyOpWithName
// does; an *IndexError of the node carries the name.
func WithName(name string) Option { return func(cfg *config) { cfg.Name = name } }

// WithLayer makes the op's index errors name the layer it serves rather
// than the op: an index out of range is an *IndexError with Op op, Name
// name and Arg arg, printed as
//
//	embedding "words": ids[1] = 9 is out of range [-5, 4] for axis 0 of size 5
//
// Package nn gives it to the Gather of each lookup, so that with two tables
// of one vocabulary a user can tell which lookup failed.
func WithLayer(op, name, arg string) Option {
	return func(cfg *config) { cfg.Layer = label{Op: op, Name: name, Arg: arg} }
}
