package kernel

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// The dense updates give each element PyTorch's arithmetic, written out
// here element by element, with the same bits on one goroutine and on
// several (the blocks split between them).
func TestDenseOptimSplit(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const n = 5*sgdBlock + 77
	fill := func() []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	w0, g0, m0, v0 := fill(), fill(), fill(), fill()
	for i := range v0 {
		v0[i] *= v0[i] // a second moment is not negative
	}
	const lr, b1, b2, eps, wd, step = 0.01, 0.9, 0.999, 1e-8, 0.1, 3
	for _, decoupled := range []bool{false, true} {
		// The reference: AdamDense's loop on one element at a time.
		w, m, v := slices.Clone(w0), slices.Clone(m0), slices.Clone(v0)
		size, shrink, tw := float32(lr/(1-math.Pow(b1, step))), float32(1), float32(wd)
		bc2 := float32(math.Sqrt(1 - math.Pow(b2, step)))
		if decoupled {
			shrink, tw = float32(1-lr*wd), 0
		}
		for i := range w {
			x := w[i] * shrink
			// Each product converted, so that none is fused with a sum.
			d := g0[i] + float32(tw*x)
			m[i] = float32(float32(b1)*m[i]) + float32(float32(1-b1)*d)
			v[i] = float32(float32(b2)*v[i]) + float32(float32(1-b2)*float32(d*d))
			w[i] = x - float32(size*m[i])/(float32(math.Sqrt(float64(v[i])))/bc2+float32(eps))
		}
		for _, procs := range []int{1, 4} {
			prev := runtime.GOMAXPROCS(procs)
			gw, gm, gv := slices.Clone(w0), slices.Clone(m0), slices.Clone(v0)
			AdamDense(gw, g0, gm, gv, lr, b1, b2, eps, wd, step, decoupled)
			runtime.GOMAXPROCS(prev)
			if !slices.Equal(gw, w) || !slices.Equal(gm, m) || !slices.Equal(gv, v) {
				t.Fatalf("AdamDense (decoupled %v) on %d goroutines differs from the reference", decoupled, procs)
			}
		}
	}
	w, s := slices.Clone(w0), slices.Clone(v0)
	for i := range w {
		d := g0[i] + float32(float32(wd)*w[i])
		s[i] += float32(d * d)
		w[i] -= float32(float32(lr)*d) / (float32(math.Sqrt(float64(s[i]))) + float32(eps))
	}
	for _, procs := range []int{1, 4} {
		prev := runtime.GOMAXPROCS(procs)
		gw, gs := slices.Clone(w0), slices.Clone(v0)
		AdagradDense(gw, g0, gs, lr, eps, wd)
		runtime.GOMAXPROCS(prev)
		if !slices.Equal(gw, w) || !slices.Equal(gs, s) {
			t.Fatalf("AdagradDense on %d goroutines differs from the reference", procs)
		}
	}
}
