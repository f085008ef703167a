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
// of every pair i < j of the f+1 vectors (x first), row by row of the
// strict upper triangle, as facebookresearch/dlrm's interact_features
// builds it with torch.bmm and an index of the triangle:
//
//	T := cat([x, s], 1).view(n, f+1, d)
//	out = cat([x, (T @ T.transpose(1, 2))[:, i, j] for i < j], 1)
//
// For DLRM's 26 features of 16 columns: [n, 16] and [n, 416] in, [n, 367]
// out. x and s are float32 or float64, of one dtype. Gradients flow to
// both, in both of Gorgonia's machines. It is O(n·f²·d) forward and
// backward, and makes no [n, f+1, f+1] product.
func DotInteraction(x, s *gorgonia.Node) (*gorgonia.Node, error) {
	dt, err := floatPair(opInteract, "x", "s", x, s)
	if err != nil {
		return nil, err
	}
	xs, ss := x.Shape(), s.Shape()
	if len(xs) != 2 || len(ss) != 2 || xs[0] != ss[0] || xs[1] == 0 || ss[1]%xs[1] != 0 {
		return nil, fmt.Errorf("%s: x of shape %v and s of shape %v must be [n, d] and [n, f·d]: %w", opInteract, xs, ss, gather.ErrShape)
	}
	n, d, f := xs[0], xs[1], ss[1]/xs[1]
	o := newPairOp(opInteract, fmt.Sprintf("DotInteraction{%d, %d, %d}", n, d, f), [2]string{"x", "s"}, dt, xs, ss, tensor.Shape{n, d + (f+1)*f/2},
		func(out, x, s *tensor.Dense) {
			operand.PickFloat(dt, interact[float32], interact[float64])(out, x, s, n, d, f)
		},
		func(dst, x, s, g *tensor.Dense, wrt int, add bool) {
			operand.PickFloat(dt, interactGrad[float32], interactGrad[float64])(dst, x, s, g, n, d, f, wrt, add)
		})
	return opkit.Apply(opInteract, o, x, s)
}

func interact[T kernel.Float](out, x, s *tensor.Dense, n, d, f int) {
	kernel.DotInteract(operand.Floats[T](out), operand.Floats[T](x), operand.Floats[T](s), n, d, f)
}

func interactGrad[T kernel.Float](dst, x, s, g *tensor.Dense, n, d, f, wrt int, add bool) {
	fl := operand.Floats[T]
	kernel.DotInteractGrad(fl(dst), fl(x), fl(s), fl(g), n, d, f, wrt, add)
}
