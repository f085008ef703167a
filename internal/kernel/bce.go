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
// num chosen by x's sign bit (see bceGradOne).
func bceGradPlain32(dst, x, y, e []float32, scale float32) {
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
		x32 := any(x).([]float32)
		e32 = e32[:len(x32)]
		for i, v := range x32 {
			e32[i] = -float32(math.Abs(float64(v)))
		}
		Exp32(e32, e32)
		return
	}
	e = e[:len(x)]
	for i, v := range x {
		e[i] = T(math.Exp(-math.Abs(float64(v))))
	}
}

// bceBlocks calls f(i0, i1, e) for the blocks [i0, i1) of n elements in
// parallel, with e[:i1-i0] = exp(-|x[i0:i1]|).
func bceBlocks[T Float](x []T, f func(i0, i1 int, e []T)) int {
	nb := (len(x) + bceBlock - 1) / bceBlock
	parallel.For(nb, len(x), func(lo, hi int) {
		e := make([]T, bceBlock)
		for b := lo; b < hi; b++ {
			i0, i1 := b*bceBlock, min((b+1)*bceBlock, len(x))
			negAbsExp(e, x[i0:i1])
			f(i0, i1, e)
		}
	})
	return nb
}

// BCESum returns the sum of the elements' losses.
func BCESum[T Float](x, y []T, pos []float64, cols int) float64 {
	blocks := make([]float64, (len(x)+bceBlock-1)/bceBlock)
	bceBlocks(x, func(i0, i1 int, e []T) {
		log1pBlock(e[:i1-i0])
		var s float64
		j := i0 % cols // the column of element i
		for i := i0; i < i1; i++ {
			s += bceOne(float64(x[i]), float64(y[i]), posAt(pos, j), float64(e[i-i0]))
			if j++; j == cols {
				j = 0
			}
		}
		blocks[i0/bceBlock] = s
	})
	var total float64
	for _, s := range blocks {
		total += s
	}
	return total
}

// BCEEach sets out[i] to the loss of element i.
func BCEEach[T Float](out, x, y []T, pos []float64, cols int) {
	bceBlocks(x, func(i0, i1 int, e []T) {
		log1pBlock(e[:i1-i0])
		j := i0 % cols // the column of element i
		for i := i0; i < i1; i++ {
			out[i] = T(bceOne(float64(x[i]), float64(y[i]), posAt(pos, j), float64(e[i-i0])))
			if j++; j == cols {
				j = 0
			}
		}
	})
}

// bceGrad is
//
//	for i := range x { dst[i] = s_i · ∂l/∂x_i }   (+= with add)
//
// with s_i = up[i] when up is not nil, else scale.
func BCEGrad[T Float](dst, x, y, up []T, pos []float64, cols int, scale float64, add bool) {
	if d32, ok := any(dst).([]float32); ok && pos == nil && up == nil && !add {
		x32, y32 := any(x).([]float32), any(y).([]float32)
		bceBlocks(x32, func(i0, i1 int, e []float32) { bceGradPlain32(d32[i0:i1], x32[i0:i1], y32[i0:i1], e, float32(scale)) })
		return
	}
	bceBlocks(x, func(i0, i1 int, e []T) {
		j := i0 % cols // the column of element i
		for i := i0; i < i1; i++ {
			s := scale
			if up != nil {
				s = float64(up[i])
			}
			g := T(s * bceGradOne(float64(x[i]), float64(y[i]), posAt(pos, j), float64(e[i-i0])))
			if add {
				dst[i] += g
			} else {
				dst[i] = g
			}
			if j++; j == cols {
				j = 0
			}
		}
	})
}
