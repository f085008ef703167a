package kernel

import (
	"math"
	"sync"

	"github.com/gathergrad/gather/internal/parallel"
)

// A ClassLoss is what a per-class loss computes: CrossEntropy (Entropy)
// or NLLLoss, with PyTorch's ignore_index (HasIgnore, Ignore), weight
// (Weights, nil for 1 per class) and label_smoothing (Smoothing).
type ClassLoss struct {
	Entropy   bool
	HasIgnore bool
	Ignore    int64
	Weights   []float64
	Smoothing float64
}

// weight returns the weight of class j: 1 without class weights.
func (o *ClassLoss) weight(j int) float64 {
	if o.Weights == nil {
		return 1
	}
	return o.Weights[j]
}

// counted reports whether a row with target y counts (is not ignored).
func (o *ClassLoss) counted(y int64) bool { return !o.HasIgnore || y != o.Ignore }

// ClassDenominator returns what a mean of ClassLossRows divides by: the
// sum of the weights of the counted targets, added in the order
// ClassLossRows adds them.
func ClassDenominator[I Index](o *ClassLoss, t []I) float64 {
	var total float64
	for r0 := 0; r0 < len(t); r0 += entropyRows {
		var d float64
		for _, v := range t[r0:min(r0+entropyRows, len(t))] {
			if y := int64(v); o.counted(y) {
				d += o.weight(int(y))
			}
		}
		total += d
	}
	return total
}

// entropyRows is the number of rows whose losses are summed together before
// their sum joins the total: the blocks, not the workers, fix the order of
// the additions, so the loss is the same for any GOMAXPROCS.
const entropyRows = 256

// blockScratch is the memory a loss works a block of entropyRows rows of
// c classes in: e the rows' exponentials, m and s their shifts and sums.
// The parallel parts of a loss take it from a pool, so that a loss run
// over and over allocates none once the pool holds a scratch per thread.
type blockScratch[T Float] struct {
	e    []T
	m, s []float64
}

// blockScratches holds the free *blockScratch[float32] and
// *blockScratch[float64].
var blockScratches = [2]sync.Pool{}

func scratchPool[T Float]() *sync.Pool {
	if _, ok := any(T(0)).(float32); ok {
		return &blockScratches[0]
	}
	return &blockScratches[1]
}

// getBlockScratch returns a scratch for rows of c classes, or nil
// without want.
func getBlockScratch[T Float](c int, want bool) *blockScratch[T] {
	if !want {
		return nil
	}
	sc, _ := scratchPool[T]().Get().(*blockScratch[T])
	if sc == nil {
		sc = &blockScratch[T]{m: make([]float64, entropyRows), s: make([]float64, entropyRows)}
	}
	if cap(sc.e) < entropyRows*c {
		sc.e = make([]T, entropyRows*c)
	}
	sc.e = sc.e[:entropyRows*c]
	return sc
}

// putBlockScratch gives sc, unless nil, back to its pool.
func putBlockScratch[T Float](sc *blockScratch[T]) {
	if sc != nil {
		scratchPool[T]().Put(sc)
	}
}

// parts returns the scratch's slices, nil for a nil scratch.
func (sc *blockScratch[T]) parts() (e []T, m, s []float64) {
	if sc == nil {
		return nil, nil, nil
	}
	return sc.e, sc.m, sc.s
}

// EntropySum returns the sum over rows r of
//
//	logsumexp(x[r*c:(r+1)*c]) - x[r*c+t[r]]
//
// with t's values checked to lie in [-c, c-1]. Each row is shifted by its
// maximum before exp, so large logits do not overflow.
func EntropySum[T Float, I Index](x []T, t []I, c int) float64 {
	nb := (len(t) + entropyRows - 1) / entropyRows
	blocks := sums.Get(nb)
	defer sums.Put(blocks)
	parallel.Run(nb, len(x), entropySum[T, I]{x, t, c, *blocks})
	var total float64
	for _, s := range *blocks {
		total += s
	}
	return total
}

// entropySum is the Task of EntropySum: the sum of each block of
// entropyRows rows into blocks.
type entropySum[T Float, I Index] struct {
	x      []T
	t      []I
	c      int
	blocks []float64
}

func (k entropySum[T, I]) Part(lo, hi int) int {
	x, t, c := k.x, k.t, k.c
	sc := getBlockScratch[T](c, true)
	defer putBlockScratch(sc)
	e, m, s := sc.parts()
	for b := lo; b < hi; b++ {
		r0, r1 := b*entropyRows, min((b+1)*entropyRows, len(t))
		expRows(e, m[:r1-r0], s, x[r0*c:r1*c], c)
		var sum float64
		for r := r0; r < r1; r++ {
			sum += m[r-r0] - float64(x[r*c+Wrap(t[r], c)])
		}
		k.blocks[b] = sum + sumLogs(s[:r1-r0])
	}
	return -1
}

// sumLogs returns Σ log(s[i]), where each s[i] is a row's sum of
// exponentials shifted by its maximum, so in [1, classes] when finite:
// the log of the product of the s[i], renormalised every 16 factors to a
// fraction and a power of two (math.Frexp) so that it cannot overflow,
// one logarithm for all of them. A value outside [1, +Inf) adds its own
// log, as the sum would.
func sumLogs(s []float64) float64 {
	prod, exp2, extra := 1.0, 0, 0.0
	for i, v := range s {
		if !(v >= 1) || math.IsInf(v, 1) {
			extra += math.Log(v)
			continue
		}
		prod *= v
		if i%16 == 15 {
			var e int
			prod, e = math.Frexp(prod)
			exp2 += e
		}
	}
	return math.Log(prod) + float64(exp2)*math.Ln2 + extra
}

