//go:build openblas && cgo

package openblas_test

import (
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/netlib/blas/netlib"

	"github.com/gathergrad/gather/internal/ref"
)

// BenchmarkGemm: OpenBLAS's Sgemm on package kernel's BenchmarkGemm
// operands (ref.GemmShapes), on one thread of OpenBLAS's unless
// OPENBLAS_NUM_THREADS says otherwise.
func BenchmarkGemm(b *testing.B) {
	for _, s := range ref.GemmShapes {
		a, bm, c, lda, ldb, flops := ref.GemmOperands(s.M, s.N, s.K, s.TransA, s.TransB)
		ta, tb := blas.NoTrans, blas.NoTrans
		if s.TransA {
			ta = blas.Trans
		}
		if s.TransB {
			tb = blas.Trans
		}
		b.Run(s.Name+"/impl=openblas", func(b *testing.B) {
			for b.Loop() {
				netlib.Implementation{}.Sgemm(ta, tb, s.M, s.N, s.K, 1, a, lda, bm, ldb, 0, c, s.N)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
