package nn

import (
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
	"github.com/gathergrad/gather/internal/shapes"
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
	o := &batchDotOp{dtype: dt, n: bs[0], k: bs[1], d: bs[2], f: operand.PickFloat(dt, &batchDot32, &batchDot64)}
	o.shapes = [3]tensor.Shape{{o.n, o.d}, {o.n, o.k, o.d}, {o.n, o.k}}
	in := []hm.Type{operand.Type(2, dt), operand.Type(3, dt)}
	o.Diff = opkit.NewDiff(opkit.Sig{Name: fmt.Sprintf("BatchDot{%d, %d, %d}", o.n, o.k, o.d), In: in, Dtype: dt,
		Shape: tensor.Shape{o.n, o.k}}, opBatchDot, []tensor.Shape{as, bs}, o.runGrad)
	return opkit.Apply(opBatchDot, o, a, b)
}

// batchDotOp is the op of BatchDot: a [n, d] and b [n, k, d] in, [n, k] out.
type batchDotOp struct {
	opkit.Diff
	dtype   tensor.Dtype
	n, k, d int
	f       *batchDotKernels // the loops for dtype
	shapes  [3]tensor.Shape  // a, b and the output: made once, as a run checks them
}

// args reads and checks a and b.
func (o *batchDotOp) args(in []gorgonia.Value, want int) (a, b *tensor.Dense, err error) {
	if err := operand.CheckArity(opBatchDot, "", len(in), want); err != nil {
		return nil, nil, err
	}
	if a, err = operand.Read(opBatchDot, "a", in[0]); err != nil {
		return nil, nil, err
	}
	if b, err = operand.Read(opBatchDot, "b", in[1]); err != nil {
		return nil, nil, err
	}
	if a.Dtype() != o.dtype || b.Dtype() != o.dtype || !shapes.SameShape(a.Shape(), []int{o.n, o.d}) || !shapes.SameShape(b.Shape(), []int{o.n, o.k, o.d}) {
		return nil, nil, fmt.Errorf("%s: a is %v of shape %v and b %v of shape %v, want %v of shapes (%d, %d) and (%d, %d, %d): %w",
			opBatchDot, a.Dtype(), a.Shape(), b.Dtype(), b.Shape(), o.dtype, o.n, o.d, o.n, o.k, o.d, gather.ErrShape)
	}
	return a, b, nil
}

// Do computes the dot products into a new tensor.
func (o *batchDotOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	return o.UsePreallocDo(nil, in...)
}

// UsePreallocDo computes the dot products into prealloc when it can hold
// them (see operand.Prealloc), else into a new tensor.
func (o *batchDotOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	a, b, err := o.args(in, 2)
	if err != nil {
		return nil, err
	}
	if o.n*o.k == 0 {
		return tensor.New(tensor.Of(o.dtype), tensor.WithShape(o.n, o.k)), nil
	}
	out := operand.Prealloc(prealloc, o.dtype, o.shapes[2], in)
	o.f.dot(out, a, b, o.k, o.d)
	return out, nil
}

// runGrad returns the Run of the gradient of a (wrt 0) or of b (wrt 1),
// from a, b and the upstream gradient: it writes (or with add, adds) the
// gradient into dst after checking every argument, so that dst is
// untouched on error.
func (o *batchDotOp) runGrad(wrt int) opkit.Run {
	return func(dst *tensor.Dense, add bool, in []gorgonia.Value) error {
		return o.grad(wrt, dst, add, in)
	}
}

func (o *batchDotOp) grad(wrt int, dst *tensor.Dense, add bool, in []gorgonia.Value) error {
	want := o.shapes[wrt]
	if dst.Dtype() != o.dtype || !shapes.SameShape(dst.Shape(), want) || !shapes.Writable(dst) {
		return fmt.Errorf("%s gradient: destination is %v of shape %v, want a row-major %v tensor of shape %v: %w",
			opBatchDot, dst.Dtype(), dst.Shape(), o.dtype, want, gather.ErrShape)
	}
	a, b, err := o.args(in, 3)
	if err != nil {
		return err
	}
	g, err := operand.Read(opBatchDot, "upstream gradient", in[2])
	if err != nil {
		return err
	}
	if g.Dtype() != o.dtype || !shapes.SameShape(g.Shape(), o.shapes[2]) {
		return fmt.Errorf("%s gradient: upstream gradient is %v of shape %v, want %v of shape (%d, %d): %w",
			opBatchDot, g.Dtype(), g.Shape(), o.dtype, o.n, o.k, gather.ErrShape)
	}
	if dst.Shape().TotalSize() == 0 {
		return nil
	}
	o.f.grad(dst, a, b, g, o.k, o.d, wrt, add)
	return nil
}

var (
	_ gorgonia.SDOp = (*batchDotOp)(nil)
	_ gorgonia.ADOp = (*batchDotOp)(nil)
)

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
