//go:build !amd64 || purego

package kernel

// hasExpAsm is false: without assembly, Exp32 runs exp32Go.
const hasExpAsm = false

func exp32(dst, src []float32) { exp32Go(dst, src) }
