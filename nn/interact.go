package nn

import (
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
)

// opInteract names DotInteraction in error messages.
const opInteract = "dot_interaction"

// DotInteraction returns DLRM's dot interaction of a dense vector and f
// pooled sparse vectors of the same width d per sample: x is [n, d] (the
// bottom MLP's output), s is [n, f·d] (a Collection's output, each
// feature d wide), and out is [n, d + (f+1)·f/2]: x, then the dot products
// of the pairs of the f+1 vectors v_0 = x, v_1..v_f (the features), in
// the order of facebookresearch/dlrm's interact_features: the strict
// lower triangle of [v_i·v_j] row by row, (1, 0), (2, 0), (2, 1), (3,
// 0)...:
//
//	T := cat([x, s], 1).view(n, f+1, d)
//	Z := T @ T.transpose(1, 2)
//	out = cat([x, Z[:, li, lj]], 1)   // li, lj: for i in range(f+1) for j in range(i)
//
// WithTorchRecOrder takes TorchRec's InteractionArch order instead: the
// strict upper triangle row by row, (0, 1), (0, 2), ..., (0, f), (1,
// 2)... (torch.triu_indices(f+1, f+1, 1)). The two agree for f ≤ 2; a
// model trained in one order predicts wrongly in the other.
//
// For DLRM's 26 features of 16 columns: [n, 16] and [n, 416] in, [n, 367]
// out. x and s are float32 or float64, of one dtype. Gradients flow to
// both, in both of Gorgonia's machines. It is O(n·f²·d) forward and
// backward, and makes no [n, f+1, f+1] product.
func DotInteraction(x, s *gorgonia.Node, opts ...InteractionOption) (*gorgonia.Node, error) {
	dt, err := floatPair(opInteract, "x", "s", x, s)
	if err != nil {
		return nil, err
	}
	var cfg interactConfig
	for _, o := range opts {
		o(&cfg)
	}
	lower := !cfg.torchRec
	xs, ss := x.Shape(), s.Shape()
	if len(xs) != 2 || len(ss) != 2 || xs[0] != ss[0] || xs[1] == 0 || ss[1]%xs[1] != 0 {
		return nil, fmt.Errorf("%s: x of shape %v and s of shape %v must be [n, d] and [n, f·d]: %w", opInteract, xs, ss, gather.ErrShape)
	}
	n, d, f := xs[0], xs[1], ss[1]/xs[1]
	order := "dlrm"
	if !lower {
		order = "torchrec"
	}
	o := newPairOp(opInteract, fmt.Sprintf("DotInteraction{%d, %d, %d, %s}", n, d, f, order), [2]string{"x", "s"}, dt, xs, ss, tensor.Shape{n, d + (f+1)*f/2},
		func(out, x, s *tensor.Dense) {
			operand.PickFloat(dt, interact[float32], interact[float64])(out, x, s, n, d, f, lower)
		},
		func(dst, x, s, g *tensor.Dense, wrt int, add bool) {
			operand.PickFloat(dt, interactGrad[float32], interactGrad[float64])(dst, x, s, g, n, d, f, wrt, add, lower)
		})
	return opkit.Apply(opInteract, o, x, s)
}

// An InteractionOption configures DotInteraction.
type InteractionOption func(*interactConfig)

type interactConfig struct{ torchRec bool }

// WithTorchRecOrder orders DotInteraction's pairs as TorchRec's
// InteractionArch does (the upper triangle row by row), for a model
// trained with TorchRec.
func WithTorchRecOrder() InteractionOption { return func(c *interactConfig) { c.torchRec = true } }

func interact[T kernel.Float](out, x, s *tensor.Dense, n, d, f int, lower bool) {
	kernel.DotInteract(operand.Floats[T](out), operand.Floats[T](x), operand.Floats[T](s), n, d, f, lower)
}

func interactGrad[T kernel.Float](dst, x, s, g *tensor.Dense, n, d, f, wrt int, add, lower bool) {
	fl := operand.Floats[T]
	kernel.DotInteractGrad(fl(dst), fl(x), fl(s), fl(g), n, d, f, wrt, add, lower)
}
