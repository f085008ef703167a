package nn

import (
	"fmt"

	"github.com/chewxy/hm"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
	"github.com/gathergrad/gather/internal/parallel"
)

// opLinear names Linear in error messages.
const opLinear = "linear"

// Linear returns x·Wᵀ + b, as torch.nn.functional.linear: x is [n, in],
// the weight w is [out, in] (PyTorch's layout, so a state dict's
// "<layer>.weight" loads as it is), the bias b is [out] or nil, and the
// result is [n, out]. Gradients flow to all three, in both of Gorgonia's
// machines:
//
//	∂x = g·W    ∂W = gᵀ·x    ∂b = Σ_rows g
//
// Its products are single BLAS calls with the operands transposed in
// place (the BLAS Gorgonia uses: the module's GEMM, or OpenBLAS after
// openblas.Use, or gonum's if a program sets it), where gorgonia.Mul's gradients build transposed copies;
// the bias is added in the same pass. All are float32 or float64, of one
// dtype.
func Linear(x, w, b *gorgonia.Node) (*gorgonia.Node, error) {
	dt, err := floatPair(opLinear, "x", "weight", x, w)
	if err != nil {
		return nil, err
	}
	xs, ws := x.Shape(), w.Shape()
	if len(xs) != 2 || len(ws) != 2 || xs[1] != ws[1] {
		return nil, fmt.Errorf("%s: x of shape %v and weight of shape %v must be [n, in] and [out, in]: %w", opLinear, xs, ws, gather.ErrShape)
	}
	o := &linearOp{dtype: dt, n: xs[0], in: xs[1], out: ws[0]}
	o.shapes = [4]tensor.Shape{{o.n, o.in}, {o.out, o.in}, {o.out}, {o.n, o.out}}
	ins := []hm.Type{operand.Type(2, dt), operand.Type(2, dt)}
	nodes := []*gorgonia.Node{x, w}
	if b != nil {
		if b.Dtype() != dt {
			return nil, fmt.Errorf("%s: bias is %v, x and weight %v: %w", opLinear, b.Dtype(), dt, gather.ErrDtype)
		}
		if !operand.SameShape(b.Shape(), []int{o.out}) {
			return nil, fmt.Errorf("%s: bias has shape %v, want (%d): %w", opLinear, b.Shape(), o.out, gather.ErrShape)
		}
		o.bias = true
		ins = append(ins, operand.Type(1, dt))
		nodes = append(nodes, b)
	}
	o.Diff = opkit.NewDiff(opkit.Sig{Name: fmt.Sprintf("Linear{%d, %d, %d, bias=%v}", o.n, o.in, o.out, o.bias), In: ins,
		Dtype: dt, Shape: tensor.Shape{o.n, o.out}}, opLinear, []tensor.Shape{{o.n, o.in}, {o.out, o.in}, {o.out}}, o.grad)
	return opkit.Apply(opLinear, o, nodes...)
}

// linearOp is the op of Linear: x [n, in], w [out, in] and, with bias, b
// [out] in, [n, out] out.
type linearOp struct {
	opkit.Diff
	dtype      tensor.Dtype
	n, in, out int
	bias       bool
	shapes     [4]tensor.Shape // x, w, b and y: made once, as a run checks them
}

// ONNX returns the op as ONNX's Gemm of x and wᵀ (and b).
func (o *linearOp) ONNX() (string, map[string]int64) { return "Gemm", map[string]int64{"transB": 1} }

// args reads and checks x, w and b (nil without a bias).
func (o *linearOp) args(in []gorgonia.Value, want int) (x, w, b *tensor.Dense, err error) {
	if err := operand.CheckArity(opLinear, "", len(in), want); err != nil {
		return nil, nil, nil, err
	}
	if x, err = readShaped(opLinear, "x", in[0], o.dtype, o.shapes[0]); err != nil {
		return
	}
	if w, err = readShaped(opLinear, "weight", in[1], o.dtype, o.shapes[1]); err != nil {
		return
	}
	if o.bias {
		b, err = readShaped(opLinear, "bias", in[2], o.dtype, o.shapes[2])
	}
	return
}

// inputs is the op's arity: x, w and the bias if it has one.
func (o *linearOp) inputs() int {
	if o.bias {
		return 3
	}
	return 2
}

// Do computes y = x·Wᵀ + b into a new tensor.
func (o *linearOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	return o.UsePreallocDo(nil, in...)
}

// UsePreallocDo computes y into prealloc when it can hold it (see
// operand.Prealloc), else into a new tensor.
func (o *linearOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	x, w, b, err := o.args(in, o.inputs())
	if err != nil {
		return nil, err
	}
	y := operand.Prealloc(prealloc, o.dtype, o.shapes[3], in)
	if o.n == 0 || o.out == 0 {
		return y, nil
	}
	beta := 0.0
	switch {
	case b != nil:
		operand.PickFloat(o.dtype, fillRows[float32], fillRows[float64])(y, b, o.n)
		beta = 1
	case o.in == 0:
		floatsFor(o.dtype).clear(y)
	}
	if o.in == 0 {
		return y, nil
	}
	// y = x·Wᵀ (+ y)
	gemm(o.dtype, blas.NoTrans, blas.Trans, o.n, o.out, o.in, x, o.in, w, o.in, beta, y, o.out)
	return y, nil
}

