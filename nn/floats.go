package nn

import (
	"slices"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
)

// floatOps are the loops of package nn's ops on the tensors of one float
// dtype, picked once (floatsFor): each op keeps the ones of its dtype.
type floatOps struct {
	clear          func(t *tensor.Dense)
	addInto        func(dst, src *tensor.Dense)
	addBand        func(part, whole *tensor.Dense, outer, row, w, at int) // part [outer, w] += whole [outer, row]'s columns [at, at+w)
	copyAt         func(dst *tensor.Dense, off int, src *tensor.Dense)    // src's values into dst from element off on
	firstNonZero   func(t *tensor.Dense) int
	firstNonFinite func(t *tensor.Dense) int
	divideByFreq   func(g *tensor.Dense, ids operand.Indices, vocab int)
	renorm         func(table *tensor.Dense, ids operand.Indices, dim int, maxNorm float64)
	toFloat64      func(dst []float64, src *tensor.Dense)
	fromFloat64    func(dst *tensor.Dense, src []float64)
	pool           func(out, table *tensor.Dense, a bagArgs, dim int)
	bagGrad        func(dst, g, table *tensor.Dense, a bagArgs, dim int, wrtTable bool, c float64, freq bool)
	positionGrad   func(out, g, table *tensor.Dense, a bagArgs, vocab, dim int, s *argScratch)
}

var float32Ops, float64Ops = floatOpsOf[float32](), floatOpsOf[float64]()

// floatsFor returns the loops for tensors of dtype dt (Float32, else
// Float64).
func floatsFor(dt tensor.Dtype) *floatOps { return operand.PickFloat(dt, &float32Ops, &float64Ops) }

// floatOpsOf returns the loops for values of Go type T.
func floatOpsOf[T kernel.Float]() floatOps {
	f := operand.Floats[T]
	return floatOps{
		clear:   func(t *tensor.Dense) { kernel.Clear(f(t)) },
		addInto: func(dst, src *tensor.Dense) { kernel.AddInto(f(dst), f(src)) },
		addBand: func(part, whole *tensor.Dense, outer, row, w, at int) {
			p, wh := f(part), f(whole)
			for k := range outer {
				kernel.AddInto(p[k*w:(k+1)*w], wh[k*row+at:k*row+at+w])
			}
		},
		copyAt:         func(dst *tensor.Dense, off int, src *tensor.Dense) { copy(f(dst)[off:], f(src)) },
		firstNonZero:   func(t *tensor.Dense) int { return kernel.FirstNonZero(f(t)) },
		firstNonFinite: func(t *tensor.Dense) int { return kernel.FirstNonFinite(f(t)) },
		divideByFreq: func(g *tensor.Dense, ids operand.Indices, vocab int) {
			n := ids.Shape.TotalSize()
			if n == 0 {
				return
			}
			operand.Pick(ids.Dtype, divideByFreq[T, int], divideByFreq[T, int32], divideByFreq[T, int64])(f(g), ids, vocab, g.Shape().TotalSize()/n)
		},
		renorm: func(table *tensor.Dense, ids operand.Indices, dim int, maxNorm float64) {
			operand.Pick(ids.Dtype, renorm[T, int], renorm[T, int32], renorm[T, int64])(f(table), ids, dim, maxNorm)
		},
		toFloat64:   func(dst []float64, src *tensor.Dense) { kernel.ToFloat64(dst, f(src)) },
		fromFloat64: func(dst *tensor.Dense, src []float64) { kernel.FromFloat64(f(dst), src) },
		pool: func(out, table *tensor.Dense, a bagArgs, dim int) {
			operand.Pick(a.ids.Dtype, pool[T, int], pool[T, int32], pool[T, int64])(f(out), f(table), a.ids, f(a.w), dim, a.bg)
		},
		bagGrad: func(dst, g, table *tensor.Dense, a bagArgs, dim int, wrtTable bool, c float64, freq bool) {
			operand.Pick(a.ids.Dtype, bagGrad[T, int], bagGrad[T, int32], bagGrad[T, int64])(
				f(dst), f(g), f(table), a.ids, f(a.w), dim, a.bg, wrtTable, T(c), freq)
		},
		positionGrad: func(out, g, table *tensor.Dense, a bagArgs, vocab, dim int, s *argScratch) {
			operand.Pick(a.ids.Dtype, positionGrad[T, int], positionGrad[T, int32], positionGrad[T, int64])(
				f(out), f(g), f(table), a.ids, f(a.w), vocab, dim, a.bg, s)
		},
	}
}

// The loops of floatOps generic in the ids' Go type I too. The Bags are
// taken by value, so that the caller's stay on its stack.

func divideByFreq[T kernel.Float, I kernel.Index](g []T, ids operand.Indices, vocab, dim int) {
	kernel.DivideByFreq(g, operand.Slice[I](ids), vocab, dim)
}

func renorm[T kernel.Float, I kernel.Index](table []T, ids operand.Indices, dim int, maxNorm float64) {
	kernel.Renorm(table, operand.Slice[I](ids), dim, maxNorm)
}

func pool[T kernel.Float, I kernel.Index](out, table []T, ids operand.Indices, w []T, dim int, bg kernel.Bags) {
	kernel.BagPool(out, table, operand.Slice[I](ids), w, dim, &bg)
}

func bagGrad[T kernel.Float, I kernel.Index](dst, g, table []T, ix operand.Indices, w []T, dim int, b kernel.Bags, wrtTable bool, c T, freq bool) {
	ids, bg := operand.Slice[I](ix), &b
	var arg []int32
	if bg.Mode == kernel.BagMax {
		arg = kernel.BagArgmax(table, ids, w, dim, bg)
	}
	if wrtTable {
		kernel.BagTableGrad(dst, g, table, ids, w, dim, bg, arg, c, freq)
		return
	}
	gw := make([]T, len(ids))
	kernel.BagWeightGrad(gw, g, table, ids, dim, bg, arg)
	kernel.AddInto(dst, gw)
}

// argScratch is the memory positionGrad finds a max bag's argmax in,
// kept from call to call.
type argScratch struct {
	arg  []int32
	best []float64
}

func positionGrad[T kernel.Float, I kernel.Index](out, g, table []T, ix operand.Indices, w []T, vocab, dim int, b kernel.Bags, s *argScratch) {
	ids, bg := operand.Slice[I](ix), &b
	var arg []int32
	if bg.Mode == kernel.BagMax {
		n := bg.N() * dim
		s.arg, s.best = slices.Grow(s.arg[:0], n)[:n], slices.Grow(s.best[:0], n)[:n]
		kernel.BagArgmaxInto(s.arg, s.best, table, ids, w, dim, bg)
		arg = s.arg
	}
	kernel.BagPositionGrad(out, g, ids, w, vocab, dim, bg, arg)
}
