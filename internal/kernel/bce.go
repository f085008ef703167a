package kernel

import (
	"math"

	"github.com/gathergrad/gather/internal/parallel"
)

// bceOne returns the loss of one element: logit x, target y, pos weight
// p, and l = log(1 + exp(-|x|)) (see log1pBlock).
func bceOne(x, y, p, l float64) float64 {
	sp := l + negPart(x) // log(1 + exp(-x)), for x of either sign
	return (1-y)*x + (1+(p-1)*y)*sp
}

// log1pBlock sets e[i] = log(1 + e[i]) for e[i] = exp(-|x|) in [0, 1]:
// float32 by Log1p32 (within 3 units in the last place), float64
// by log1p01.
func log1pBlock[T Float](e []T) {
	if e32, ok := any(e).([]float32); ok {
		Log1p32(e32, e32)
		return
	}
	for i, v := range e {
		e[i] = T(log1p01(float64(v)))
	}
}

// negPart returns max(-x, 0) for x not NaN (+0 for ±0), chosen by x's sign
// bit without a branch, which would be mispredicted on logits of random
// sign. For a NaN x it returns NaN or 0; its loss is NaN either way, from e.
func negPart(x float64) float64 {
	return math.Float64frombits(math.Float64bits(-x) & signMask(x))
}

// signMask returns all ones when x's sign bit is set, else 0: a choice by
// the sign without a branch.
func signMask(x float64) uint64 { return uint64(int64(math.Float64bits(x)) >> 63) }

// log1p01 returns log(1+e) for e in [0, 1] (NaN stays NaN): below 1e-4 by
// its series, whose next term is below e·1e-16, else by math.Log, which
// the assembly of package math makes cheaper than math.Log1p on amd64.
func log1p01(e float64) float64 {
	if e < 1e-4 {
		return e * (1 - e*(0.5-e*(1.0/3)))
	}
	return math.Log(1 + e)
}

// bceGradOne returns ∂l/∂x of one element, with e = exp(-|x|).
//
// sigmoid(x) is 1/(1+e) for x >= 0 and e/(1+e) for x < 0; the numerator is
// chosen by x's sign bit without a branch, which would be mispredicted on
// logits of random sign. -0 takes e = 1, the same value.
func bceGradOne(x, y, p, e float64) float64 {
	neg := signMask(x)
	num := math.Float64frombits(math.Float64bits(1)&^neg | math.Float64bits(e)&neg)
	s := num / (1 + e)
	return (1+(p-1)*y)*s - p*y
}

// bceGradPlain32 is BCEGrad without pos weights or upstream gradients,
// into dst, in float32 arithmetic as PyTorch computes it:
// scale·(sigmoid(x) - y), with e = exp(-|x|) and sigmoid(x) = num/(1+e),
// num chosen by x's sign bit (see bceGradOne): sigmoidGrad32 on eight
// elements at a time where the processor has AVX, sigmoidGrad32Go on the
// rest, to the same bits.
func bceGradPlain32(dst, x, y, e []float32, scale float32) {
	n := 0
	if hasExpAsm {
		n = len(x) &^ 7
		sigmoidGrad32(dst[:n], x[:n], y[:n], e[:n], scale)
	}
	sigmoidGrad32Go(dst[n:len(x)], x[n:], y[n:len(x)], e[n:len(x)], scale)
}

// sigmoidGrad32Go is bceGradPlain32 one element at a time, the reference
// for sigmoidGrad32.
func sigmoidGrad32Go(dst, x, y, e []float32, scale float32) {
	dst, y, e = dst[:len(x)], y[:len(x)], e[:len(x)]
	for i, v := range x {
		neg := uint32(int32(math.Float32bits(v)) >> 31)
		num := math.Float32frombits(math.Float32bits(1)&^neg | math.Float32bits(e[i])&neg)
		dst[i] = scale * (num/(1+e[i]) - y[i])
	}
}

// posAt returns the pos weight of column j, 1 without WithPosWeight.
func posAt(pos []float64, j int) float64 {
	if pos == nil {
		return 1
	}
	return pos[j]
}

// bceBlock is the number of elements a kernel exponentiates at once, and
// whose losses are summed before the sum joins the total: the blocks fix
// the order of the additions, so the loss is the same for any GOMAXPROCS.
const bceBlock = 1024

// negAbsExp sets e[i] = exp(-|x[i]|): in float32 with Exp32 (0
// below -87.3), in float64 with math.Exp.
func negAbsExp[T Float](e, x []T) {
	if e32, ok := any(e).([]float32); ok {
		inEights(hasExpAsm, expNegAbs32, expNegAbs32Go, e32, any(x).([]float32))
		return
	}
	e = e[:len(x)]
	for i, v := range x {
		e[i] = T(math.Exp(-math.Abs(float64(v))))
	}
}

// expNegAbs32Go is Exp32 of -|src[i]|, the reference for expNegAbs32.
func expNegAbs32Go(dst, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = math.Float32frombits(math.Float32bits(v) | 1<<31) // -|v|
	}
	exp32Go(dst, dst)
}

