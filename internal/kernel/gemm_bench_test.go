package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"

	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// gemmBenchShapes are the products of the step benchmarks (a batch of a
// few hundred rows through layers of 16 to 256 columns, forward and both
// gradients) and squares of 512 and 1024.
var gemmBenchShapes = []struct {
	name           string
	transA, transB bool
	m, n, k        int
}{
	{"256x64x64", false, true, 256, 64, 64},
	{"256x256x128", false, true, 256, 256, 128},
	{"grad-x/256x128x256", false, false, 256, 128, 256},
	{"grad-w/256x128x256", true, false, 256, 128, 256},
	{"512x16x40", false, true, 512, 16, 40},
	{"512", false, false, 512, 512, 512},
	{"1024", false, false, 1024, 1024, 1024},
}

// BenchmarkGemm: float32 products by Gemm and by gonum's Sgemm, on the
// same operands, GOMAXPROCS as the run sets it (-cpu 1,2).
func BenchmarkGemm(b *testing.B) {
	for _, s := range gemmBenchShapes {
		r := rand.New(rand.NewPCG(1, 2))
		a, bm, c := make([]float32, s.m*s.k), make([]float32, s.k*s.n), make([]float32, s.m*s.n)
		for i := range a {
			a[i] = float32(r.NormFloat64())
		}
		for i := range bm {
			bm[i] = float32(r.NormFloat64())
		}
		lda, ldb := s.k, s.n
		if s.transA {
			lda = s.m
		}
		if s.transB {
			ldb = s.k
		}
		flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
		report := func(b *testing.B) {
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		}
		b.Run(fmt.Sprintf("%s/impl=ours", s.name), func(b *testing.B) {
			for b.Loop() {
				Gemm(s.transA, s.transB, s.m, s.n, s.k, 1, a, lda, bm, ldb, 0, c, s.n)
			}
			report(b)
		})
		b.Run(fmt.Sprintf("%s/impl=gonum", s.name), func(b *testing.B) {
			ta, tb := gblas.NoTrans, gblas.NoTrans
			if s.transA {
				ta = gblas.Trans
			}
			if s.transB {
				tb = gblas.Trans
			}
			for b.Loop() {
				gonum.Implementation{}.Sgemm(ta, tb, s.m, s.n, s.k, 1, a, lda, bm, ldb, 0, c, s.n)
			}
			report(b)
		})
	}
}
