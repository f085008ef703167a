package kernel

import (
	"testing"

	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/gathergrad/gather/internal/ref"
)

// BenchmarkGemm: float32 products by Gemm and by gonum's Sgemm, on the
// same operands (ref.GemmShapes), at the GOMAXPROCS the run sets (-cpu
// 1,2); package openblas's BenchmarkGemm times OpenBLAS on them.
func BenchmarkGemm(b *testing.B) {
	for _, s := range ref.GemmShapes {
		a, bm, c, lda, ldb, flops := ref.GemmOperands(s.M, s.N, s.K, s.TransA, s.TransB)
		ta, tb := gblas.NoTrans, gblas.NoTrans
		if s.TransA {
			ta = gblas.Trans
		}
		if s.TransB {
			tb = gblas.Trans
		}
		for _, impl := range []struct {
			name string
			gemm func()
		}{
			{"ours", func() { Gemm(s.TransA, s.TransB, s.M, s.N, s.K, 1, a, lda, bm, ldb, 0, c, s.N) }},
			{"gonum", func() { gonum.Implementation{}.Sgemm(ta, tb, s.M, s.N, s.K, 1, a, lda, bm, ldb, 0, c, s.N) }},
		} {
			b.Run(s.Name+"/impl="+impl.name, func(b *testing.B) {
				for b.Loop() {
					impl.gemm()
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
