package kernel

import "github.com/gathergrad/gather/internal/parallel"

// BatchDot is
//
//	for i, j: out[i*k+j] = Σ_t a[i*d+t]·b[(i*k+j)*d+t]
func BatchDot[T Float](out, a, b []T, k, d int) {
	n := len(out) / k
	parallel.Run(n, len(b), rangeTask[batchDot[T]]{batchDot[T]{out, a, b, k, d}})
}

// batchDot is the work of BatchDot on [lo, hi).
type batchDot[T Float] struct {
	out []T
	a   []T
	b   []T
	k   int
	d   int
}

func (t batchDot[T]) rows(lo, hi int) {
	out, a, b, k, d := t.out, t.a, t.b, t.k, t.d
	for i := lo; i < hi; i++ {
		ai := a[i*d : (i+1)*d]
		for j := range k {
			bj := b[(i*k+j)*d : (i*k+j+1)*d]
			bj = bj[:len(ai)]
			var s T
			for t, v := range ai {
				s += v * bj[t]
			}
			out[i*k+j] = s
		}
	}
}

// BatchDotGrad is, for wrt 0,
//
//	dst[i*d+t] = Σ_j g[i*k+j]·b[(i*k+j)*d+t]
//
// and for wrt 1
//
//	dst[(i*k+j)*d+t] = g[i*k+j]·a[i*d+t]
//
// each added into dst with add.
func BatchDotGrad[T Float](dst, a, b, g []T, k, d, wrt int, add bool) {
	n := len(g) / k
	parallel.Run(n, len(b), rangeTask[batchDotGrad[T]]{batchDotGrad[T]{dst, a, b, g, k, d, wrt, add}})
}

// batchDotGrad is the work of BatchDotGrad on [lo, hi).
type batchDotGrad[T Float] struct {
	dst []T
	a   []T
	b   []T
	g   []T
	k   int
	d   int
	wrt int
	add bool
}

func (t batchDotGrad[T]) rows(lo, hi int) {
	dst, a, b, g, k, d, wrt, add := t.dst, t.a, t.b, t.g, t.k, t.d, t.wrt, t.add
	for i := lo; i < hi; i++ {
		ai := a[i*d : (i+1)*d]
		if wrt == 0 {
			di := dst[i*d : (i+1)*d]
			if !add {
				clear(di)
			}
			for j := range k {
				AddRow(di, b[(i*k+j)*d:(i*k+j+1)*d], g[i*k+j])
			}
			continue
		}
		for j := range k {
			dj := dst[(i*k+j)*d : (i*k+j+1)*d]
			dj = dj[:len(ai)]
			gj := g[i*k+j]
			if add {
				AddRow(dj, ai, gj)
				continue
			}
			for t, v := range ai {
				dj[t] = gj * v
			}
		}
	}
}
