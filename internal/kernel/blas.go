package kernel

import (
	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	"gorgonia.org/gorgonia"
)

// BLAS is gonum's BLAS with its matrix products, Sgemm and Dgemm, run by
// Gemm where its assembly micro-kernels run (amd64 with AVX2 and FMA,
// without the purego tag). Elsewhere the products stay gonum's: Gemm's Go
// twins round each multiply-add once, as the assembly does, which makes
// them the reference the tests hold the assembly to, and far slower than
// gonum's loops. Every other routine is gonum's.
type BLAS struct{ gonum.Implementation }

// The module's products run in Gemm: Gorgonia's and gorgonia/tensor's
// (gorgonia.Use), from the first import of a package of the module that
// computes. openblas.Use, called later, replaces it.
func init() { gorgonia.Use(BLAS{}) }

// ByGonum reports whether the products run in gonum's Sgemm and Dgemm:
// where the assembly micro-kernels do not run.
func (BLAS) ByGonum() bool { return !hasGemmAsm }

// Sgemm is gonum's Sgemm, by Gemm: the same arguments, checked by the same
// rules with the same panics.
func (impl BLAS) Sgemm(tA, tB gblas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if !hasGemmAsm {
		impl.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if !checkGemm(tA, tB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc) {
		return
	}
	Gemm(tA != gblas.NoTrans, tB != gblas.NoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Dgemm is gonum's Dgemm, by Gemm.
func (impl BLAS) Dgemm(tA, tB gblas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	if !hasGemmAsm {
		impl.Implementation.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if !checkGemm(tA, tB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc) {
		return
	}
	Gemm(tA != gblas.NoTrans, tB != gblas.NoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// checkGemm panics, with gonum's message, on the arguments gonum's
// xGEMM panics on, and reports whether there is a product to compute.
func checkGemm(tA, tB gblas.Transpose, m, n, k, la, lda, lb, ldb, lc, ldc int) bool {
	for _, t := range []gblas.Transpose{tA, tB} {
		if t != gblas.NoTrans && t != gblas.Trans && t != gblas.ConjTrans {
			panic("blas: illegal transpose")
		}
	}
	switch {
	case m < 0:
		panic("blas: m < 0")
	case n < 0:
		panic("blas: n < 0")
	case k < 0:
		panic("blas: k < 0")
	}
	ra, ca, rb, cb := m, k, k, n
	if tA != gblas.NoTrans {
		ra, ca = k, m
	}
	if tB != gblas.NoTrans {
		rb, cb = n, k
	}
	switch {
	case lda < max(1, ca):
		panic("blas: bad leading dimension of A")
	case ldb < max(1, cb):
		panic("blas: bad leading dimension of B")
	case ldc < max(1, n):
		panic("blas: bad leading dimension of C")
	}
	if m == 0 || n == 0 {
		return false
	}
	switch {
	case ra > 0 && la < (ra-1)*lda+ca:
		panic("blas: insufficient length of a")
	case rb > 0 && lb < (rb-1)*ldb+cb:
		panic("blas: insufficient length of b")
	case lc < (m-1)*ldc+n:
		panic("blas: insufficient length of c")
	}
	return true
}
