//go:build !purego

package kernel

import "golang.org/x/sys/cpu"

// hasAdamAsm reports whether the processor runs adamRow32, which uses AVX
// instructions.
var hasAdamAsm = cpu.X86.HasAVX

// adamRow32 is adamRow32Go on the n elements (a multiple of 8) from w, grad,
// m and v, eight at a time with AVX (adam_amd64.s). Call it only when
// hasAdamAsm is set.
//
//go:noescape
func adamRow32(w, grad, m, v *float32, n int, c *AdamConsts)

// adamDense32 is adamDenseTask's float32 loop on the n elements (a
// multiple of 8) from w, grad, m and v, eight at a time with AVX
// (adam_amd64.s). Call it only when hasAdamAsm is set.
//
//go:noescape
func adamDense32(w, grad, m, v *float32, n int, c *adamDenseConsts32)
