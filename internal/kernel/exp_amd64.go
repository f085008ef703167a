//go:build !purego

package kernel

import "golang.org/x/sys/cpu"

// hasExpAsm reports whether the processor runs exp32, which uses AVX2
// and fused multiply-add (FMA3) instructions.
var hasExpAsm = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// exp32 is exp32Go in AVX2 and FMA assembly, eight elements per instruction
// (exp_amd64.s); len(src) must be a multiple of 8. Call it only when
// hasExpAsm is set.
//
//go:noescape
func exp32(dst, src []float32)

// hasSoftmaxAsm reports whether the processor runs rowMaxShift32 and
// rowSums32, which use AVX2 instructions.
var hasSoftmaxAsm = cpu.X86.HasAVX2

// rowMaxShift32 is rowMaxShift32Go in AVX2 assembly (exp_amd64.s) on rows
// rows of c elements, c > 0. Call it only when hasSoftmaxAsm is set.
//
//go:noescape
func rowMaxShift32(e, x, m *float32, rows, c int)

// rowSums32 is rowSums32Go in AVX assembly (exp_amd64.s) on rows rows of c
// elements, c > 0. Call it only when hasSoftmaxAsm is set.
//
//go:noescape
func rowSums32(s *float64, e *float32, rows, c int)

// hasLog1pAsm reports whether the processor runs log1p32, which uses AVX
// instructions.
var hasLog1pAsm = cpu.X86.HasAVX

// log1p32 is log1p32Go in AVX assembly, eight elements per instruction
// (exp_amd64.s); len(src) must be a multiple of 8. Call it only when
// hasLog1pAsm is set.
//
//go:noescape
func log1p32(dst, src []float32)

// expNegAbs32 is exp32 of -|src[i]| (exp_amd64.s); len(src) must be a
// multiple of 8. Call it only when hasExpAsm is set.
//
//go:noescape
func expNegAbs32(dst, src []float32)

// sigmoidGrad32 is sigmoidGrad32Go in AVX assembly, eight elements per
// instruction (exp_amd64.s); len(x) must be a multiple of 8. Call it only
// when hasExpAsm is set.
//
//go:noescape
func sigmoidGrad32(dst, x, y, e []float32, scale float32)

// subRows32 is subRows32Go in AVX assembly (exp_amd64.s) on rows rows of
// c elements, c > 0. Call it only when hasSoftmaxAsm is set.
//
//go:noescape
func subRows32(out, x *float32, l *float64, rows, c int)

// scaleSubRows32 is scaleSubRows32Go in AVX assembly (exp_amd64.s) on
// rows rows of c elements, c > 0. Call it only when hasSoftmaxAsm is set.
//
//go:noescape
func scaleSubRows32(out, up, e *float32, k *float64, rows, c int)

// scaleRows32 is scaleRows32Go in AVX assembly (exp_amd64.s) on rows rows
// of c elements, c > 0. Call it only when hasSoftmaxAsm is set.
//
//go:noescape
func scaleRows32(out, e, k *float32, rows, c int)
