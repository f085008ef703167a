package kernel

import (
	"math"

	"github.com/gathergrad/gather/internal/parallel"
)

// LogSoftmax sets dst to the log-softmax of x over the middle axis of the
// shape [outer, n, inner] (row-major):
//
//	dst[o][j][i] = x[o][j][i] - m - log(Σ_k exp(x[o][k][i] - m))
//
// with m the largest x[o][k][i] (so that exp does not overflow), the sum
// and the subtraction in float64. Over the last axis (inner 1) float32
// rows are exponentiated eight at a time (Exp32, within 2 units in the
// last place); other axes and float64 use math.Exp. dst and x may be the
// same slice.
func LogSoftmax[T Float](dst, x []T, outer, n, inner int) {
	if outer*n*inner == 0 {
		return
	}
	if inner == 1 {
		parallel.Run(outer, outer*n, rangeTask[logSoftmaxLast[T]]{logSoftmaxLast[T]{dst, x, n}})
		return
	}
	parallel.Run(outer, outer*n*inner, rangeTask[logSoftmaxLanes[T]]{logSoftmaxLanes[T]{dst, x, n, inner}})
}

// logSoftmaxLanes is the work of LogSoftmax on [lo, hi).
type logSoftmaxLanes[T Float] struct {
	dst   []T
	x     []T
	n     int
	inner int
}

func (t logSoftmaxLanes[T]) rows(lo, hi int) {
	dst, x, n, inner := t.dst, t.x, t.n, t.inner
	for o := lo; o < hi; o++ {
		for i := range inner {
			base := o*n*inner + i
			lse := laneLogSumExp(x, base, n, inner)
			for j := range n {
				p := base + j*inner
				dst[p] = T(float64(x[p]) - lse)
			}
		}
	}
}

// logSoftmaxLast is the work of LogSoftmax on [lo, hi).
type logSoftmaxLast[T Float] struct {
	dst []T
	x   []T
	n   int
}

func (t logSoftmaxLast[T]) rows(lo, hi int) {
	dst, x, n := t.dst, t.x, t.n
	logSoftmaxRows(dst, x, n, lo, hi)
}

// logSoftmaxRows is LogSoftmax over rows of n for the rows [lo, hi).
func logSoftmaxRows[T Float](dst, x []T, n, lo, hi int) {
	sc := getBlockScratch[T](n, true)
	defer putBlockScratch(sc)
	e, m, s := sc.parts()
	_, f32 := any(x).([]float32)
	for r0 := lo; r0 < hi; r0 += entropyRows {
		r1 := min(r0+entropyRows, hi)
		expRows(e, m[:r1-r0], s, x[r0*n:r1*n], n)
		if f32 {
			logs32(s[:r1-r0])
		} else {
			for r, v := range s[:r1-r0] {
				s[r] = math.Log(v)
			}
		}
		for r := range s[:r1-r0] {
			s[r] += m[r] // the row's log-sum-exp
		}
		if f32 {
			SubRows32(any(dst[r0*n:r1*n]).([]float32), any(x[r0*n:r1*n]).([]float32), s[:r1-r0], n)
			continue
		}
		for r := r0; r < r1; r++ {
			lse := s[r-r0]
			row, out := x[r*n:(r+1)*n], dst[r*n:(r+1)*n]
			out = out[:len(row)]
			for j, v := range row {
				out[j] = T(float64(v) - lse)
			}
		}
	}
}

// logs32 sets s[r] = log(s[r]) for the sums of a block of float32 rows
// (each at least 1, or NaN or +Inf), to float32's precision: s = f·2^k
// with f in [1, 2), log(s) = k·log(2) + log1p(f-1), the log1p eight at a
// time (Log1p32, within 3 units in the last place of a value below
// log(2)). A value that is not finite is left to math.Log.
func logs32(s []float64) {
	const mantissa = 1<<52 - 1
	var f [entropyRows]float32
	var k [entropyRows]int
	for r, v := range s {
		b := math.Float64bits(v)
		// v = f·2^k, f in [1, 2), for v in [1, +Inf): the exponent bits
		// and the mantissa under the exponent of 1.
		f[r] = float32(math.Float64frombits(b&mantissa|1023<<52) - 1)
		k[r] = int(b>>52) - 1023
	}
	Log1p32(f[:len(s)], f[:len(s)])
	for r, v := range s {
		if !(v >= 1) || k[r] == 1024 { // below 1, NaN, +Inf
			s[r] = math.Log(v)
			continue
		}
		s[r] = float64(k[r])*math.Ln2 + float64(f[r])
	}
}

