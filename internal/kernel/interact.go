package kernel

import "github.com/gathergrad/gather/internal/parallel"

// DotInteract is DLRM's dot interaction, for each of n samples with the
// dense vector x[b] [d] and f sparse vectors s[b] [f·d] (vector 0 is x[b],
// vector i+1 is s[b][i·d:(i+1)·d]):
//
//	out[b][:d] = x[b]
//	out[b][d+k] = Σ_t v_i[t]·v_j[t]   for the k-th pair i < j of the f+1 vectors
//
// (each dot product summed as dot4 sums it), the pairs in the order of
// the strict lower triangle of [v_i·v_j] row by row with lower ((1, 0),
// (2, 0), (2, 1), (3, 0)...: facebookresearch/dlrm's), else of its upper
// triangle row by row ((0, 1), (0, 2), ..., (0, f), (1, 2)...: TorchRec's).
//
// out is [n, d + (f+1)·f/2]. Samples are split across goroutines.
func DotInteract[T Float](out, x, s []T, n, d, f int, lower bool) {
	w := d + (f+1)*f/2
	parallel.Run(n, n*w*d, interactTask[T]{out, x, s, d, f, lower})
}

// pair returns the vectors i < j of the pair at step v of row u of the
// lower (v < u) or upper (v > u) triangle.
func pair(u, v int, lower bool) (i, j int) {
	if lower {
		return v, u
	}
	return u, v
}

// rowSpan returns the steps [lo, hi) of row u of the triangle.
func rowSpan(u, f int, lower bool) (lo, hi int) {
	if lower {
		return 0, u
	}
	return u + 1, f + 1
}

// interactTask is DotInteract's work on the samples [lo, hi).
type interactTask[T Float] struct {
	out, x, s []T
	d, f      int
	lower     bool
}

func (t interactTask[T]) Part(lo, hi int) int {
	out, x, s, d, f := t.out, t.x, t.s, t.d, t.f
	w := d + (f+1)*f/2
	for b := lo; b < hi; b++ {
		o, xb, sb := out[b*w:(b+1)*w], x[b*d:(b+1)*d], s[b*f*d:(b+1)*f*d]
		copy(o, xb)
		k := d
		for u := range f + 1 {
			lo, hi := rowSpan(u, f, t.lower)
			for v := lo; v < hi; v++ {
				i, j := pair(u, v, t.lower)
				o[k] = dot4(vec(xb, sb, i, d), vec(xb, sb, j, d))
				k++
			}
		}
	}
	return -1
}

// vec returns vector i of a sample: x for 0, the (i-1)-th of s after it.
func vec[T Float](x, s []T, i, d int) []T {
	if i == 0 {
		return x
	}
	return s[(i-1)*d : i*d : i*d]
}

// DotInteractGrad is the gradient of DotInteract for upstream gradient g
// [n, d + (f+1)·f/2], with respect to x (wrt 0, dst [n, d]) or s (wrt 1,
// dst [n, f·d]):
//
//	∂x[b] = g[b][:d] + Σ_{pairs (0, j)} g[b][d+k]·v_j
//	∂v_i  = Σ_{pairs (i, j) or (j, i)} g[b][d+k]·v_j      for i ≥ 1
//
// each vector's terms added in the order of the pairs (lower as for
// DotInteract). With add the gradient is added into dst. Samples are
// split across goroutines.
func DotInteractGrad[T Float](dst, x, s, g []T, n, d, f, wrt int, add, lower bool) {
	w := d + (f+1)*f/2
	parallel.Run(n, n*w*d, interactGradTask[T]{dst, x, s, g, d, f, wrt, add, lower})
}

// interactGradTask is DotInteractGrad's work on the samples [lo, hi).
type interactGradTask[T Float] struct {
	dst, x, s, g []T
	d, f, wrt    int
	add, lower   bool
}

func (t interactGradTask[T]) Part(lo, hi int) int {
	dst, x, s, g, d, f, wrt, add := t.dst, t.x, t.s, t.g, t.d, t.f, t.wrt, t.add
	w := d + (f+1)*f/2
	width := d
	if wrt == 1 {
		width = f * d
	}
	for b := lo; b < hi; b++ {
		db, xb, sb, gb := dst[b*width:(b+1)*width], x[b*d:(b+1)*d], s[b*f*d:(b+1)*f*d], g[b*w:(b+1)*w]
		if !add {
			clear(db)
		}
		if wrt == 0 {
			for t := range db {
				db[t] += gb[t]
			}
		}
		k := d
		for u := range f + 1 {
			lo, hi := rowSpan(u, f, t.lower)
			for v := lo; v < hi; v++ {
				i, j := pair(u, v, t.lower)
				vi, vj, c := vec(xb, sb, i, d), vec(xb, sb, j, d), gb[k]
				k++
				if wrt == 0 {
					if i == 0 {
						AddRow(db, vj, c)
					}
					continue
				}
				if i > 0 {
					AddRow(db[(i-1)*d:i*d], vj, c)
				}
				AddRow(db[(j-1)*d:j*d], vi, c)
			}
		}
	}
	return -1
}

// dot4 returns Σ_t a[t]·b[t], summed in four chains (t mod 4) added as
// (0 + 1) + (2 + 3), so that the additions do not wait on each other.
func dot4[T Float](a, b []T) T {
	b = b[:len(a)]
	var s0, s1, s2, s3 T
	t := 0
	for ; t+4 <= len(a); t += 4 {
		s0 += a[t] * b[t]
		s1 += a[t+1] * b[t+1]
		s2 += a[t+2] * b[t+2]
		s3 += a[t+3] * b[t+3]
	}
	for ; t < len(a); t++ {
		s0 += a[t] * b[t]
	}
	return (s0 + s1) + (s2 + s3)
}
