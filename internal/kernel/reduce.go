package kernel

// A Reduction is the layout of a sum over some axes of a row-major
// tensor: the tensor's shape with its axes of size 1 dropped and each run
// of adjacent axes alike (all reduced, or all kept) merged into one. The
// loops over it recurse once per run, so they allocate nothing.
type Reduction struct {
	sizes   []int  // each run's size
	in      []int  // each run's stride in the input
	out     []int  // each run's stride in the output; 0 for a reduced run
	reduced []bool // whether each run is reduced
	// Count is the number of input elements summed into each output
	// element: the product of the reduced axes' sizes.
	Count int
}

// NewReduction returns the layout of a sum over the axes k of shape for
// which reduced[k] holds.
func NewReduction(shape []int, reduced []bool) *Reduction {
	r := &Reduction{Count: 1}
	for k, s := range shape {
		if reduced[k] {
			r.Count *= s
		}
		if s == 1 {
			continue
		}
		if n := len(r.sizes); n > 0 && r.reduced[n-1] == reduced[k] {
			r.sizes[n-1] *= s
			continue
		}
		r.sizes = append(r.sizes, s)
		r.reduced = append(r.reduced, reduced[k])
	}
	r.in = make([]int, len(r.sizes))
	r.out = make([]int, len(r.sizes))
	in, out := 1, 1
	for k := len(r.sizes) - 1; k >= 0; k-- {
		r.in[k] = in
		in *= r.sizes[k]
		if !r.reduced[k] {
			r.out[k] = out
			out *= r.sizes[k]
		}
	}
	return r
}

// ReduceSum sets dst to the sums of src over r's reduced axes, in the
// order of src's elements: dst holds the kept axes' elements, row-major.
func ReduceSum[T Float](dst, src []T, r *Reduction) {
	Clear(dst)
	if len(src) == 0 {
		return
	}
	if len(r.sizes) == 0 {
		dst[0] = src[0]
		return
	}
	reduceRun(dst, src, r, 0, 0, 0)
}

func reduceRun[T Float](dst, src []T, r *Reduction, k, si, di int) {
	s := r.sizes[k]
	if k == len(r.sizes)-1 {
		x := src[si : si+s]
		if r.reduced[k] {
			acc := dst[di]
			for _, v := range x {
				acc += v
			}
			dst[di] = acc
			return
		}
		AddInto(dst[di:di+s], x)
		return
	}
	for i := range s {
		reduceRun(dst, src, r, k+1, si+i*r.in[k], di+i*r.out[k])
	}
}

// Spread writes (add false) or adds (add true) scale·g[o] into every
// element of dst that the sum of r sums into g's element o: the gradient
// of ReduceSum (scale 1) or of a mean (scale 1/Count).
func Spread[T Float](dst, g []T, scale T, add bool, r *Reduction) {
	if len(dst) == 0 {
		return
	}
	if len(r.sizes) == 0 {
		if add {
			dst[0] += scale * g[0]
		} else {
			dst[0] = scale * g[0]
		}
		return
	}
	spreadRun(dst, g, scale, add, r, 0, 0, 0)
}

func spreadRun[T Float](dst, g []T, scale T, add bool, r *Reduction, k, di, gi int) {
	s := r.sizes[k]
	if k == len(r.sizes)-1 {
		x := dst[di : di+s]
		if r.reduced[k] {
			v := scale * g[gi]
			if add {
				for i := range x {
					x[i] += v
				}
			} else {
				for i := range x {
					x[i] = v
				}
			}
			return
		}
		y := g[gi : gi+s]
		if add {
			for i := range x {
				x[i] += scale * y[i]
			}
		} else {
			for i := range x {
				x[i] = scale * y[i]
			}
		}
		return
	}
	for i := range s {
		spreadRun(dst, g, scale, add, r, k+1, di+i*r.in[k], gi+i*r.out[k])
	}
}

// SumAll returns the sum of x's elements, in order: the sum ReduceSum
// makes over every axis.
func SumAll[T Float](x []T) T {
	var acc T
	for _, v := range x {
		acc += v
	}
	return acc
}
