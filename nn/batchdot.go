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

// opBatchDot names BatchDot in error messages.
const opBatchDot = "batch_dot"

// BatchDot returns the dot products of each row of a with the rows of b at
// the same batch position: a is [n, d], b is [n, k, d], and
//
//	out[i][j] = Σ_t a[i][t]·b[i][j][t]    out is [n, k]
//
// as torch.bmm(b, a.unsqueeze(2)).squeeze(2) computes it. It scores the
// pairs of two lookups, such as a word2vec centre word against its context
// and negative words:
//
//	centre, _ := in.Lookup(centreIDs)     // [n, d]
//	context, _ := out.Lookup(contextIDs)  // [n, k, d]
//	scores, _ := nn.BatchDot(centre, context)
//
// in one pass, where gorgonia.BatchedMatMul makes one small product per
// batch position. a and b are float32 or float64, of one dtype. Gradients
// flow to both, in both of Gorgonia's machines:
//
//	∂/∂a[i][t] = Σ_j g[i][j]·b[i][j][t]    ∂/∂b[i][j][t] = g[i][j]·a[i][t]
//
// Sums accumulate in the inputs' dtype, in order of t (of j for ∂a). It is
// O(n·k·d) forward and backward.
func BatchDot(a, b *gorgonia.Node) (*gorgonia.Node, error) {
	dt, err := floatPair(opBatchDot, "a", "b", a, b)
	if err != nil {
		return nil, err
	}
	as, bs := a.Shape(), b.Shape()
	if len(as) != 2 || len(bs) != 3 || as[0] != bs[0] || as[1] != bs[2] {
		return nil, fmt.Errorf("%s: a of shape %v and b of shape %v must be [n, d] and [n, k, d]: %w", opBatchDot, as, bs, gather.ErrShape)
	}
	n, k, d := bs[0], bs[1], bs[2]
	f := operand.PickFloat(dt, &batchDot32, &batchDot64)
	o := newPairOp(opBatchDot, fmt.Sprintf("BatchDot{%d, %d, %d}", n, k, d), [2]string{"a", "b"}, dt, as, bs, tensor.Shape{n, k},
		func(out, a, b *tensor.Dense) { f.dot(out, a, b, k, d) },
		func(dst, a, b, g *tensor.Dense, wrt int, add bool) { f.grad(dst, a, b, g, k, d, wrt, add) })
	return opkit.Apply(opBatchDot, o, a, b)
}

// opRowDot names RowDot in error messages.
const opRowDot = "row_dot"

// RowDot returns the dot product of each row of a with the same row of b:
// a and b are [n, d], and
//
//	out[i] = Σ_t a[i][t]·b[i][t]    out is [n]
//
// as (a * b).sum(1) computes it in PyTorch. It scores a batch of pairs of
// two lookups of one batch, such as the user and item factors of matrix
// factorisation:
//
//	u, _ := users.Lookup(userIDs) // [n, d]
//	v, _ := items.Lookup(itemIDs) // [n, d]
//	score, _ := nn.RowDot(u, v)   // [n]
//
// a and b are float32 or float64, of one dtype. Gradients flow to both,
// in both of Gorgonia's machines: ∂/∂a[i] = g[i]·b[i], ∂/∂b[i] = g[i]·a[i].
// It is BatchDot with one row of b per row of a: O(n·d) forward and
// backward.
func RowDot(a, b *gorgonia.Node) (*gorgonia.Node, error) {
	dt, err := floatPair(opRowDot, "a", "b", a, b)
	if err != nil {
		return nil, err
	}
	as, bs := a.Shape(), b.Shape()
	if len(as) != 2 || !operand.SameShape(as, bs) {
		return nil, fmt.Errorf("%s: a of shape %v and b of shape %v must both be [n, d]: %w", opRowDot, as, bs, gather.ErrShape)
	}
	n, d := as[0], as[1]
	f := operand.PickFloat(dt, &batchDot32, &batchDot64)
	o := newPairOp(opRowDot, fmt.Sprintf("RowDot{%d, %d}", n, d), [2]string{"a", "b"}, dt, as, bs, tensor.Shape{n},
		func(out, a, b *tensor.Dense) { f.dot(out, a, b, 1, d) },
		func(dst, a, b, g *tensor.Dense, wrt int, add bool) { f.grad(dst, a, b, g, 1, d, wrt, add) })
	return opkit.Apply(opRowDot, o, a, b)
}

// batchDotKernels are BatchDot's loops for one dtype, chosen when the op
// is built.
type batchDotKernels struct {
	dot  func(out, a, b *tensor.Dense, k, d int)
	grad func(dst, a, b, g *tensor.Dense, k, d, wrt int, add bool)
}

// The loops for float32 and float64 values, made once.
var batchDot32, batchDot64 = batchDotKernelsOf[float32](), batchDotKernelsOf[float64]()

// batchDotKernelsOf returns the loops for values of Go type T.
func batchDotKernelsOf[T kernel.Float]() batchDotKernels {
	f := operand.Floats[T]
	return batchDotKernels{
		dot: func(out, a, b *tensor.Dense, k, d int) { kernel.BatchDot(f(out), f(a), f(b), k, d) },
		grad: func(dst, a, b, g *tensor.Dense, k, d, wrt int, add bool) {
			kernel.BatchDotGrad(f(dst), f(a), f(b), f(g), k, d, wrt, add)
		},
	}
}
