//go:build !amd64 || purego

package kernel

// hasExpAsm is false: without assembly, Exp32 runs exp32Go.
const hasExpAsm = false

func exp32(dst, src []float32) { exp32Go(dst, src) }

// hasSoftmaxAsm is false: without assembly, RowMaxShift32 and RowSums32
// run their twins.
const hasSoftmaxAsm = false

func rowMaxShift32(e, x, m *float32, rows, c int) {
	rowMaxShift32Go(sliceAt(e, rows*c), sliceAt(x, rows*c), sliceAt(m, rows), c)
}

func rowSums32(s *float64, e *float32, rows, c int) {
	rowSums32Go(sliceAt(s, rows), sliceAt(e, rows*c), c)
}

// hasLog1pAsm is false: without assembly, Log1p32 runs log1p32Go.
const hasLog1pAsm = false

func log1p32(dst, src []float32) { log1p32Go(dst, src) }

func expNegAbs32(dst, src []float32) { expNegAbs32Go(dst, src) }

func sigmoidGrad32(dst, x, y, e []float32, scale float32) { sigmoidGrad32Go(dst, x, y, e, scale) }

func subRows32(out, x *float32, l *float64, rows, c int) {
	subRows32Go(sliceAt(out, rows*c), sliceAt(x, rows*c), sliceAt(l, rows), c)
}

func scaleSubRows32(out, g, e *float32, k *float64, rows, c int) {
	scaleSubRows32Go(sliceAt(out, rows*c), sliceAt(g, rows*c), sliceAt(e, rows*c), sliceAt(k, rows), c)
}

func scaleRows32(out, e, k *float32, rows, c int) {
	scaleRows32Go(sliceAt(out, rows*c), sliceAt(e, rows*c), sliceAt(k, rows), c)
}
