package kernel

import "math"

// Constants of exp32Go and its assembly: exp(x) = 2^n × exp(r) with
// n = round(x·log2(e)) and r = x - n·ln(2) (ln(2) split in two parts, so
// that n·ln2Hi is exact for |n| < 2^11), |r| ≤ ln(2)/2; exp(r) by its
// Taylor polynomial to degree 7, whose error there is below 1e-8.
const (
	expLog2E = float32(math.Log2E)
	expLn2Hi = float32(0.693359375) // 8 significant bits
	expLn2Lo = float32(math.Ln2 - 0.693359375)
	// expMin is the least x that exp32Go does not flush to 0: below it
	// 2^n would be a subnormal.
	expMin = float32(-87.3)
)

// expTaylor holds 1/k! for k = 7 down to 2.
var expTaylor = [6]float32{1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 1.0 / 2}

// expConst holds exp32's constants in the order its assembly loads them,
// and expBias the exponent bias of a float32.
var (
	expConst = [11]float32{expMin, expLog2E, expLn2Hi, expLn2Lo,
		expTaylor[0], expTaylor[1], expTaylor[2], expTaylor[3], expTaylor[4], expTaylor[5], 1}
	expBias = int32(127)
)

// Exp32 sets dst[i] = exp(src[i]) for each i, in float32, within 2 units in
// the last place of math.Exp, for every src[i] ≤ 88 (callers pass x minus
// the maximum of its row, at most 0). Below -87.3 the result is 0, and NaN
// stays NaN. Above 88 the result is undefined. dst and src have the same
// length and may be the same slice.
func Exp32(dst, src []float32) { inEights(hasExpAsm, exp32, exp32Go, dst, src) }

// inEights runs asm, when has is set, over the longest prefix of src
// whose length is a multiple of 8, and its Go twin over the rest (all of
// src without asm). dst is at least as long as src.
func inEights(has bool, asm, twin func(dst, src []float32), dst, src []float32) {
	n := 0
	if has {
		n = len(src) &^ 7
		asm(dst[:n], src[:n])
	}
	twin(dst[n:len(src)], src[n:])
}

// exp32Go is Exp32 one element at a time, the reference for exp32: the
// reduction's second step and Horner's rule in fused multiply-adds (FMA32),
// each rounded once, as the assembly's VFMADD does.
func exp32Go(dst, src []float32) {
	dst = dst[:len(src)]
	for i, x := range src {
		c := max(x, expMin) // NaN stays NaN
		n := float32(math.RoundToEven(float64(c * expLog2E)))
		r := c - float32(n*expLn2Hi) // n·ln2Hi is exact: fused or not, the same
		r = FMA32(-n, expLn2Lo, r)
		p := expTaylor[0]
		for _, k := range expTaylor[1:] {
			p = FMA32(p, r, k)
		}
		p = FMA32(p, r, 1)
		p = FMA32(p, r, 1)
		p *= math.Float32frombits(uint32(int32(n)+127) << 23)
		if x < expMin {
			p = 0
		}
		dst[i] = p
	}
}

// log1pCoef holds, in the order log1p32's assembly loads them, 2 and then
// 1/(2k+1) for k = 6 down to 0: log(1+e) = 2t·Σ_k t^(2k)/(2k+1) with
// t = e/(2+e), which is at most 1/3 for e in [0, 1], so that the terms
// after t^12/13 add less than 2e-8 relative.
var log1pCoef = [8]float32{2, 1.0 / 13, 1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3, 1}

// Log1p32 sets dst[i] = log(1 + src[i]) for each i, in float32, within 3
// units in the last place of math.Log1p, for every src[i] in [0, 1] (the
// logistic loss passes exp(-|x|)). NaN stays NaN; outside [0, 1] the
// result is undefined. dst and src have the same length and may be the
// same slice.
func Log1p32(dst, src []float32) { inEights(hasLog1pAsm, log1p32, log1p32Go, dst, src) }

// log1p32Go is Log1p32 one element at a time, the reference for log1p32:
// t = e/(2+e), the series in w = t² by Horner's rule, each product rounded
// before it is added as the assembly does, then (t+t) times it.
func log1p32Go(dst, src []float32) {
	dst = dst[:len(src)]
	for i, e := range src {
		t := e / (log1pCoef[0] + e)
		w := t * t
		p := log1pCoef[1]
		for _, k := range log1pCoef[2:] {
			p = float32(p*w) + k
		}
		dst[i] = (t + t) * p
	}
}