// grad returns the Run of the gradient of input i (x, w, b).
func (o *linearOp) grad(i int) opkit.Run {
	return func(dst *tensor.Dense, add bool, in []gorgonia.Value) error {
		want := o.shapes[i]
		if dst.Dtype() != o.dtype || !operand.SameShape(dst.Shape(), want) || !operand.Writable(dst) {
			return fmt.Errorf("%s gradient: destination is %v of shape %v, want a row-major %v tensor of shape %v: %w",
				opLinear, dst.Dtype(), dst.Shape(), o.dtype, want, gather.ErrShape)
		}
		x, w, _, err := o.args(in[:len(in)-1], o.inputs())
		if err != nil {
			return err
		}
		g, err := readShaped(opLinear+" gradient", "upstream gradient", in[len(in)-1], o.dtype, o.shapes[3])
		if err != nil {
			return err
		}
		beta := 0.0
		if add {
			beta = 1
		}
		if dst.Shape().TotalSize() == 0 {
			return nil
		}
		if o.n == 0 || o.out == 0 || o.in == 0 && i < 2 {
			if !add {
				floatsFor(o.dtype).clear(dst)
			}
			return nil
		}
		switch i {
		case 0: // ∂x = g·W
			gemm(o.dtype, blas.NoTrans, blas.NoTrans, o.n, o.in, o.out, g, o.out, w, o.in, beta, dst, o.in)
		case 1: // ∂W = gᵀ·x
			gemm(o.dtype, blas.Trans, blas.NoTrans, o.out, o.in, o.n, g, o.out, x, o.in, beta, dst, o.in)
		default: // ∂b = Σ_rows g
			operand.PickFloat(o.dtype, sumRowsInto[float32], sumRowsInto[float64])(dst, g, o.n, add)
		}
		return nil
	}
}

// gemm is c = a·b + beta·c (each operand transposed as ta, tb say) in the
// BLAS Gorgonia uses, on row-major tensors of dtype dt: one call of the
// BLAS, but for gonum's (installed by the user, or the module's BLAS on a
// processor its assembly does not run on, where it passes products to
// gonum's), which starts goroutines and channels of its own on each call
// of a product of four or more of its 64 × 64 blocks: c is then cut into
// one range of rows per worker (parallel.RunRanges), each computed in
// tiles of gemmRows × gemmCols, which gonum computes on the calling
// goroutine.
func gemm(dt tensor.Dtype, ta, tb blas.Transpose, m, n, k int, a *tensor.Dense, lda int, b *tensor.Dense, ldb int, beta float64, c *tensor.Dense, ldc int) {
	impl := gorgonia.WhichBLAS()
	t := gemmTask{impl: impl, ta: ta, tb: tb, n: n, k: k, lda: lda, ldb: ldb, ldc: ldc, beta: beta}
	if dt == tensor.Float32 {
		t.a32, t.b32, t.c32 = a.Float32s(), b.Float32s(), c.Float32s()
	} else {
		t.a64, t.b64, t.c64 = a.Float64s(), b.Float64s(), c.Float64s()
	}
	switch impl := impl.(type) {
	case gonum.Implementation:
	case kernel.BLAS:
		if !impl.ByGonum() {
			t.call(0, m, 0, n)
			return
		}
	default:
		t.call(0, m, 0, n)
		return
	}
	parallel.RunRanges(m, m*n*k/8, t)
}

const (
	gemmRows = 64
	gemmCols = 192
)

// gemmTask is gemm on the rows [lo, hi) of c, in tiles.
type gemmTask struct {
	impl          gorgonia.BLAS
	ta, tb        blas.Transpose
	n, k          int
	lda, ldb, ldc int
	beta          float64
	a32, b32, c32 []float32
	a64, b64, c64 []float64
}

func (t gemmTask) Part(lo, hi int) int {
	for i0 := lo; i0 < hi; i0 += gemmRows {
		for j0 := 0; j0 < t.n; j0 += gemmCols {
			t.call(i0, min(gemmRows, hi-i0), j0, min(gemmCols, t.n-j0))
		}
	}
	return -1
}

// call computes the tile of c of r rows from row i0 and w columns from
// column j0.
func (t gemmTask) call(i0, r, j0, w int) {
	// The tile's first element of op(A) (row i0), op(B) (column j0) and C.
	ao, bo, co := i0*t.lda, j0, i0*t.ldc+j0
	if t.ta == blas.Trans {
		ao = i0
	}
	if t.tb == blas.Trans {
		bo = j0 * t.ldb
	}
	if t.c32 != nil {
		t.impl.Sgemm(t.ta, t.tb, r, w, t.k, 1, t.a32[ao:], t.lda, t.b32[bo:], t.ldb, float32(t.beta), t.c32[co:], t.ldc)
	} else {
		t.impl.Dgemm(t.ta, t.tb, r, w, t.k, 1, t.a64[ao:], t.lda, t.b64[bo:], t.ldb, t.beta, t.c64[co:], t.ldc)
	}
}

// fillRows sets each of the n rows of y to b.
func fillRows[T float32 | float64](y, b *tensor.Dense, n int) {
	ys, bs := operand.Floats[T](y), operand.Floats[T](b)
	for r := range n {
		copy(ys[r*len(bs):(r+1)*len(bs)], bs)
	}
}

// sumRowsInto sets dst to the sum of g's n rows (or with add, adds it),
// summed in order.
func sumRowsInto[T float32 | float64](dst, g *tensor.Dense, n int, add bool) {
	d, gs := operand.Floats[T](dst), operand.Floats[T](g)
	if !add {
		clear(d)
	}
	w := len(d)
	for r := range n {
		row := gs[r*w : (r+1)*w]
		for j, v := range row {
			d[j] += v
		}
	}
}

var (
	_ gorgonia.SDOp = (*linearOp)(nil)
	_ gorgonia.ADOp = (*linearOp)(nil)
)