// expRows sets, for each row r of x (rows of c elements, len(m) rows, at
// most entropyRows), m[r] to the row's shift (see shift), e[r*c+j] to
// exp(x[r*c+j] - m[r]) in T, and s[r] to the row's sum of e in float64.
// float32 rows go to expRows32; float64 rows are exponentiated by math.Exp
// and summed in order.
func expRows[T Float](e []T, m, s []float64, x []T, c int) {
	if e32, ok := any(e).([]float32); ok {
		expRows32(e32, m, s, any(x).([]float32), c)
		return
	}
	for r := range m {
		row, er := x[r*c:(r+1)*c], e[r*c:(r+1)*c]
		m[r], _ = shift(row)
		expRow(er, row, m[r])
		var sum float64
		for _, v := range er {
			sum += float64(v)
		}
		s[r] = sum
	}
}

// expRows32 is expRows on float32 rows: the shifted rows by
// RowMaxShift32 and their exponentials by Exp32 (within 2
// units in the last place), all in one call each, and the sums by
// RowSums32. A row whose maximum is infinite gets shift 0 and is
// exponentiated again by math.Exp, as shift says.
func expRows32(e []float32, m, s []float64, x []float32, c int) {
	var mx [entropyRows]float32
	n := len(m) * c
	RowMaxShift32(e, x, mx[:len(m)], c)
	Exp32(e[:n], e[:n])
	for r, v := range mx[:len(m)] {
		m[r] = float64(v)
		if math.IsInf(m[r], 0) { // all -Inf or NaN, or a +Inf in the row
			m[r] = 0
			expRow(e[r*c:(r+1)*c], x[r*c:(r+1)*c], 0)
		}
	}
	RowSums32(s, e, c)
}

// expRow sets er[j] = exp(row[j] - m) with math.Exp, in float64.
func expRow[T Float](er, row []T, m float64) {
	for j, v := range row {
		er[j] = T(math.Exp(float64(v) - m))
	}
}

// shift returns the row's largest element that is not NaN, which
// subtracted from every element before exp keeps exp from overflowing, and
// true; or 0 and false when that maximum is infinite (all -Inf, or a +Inf
// in the row), where the unshifted formula gives IEEE's answer. A NaN in
// the row makes its loss and gradient NaN with any shift.
func shift[T Float](row []T) (float64, bool) {
	m := T(math.Inf(-1))
	for _, v := range row {
		if v > m {
			m = v
		}
	}
	if math.IsInf(float64(m), 0) {
		return 0, false
	}
	return float64(m), true
}

// EntropyGrad is, for every row r of x (rows of c logits, t[r] its
// target) and p = softmax(x[r*c:(r+1)*c]),
//
//	dst[r*c+j] = scale * (p[j] - (j == t[r] ? 1 : 0))
//
// or dst[r*c+j] += the same with add. Every element is computed on its own,
// so the result does not depend on how the rows are split.
func EntropyGrad[T Float, I Index](dst, x []T, t []I, c int, scale float64, add bool) {
	parallel.Run(len(t), len(x), entropyGradTask[T, I]{dst, x, t, c, scale, add})
}

// entropyGradTask is the Task of EntropyGrad.
type entropyGradTask[T Float, I Index] struct {
	dst, x []T
	t      []I
	c      int
	scale  float64
	add    bool
}

func (k entropyGradTask[T, I]) Part(lo, hi int) int {
	entropyGrad(k.dst, k.x, k.t, k.c, k.scale, k.add, lo, hi)
	return -1
}

// entropyGrad is EntropyGrad for the rows [lo, hi).
func entropyGrad[T Float, I Index](dst, x []T, t []I, c int, scale float64, add bool, lo, hi int) {
	// exp(x - max) of a block of rows, the rows' shifts and sums
	sc := getBlockScratch[T](c, true)
	defer putBlockScratch(sc)
	e, m, s := sc.parts()
	e32, f32 := any(e).([]float32)
	var ks [entropyRows]float32
	for r0 := lo; r0 < hi; r0 += entropyRows {
		r1 := min(r0+entropyRows, hi)
		expRows(e, m[:r1-r0], s, x[r0*c:r1*c], c)
		if f32 && !add { // every row scaled at once, then each row's target
			for r := range ks[:r1-r0] {
				ks[r] = float32(scale / s[r])
			}
			ScaleRows32(any(dst[r0*c:r1*c]).([]float32), e32[:(r1-r0)*c], ks[:r1-r0], c)
			for r := r0; r < r1; r++ {
				target := Wrap(t[r], c)
				dst[r*c+target] = T(scale/s[r-r0]*float64(e[(r-r0)*c+target]) - scale)
			}
			continue
		}
		for r := r0; r < r1; r++ {
			er, out := e[(r-r0)*c:(r-r0+1)*c], dst[r*c:(r+1)*c]
			out = out[:len(er)]
			k := scale / s[r-r0]
			target := Wrap(t[r], c)
			before := out[target]
			scaleRow(out, er, k, add)
			g := T(k*float64(er[target]) - scale)
			if add {
				g += before
			}
			out[target] = g
		}
	}
}

// scaleRow sets out[j] = k·e[j] (or with add, adds it) in T's
// arithmetic: for float32 rows k is rounded to float32 first, so an
// element may differ from the product rounded once by one unit in the
// last place.
func scaleRow[T Float](out, e []T, k float64, add bool) {
	kt := T(k)
	out = out[:len(e)]
	if add {
		for j, v := range e {
			out[j] += kt * v
		}
		return
	}
	for j, v := range e {
		out[j] = kt * v
	}
}