// bceBlocker is the work of a BCE kernel on the elements [i0, i1), with
// e[:i1-i0] = exp(-|x[i0:i1]|).
type bceBlocker[T Float] interface{ block(i0, i1 int, e []T) }

// bceBlocks runs k on the blocks of bceBlock elements of x in parallel and
// returns how many there are.
func bceBlocks[T Float, K bceBlocker[T]](x []T, k K) int {
	nb := (len(x) + bceBlock - 1) / bceBlock
	parallel.Run(nb, len(x), bceTask[T, K]{x, k})
	return nb
}

// bceTask is the Task of bceBlocks.
type bceTask[T Float, K bceBlocker[T]] struct {
	x []T
	k K
}

func (t bceTask[T, K]) Part(lo, hi int) int {
	sc := floatScratch[T]()
	e := sc.Get(bceBlock)
	defer sc.Put(e)
	for b := lo; b < hi; b++ {
		i0, i1 := b*bceBlock, min((b+1)*bceBlock, len(t.x))
		negAbsExp(*e, t.x[i0:i1])
		t.k.block(i0, i1, *e)
	}
	return -1
}

// BCESum returns the sum of the elements' losses.
func BCESum[T Float](x, y []T, pos []float64, cols int) float64 {
	blocks := sums.Get((len(x) + bceBlock - 1) / bceBlock)
	defer sums.Put(blocks)
	bceBlocks(x, bceSum[T]{x, y, pos, cols, *blocks})
	var total float64
	for _, s := range *blocks {
		total += s
	}
	return total
}

// bceSum is BCESum's work: the sum of each block into blocks.
type bceSum[T Float] struct {
	x, y   []T
	pos    []float64
	cols   int
	blocks []float64
}

func (k bceSum[T]) block(i0, i1 int, e []T) {
	log1pBlock(e[:i1-i0])
	var s float64
	if k.pos == nil { // bceOne with p = 1
		for i := i0; i < i1; i++ {
			x := float64(k.x[i])
			s += (1-float64(k.y[i]))*x + (float64(e[i-i0]) + negPart(x))
		}
		k.blocks[i0/bceBlock] = s
		return
	}
	j := i0 % k.cols // the column of element i
	for i := i0; i < i1; i++ {
		s += bceOne(float64(k.x[i]), float64(k.y[i]), posAt(k.pos, j), float64(e[i-i0]))
		if j++; j == k.cols {
			j = 0
		}
	}
	k.blocks[i0/bceBlock] = s
}

// BCEEach sets out[i] to the loss of element i.
func BCEEach[T Float](out, x, y []T, pos []float64, cols int) {
	bceBlocks(x, bceEach[T]{out, x, y, pos, cols})
}

// bceEach is BCEEach's work.
type bceEach[T Float] struct {
	out, x, y []T
	pos       []float64
	cols      int
}

func (k bceEach[T]) block(i0, i1 int, e []T) {
	log1pBlock(e[:i1-i0])
	j := i0 % k.cols // the column of element i
	for i := i0; i < i1; i++ {
		k.out[i] = T(bceOne(float64(k.x[i]), float64(k.y[i]), posAt(k.pos, j), float64(e[i-i0])))
		if j++; j == k.cols {
			j = 0
		}
	}
}

// bceGrad is
//
//	for i := range x { dst[i] = s_i · ∂l/∂x_i }   (+= with add)
//
// with s_i = up[i] when up is not nil, else scale.
func BCEGrad[T Float](dst, x, y, up []T, pos []float64, cols int, scale float64, add bool) {
	if d32, ok := any(dst).([]float32); ok && pos == nil && up == nil && !add {
		x32, y32 := any(x).([]float32), any(y).([]float32)
		bceBlocks(x32, bceGradPlain{d32, x32, y32, float32(scale)})
		return
	}
	bceBlocks(x, bceGrad[T]{dst, x, y, up, pos, cols, scale, add})
}

// bceGradPlain is BCEGrad's work for float32 without weights, upstream
// gradients or add.
type bceGradPlain struct {
	dst, x, y []float32
	scale     float32
}

func (k bceGradPlain) block(i0, i1 int, e []float32) {
	bceGradPlain32(k.dst[i0:i1], k.x[i0:i1], k.y[i0:i1], e, k.scale)
}

// bceGrad is BCEGrad's work.
type bceGrad[T Float] struct {
	dst, x, y, up []T
	pos           []float64
	cols          int
	scale         float64
	add           bool
}

func (k bceGrad[T]) block(i0, i1 int, e []T) {
	j := i0 % k.cols // the column of element i
	for i := i0; i < i1; i++ {
		s := k.scale
		if k.up != nil {
			s = float64(k.up[i])
		}
		g := T(s * bceGradOne(float64(k.x[i]), float64(k.y[i]), posAt(k.pos, j), float64(e[i-i0])))
		if k.add {
			k.dst[i] += g
		} else {
			k.dst[i] = g
		}
		if j++; j == k.cols {
			j = 0
		}
	}
}
