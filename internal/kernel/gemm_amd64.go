//go:build !purego

package kernel

import "golang.org/x/sys/cpu"

// hasGemmAsm reports whether the processor runs the assembly
// micro-kernels, which use AVX2 and FMA.
var hasGemmAsm = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// The micro-kernels: the assembly where the processor has AVX2 and FMA,
// else the Go twins.
var (
	microS = pick(hasGemmAsm, microSAsm, microSGo)
	microD = pick(hasGemmAsm, microDAsm, microDGo)
	// directS and directD write a full tile into c (gemmParams.direct).
	directS = pick(hasGemmAsm, directSAsm, nil)
	directD = pick(hasGemmAsm, directDAsm, nil)
)

func directSAsm(kc int, ap, bp, c []float32, ldc int, add bool) {
	_, _, _ = ap[kc*6-1], bp[kc*16-1], c[5*ldc+15]
	sgemm6x16(kc, &ap[0], &bp[0], &c[0], ldc, add)
}

func directDAsm(kc int, ap, bp, c []float64, ldc int, add bool) {
	_, _, _ = ap[kc*6-1], bp[kc*8-1], c[5*ldc+7]
	dgemm6x8(kc, &ap[0], &bp[0], &c[0], ldc, add)
}

// sgemm6x16 is microSGo's tile written into c, rows ldc apart (c = tile,
// or c += tile with add), for kc ≥ 1 (gemm_amd64.s).
//
//go:noescape
func sgemm6x16(kc int, ap, bp, c *float32, ldc int, add bool)

// dgemm6x8 is sgemm6x16 for float64 (gemm_amd64.s).
//
//go:noescape
func dgemm6x8(kc int, ap, bp, c *float64, ldc int, add bool)

func pick[F any](cond bool, a, b F) F {
	if cond {
		return a
	}
	return b
}

// microSAsm and microDAsm are the assembly kernels writing into tile, a
// c of rows nr apart.
func microSAsm(kc int, ap, bp, tile []float32) { directSAsm(kc, ap, bp, tile, 16, false) }
func microDAsm(kc int, ap, bp, tile []float64) { directDAsm(kc, ap, bp, tile, 8, false) }