// laneLogSumExp returns m + log(Σ_k exp(x[base+k*stride] - m)) over k in
// [0, n), m the lane's largest element (0 when it is infinite, as shift
// says).
func laneLogSumExp[T Float](x []T, base, n, stride int) float64 {
	m := math.Inf(-1)
	for k := range n {
		if v := float64(x[base+k*stride]); v > m {
			m = v
		}
	}
	if math.IsInf(m, 0) {
		m = 0
	}
	s := 0.0
	for k := range n {
		s += math.Exp(float64(x[base+k*stride]) - m)
	}
	return m + math.Log(s)
}

// LogSoftmaxGrad sets dst (or with add, adds into it) the gradient of
// LogSoftmax with respect to its input, given its output y (the
// log-probabilities) and the upstream gradient g, over the middle axis of
// [outer, n, inner]:
//
//	dst[o][j][i] = g[o][j][i] - exp(y[o][j][i]) · Σ_k g[o][k][i]
//
// the sum and the products in float64, as PyTorch's log_softmax backward
// computes it from the output. Over the last axis (inner 1) float32
// rows are exponentiated eight at a time (Exp32, within 2 units in the
// last place); other axes and float64 use math.Exp.
func LogSoftmaxGrad[T Float](dst, y, g []T, outer, n, inner int, add bool) {
	if outer*n*inner == 0 {
		return
	}
	if inner == 1 {
		parallel.Run(outer, 2*outer*n, rangeTask[logSoftmaxGradLast[T]]{logSoftmaxGradLast[T]{dst, y, g, n, add}})
		return
	}
	parallel.Run(outer, 2*outer*n*inner, rangeTask[logSoftmaxGradLanes[T]]{logSoftmaxGradLanes[T]{dst, y, g, n, inner, add}})
}

// logSoftmaxGradLanes is the work of LogSoftmaxGrad on [lo, hi) of outer.
type logSoftmaxGradLanes[T Float] struct {
	dst, y, g []T
	n, inner  int
	add       bool
}

func (t logSoftmaxGradLanes[T]) rows(lo, hi int) {
	dst, y, g, n, inner := t.dst, t.y, t.g, t.n, t.inner
	for o := lo; o < hi; o++ {
		for i := range inner {
			base := o*n*inner + i
			gs := 0.0
			for j := range n {
				gs += float64(g[base+j*inner])
			}
			for j := range n {
				p := base + j*inner
				d := T(float64(g[p]) - math.Exp(float64(y[p]))*gs)
				if t.add {
					dst[p] += d
				} else {
					dst[p] = d
				}
			}
		}
	}
}

// logSoftmaxGradLast is the work of LogSoftmaxGrad on the rows [lo, hi)
// of n elements (inner 1).
type logSoftmaxGradLast[T Float] struct {
	dst, y, g []T
	n         int
	add       bool
}

func (t logSoftmaxGradLast[T]) rows(lo, hi int) {
	dst, y, g, n := t.dst, t.y, t.g, t.n
	sc := floatScratch[T]()
	ep := sc.Get(entropyRows * n)
	defer sc.Put(ep)
	e := *ep
	var gs [entropyRows]float64
	for r0 := lo; r0 < hi; r0 += entropyRows {
		r1 := min(r0+entropyRows, hi)
		exps(e[:(r1-r0)*n], y[r0*n:r1*n])
		if g32, ok := any(g).([]float32); ok && !t.add {
			RowSums32(gs[:r1-r0], g32[r0*n:r1*n], n)
			ScaleSubRows32(any(dst[r0*n:r1*n]).([]float32), g32[r0*n:r1*n], any(e[:(r1-r0)*n]).([]float32), gs[:r1-r0], n)
			continue
		}
		for r := r0; r < r1; r++ {
			gr, er, out := g[r*n:(r+1)*n], e[(r-r0)*n:(r-r0+1)*n], dst[r*n:(r+1)*n]
			er, out = er[:len(gr)], out[:len(gr)]
			gs := 0.0
			for _, v := range gr {
				gs += float64(v)
			}
			if t.add {
				for j, v := range gr {
					out[j] += T(float64(v) - float64(er[j])*gs)
				}
			} else {
				for j, v := range gr {
					out[j] = T(float64(v) - float64(er[j])*gs)
				}
			}
		}
	}
}

// exps sets e[i] = exp(x[i]): by Exp32 for float32, else math.Exp.
func exps[T Float](e, x []T) {
	if e32, ok := any(e).([]float32); ok {
		Exp32(e32, any(x).([]float32))
		return
	}
	e = e[:len(x)]
	for i, v := range x {
		e[i] = T(math.Exp(float64(v)))
	}
}
