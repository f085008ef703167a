//go:build !purego

package kernel

import "golang.org/x/sys/cpu"

// hasGemmAsm reports whether the processor runs the assembly
// micro-kernels, which use AVX2 and FMA.
var hasGemmAsm = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// The micro-kernels: the assembly where the processor has AVX2 and FMA,
// else the Go twins.
var (
	kernelS = pick(hasGemmAsm, kernelSAsm, kernelSGo)
	kernelD = pick(hasGemmAsm, kernelDAsm, kernelDGo)
)

func kernelSAsm(kc int, a []float32, ai, al int, b []float32, bl int, c []float32, ldc int, add bool) {
	_, _, _ = a[5*ai+(kc-1)*al], b[(kc-1)*bl+15], c[5*ldc+15]
	sgemm6x16(kc, &a[0], ai, al, &b[0], bl, &c[0], ldc, add)
}

func kernelDAsm(kc int, a []float64, ai, al int, b []float64, bl int, c []float64, ldc int, add bool) {
	_, _, _ = a[5*ai+(kc-1)*al], b[(kc-1)*bl+7], c[5*ldc+7]
	dgemm6x8(kc, &a[0], ai, al, &b[0], bl, &c[0], ldc, add)
}

// sgemm6x16 is kernelSGo for kc ≥ 1, the strides checked by the caller
// (gemm_amd64.s).
//
//go:noescape
func sgemm6x16(kc int, a *float32, ai, al int, b *float32, bl int, c *float32, ldc int, add bool)

// dgemm6x8 is kernelDGo for kc ≥ 1 (gemm_amd64.s).
//
//go:noescape
func dgemm6x8(kc int, a *float64, ai, al int, b *float64, bl int, c *float64, ldc int, add bool)

func pick[F any](cond bool, a, b F) F {
	if cond {
		return a
	}
	return b
}
