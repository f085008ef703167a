package kernel

import (
	"math"

	"github.com/gathergrad/gather/internal/parallel"
)

// FirstBadTarget returns the position of the first target that is
// neither ignore nor in [0, classes), or -1.
func FirstBadTarget[I Index](t []I, classes int, ignore int64) int {
	for p, v := range t {
		if y := int64(v); y != ignore && (y < 0 || y >= int64(classes)) {
			return p
		}
	}
	return -1
}

// ClassLossRows returns the sum of the losses of the rows of x (rows of c
// scores, t[r] the target of row r) and the denominator of their mean
// (see ClassDenominator), and with per not nil sets per[r] to the loss of
// row r. For row r with target y, not ignored, w the class weights, ε the
// smoothing and lse the row's log-sum-exp:
//
//	NLLLoss:      l = -w[y]·x[y]
//	CrossEntropy: l = (1-ε)·w[y]·(lse - x[y]) + (ε/c)·Σ_j w[j]·(lse - x[j])
//
// Blocks of entropyRows rows are summed on their own and then in order,
// so the result is the same for any GOMAXPROCS.
func ClassLossRows[T Float, I Index](o *ClassLoss, x []T, t []I, c int, per []float64) (float64, float64) {
	nb := (len(t) + entropyRows - 1) / entropyRows
	ls, ds := sums.Get(nb), sums.Get(nb)
	defer sums.Put(ls)
	defer sums.Put(ds)
	parallel.Run(nb, len(x), classLossRows[T, I]{o, x, t, c, per, *ls, *ds})
	var sum, denom float64
	for b := range *ls {
		sum += (*ls)[b]
		denom += (*ds)[b]
	}
	return sum, denom
}

// classLossRows is the Task of ClassLossRows: the sums of each block of
// entropyRows rows into sums and dens.
type classLossRows[T Float, I Index] struct {
	o          *ClassLoss
	x          []T
	t          []I
	c          int
	per        []float64
	sums, dens []float64
}

func (k classLossRows[T, I]) Part(lo, hi int) int {
	o, x, t, c, per := k.o, k.x, k.t, k.c, k.per
	ce := o.Entropy
	eps := o.Smoothing
	sc := getBlockScratch[T](c, ce)
	defer putBlockScratch(sc)
	e, m, s := sc.parts()
	_, f32 := any(x).([]float32)
	for b := lo; b < hi; b++ {
		r0, r1 := b*entropyRows, min((b+1)*entropyRows, len(t))
		if ce {
			expRows(e, m[:r1-r0], s, x[r0*c:r1*c], c)
			if f32 {
				logs32(s[:r1-r0]) // s[r] is now the log of the row's sum
			} else {
				for r, v := range s[:r1-r0] {
					s[r] = math.Log(v)
				}
			}
		}
		var ls, ds float64
		for r := r0; r < r1; r++ {
			y := int64(t[r])
			if !o.counted(y) {
				if per != nil {
					per[r] = 0
				}
				continue
			}
			row := x[r*c : (r+1)*c]
			wy := o.weight(int(y))
			var l float64
			if ce {
				lse := m[r-r0] + s[r-r0]
				l = wy * (lse - float64(row[y]))
				if eps != 0 {
					var sm float64
					for j, v := range row {
						sm += o.weight(j) * (lse - float64(v))
					}
					l = (1-eps)*l + eps/float64(c)*sm
				}
			} else {
				l = -wy * float64(row[y])
			}
			ls += l
			ds += wy
			if per != nil {
				per[r] = l
			}
		}
		k.sums[b], k.dens[b] = ls, ds
	}
	return -1
}

// ClassLossGrad writes (or with add adds) into dst the gradient of the
// loss of ClassLossRows: each row's gradient times scale, or times ups[r]
// when ups is not nil. For row r with target y, not ignored, scaled by k,
// with p = softmax(x[r]) and W = Σ_j w[j]:
//
//	NLLLoss:      g[j] = -k·w[y] if j == y, else 0
//	CrossEntropy: g[j] = k·((1-ε)·w[y]·(p[j] - [j == y]) + (ε/c)·(p[j]·W - w[j]))
//
// An ignored row's gradient is zero.
func ClassLossGrad[T Float, I Index](o *ClassLoss, dst, x []T, t []I, c int, scale float64, ups []float64, add bool) {
	parallel.Run(len(t), len(x), classLossGradTask[T, I]{o, dst, x, t, c, scale, ups, add})
}

// classLossGradTask is the Task of ClassLossGrad.
type classLossGradTask[T Float, I Index] struct {
	o      *ClassLoss
	dst, x []T
	t      []I
	c      int
	scale  float64
	ups    []float64
	add    bool
}

func (k classLossGradTask[T, I]) Part(lo, hi int) int {
	classLossGrad(k.o, k.dst, k.x, k.t, k.c, k.scale, k.ups, k.add, lo, hi)
	return -1
}

// classLossGrad is ClassLossGrad for the rows [lo, hi).
func classLossGrad[T Float, I Index](o *ClassLoss, dst, x []T, t []I, c int, scale float64, ups []float64, add bool, lo, hi int) {
	ce := o.Entropy
	if !ce {
		// NLLLoss: the rows cleared at once (unless added to), then
		// each counted row's target.
		if !add {
			clear(dst[lo*c : hi*c])
		}
		for r := lo; r < hi; r++ {
			if y := int64(t[r]); o.counted(y) {
				k := scale
				if ups != nil {
					k = ups[r]
				}
				dst[r*c+int(y)] += T(-k * o.weight(int(y)))
			}
		}
		return
	}
	eps := o.Smoothing
	wsum := float64(c)
	if o.Weights != nil {
		wsum = 0
		for _, w := range o.Weights {
			wsum += w
		}
	}
	sc := getBlockScratch[T](c, ce)
	defer putBlockScratch(sc)
	e, m, s := sc.parts()
	e32, f32 := any(e).([]float32)
	var ks [entropyRows]float32
	for r0 := lo; r0 < hi; r0 += entropyRows {
		r1 := min(r0+entropyRows, hi)
		if ce {
			expRows(e, m[:r1-r0], s, x[r0*c:r1*c], c)
		}
		if ce && f32 && eps == 0 && !add {
			// Every row scaled at once (an ignored row by 0, then
			// cleared), then each counted row's target.
			for r := r0; r < r1; r++ {
				ks[r-r0] = 0
				if y := int64(t[r]); o.counted(y) {
					k := scale
					if ups != nil {
						k = ups[r]
					}
					ks[r-r0] = float32(k * ((1 - eps) * o.weight(int(y))) * (1 / s[r-r0]))
				}
			}
			ScaleRows32(any(dst[r0*c:r1*c]).([]float32), e32[:(r1-r0)*c], ks[:r1-r0], c)
			for r := r0; r < r1; r++ {
				y := int64(t[r])
				if !o.counted(y) {
					clear(dst[r*c : (r+1)*c])
					continue
				}
				k := scale
				if ups != nil {
					k = ups[r]
				}
				a, inv := (1-eps)*o.weight(int(y)), 1/s[r-r0]
				dst[r*c+int(y)] = T(k * (a*(float64(e[(r-r0)*c+int(y)])*inv) - a))
			}
			continue
		}
		for r := r0; r < r1; r++ {
			out := dst[r*c : (r+1)*c]
			y := int64(t[r])
			if !o.counted(y) {
				if !add {
					clear(out)
				}
				continue
			}
			k := scale
			if ups != nil {
				k = ups[r]
			}
			wy := o.weight(int(y))
			er := e[(r-r0)*c : (r-r0+1)*c]
			out = out[:len(er)]
			inv := 1 / s[r-r0]
			a := (1 - eps) * wy
			if eps != 0 {
				for j := range out {
					pj := float64(er[j]) * inv
					g := a * pj
					if int64(j) == y {
						g -= a
					}
					g += eps / float64(c) * (pj*wsum - o.weight(j))
					if add {
						out[j] += T(k * g)
					} else {
						out[j] = T(k * g)
					}
				}
				continue
			}
			// Without smoothing: every element as if it were not the
			// target, without a branch per element, then the target's.
			before := out[y]
			scaleRow(out, er, k*a*inv, add)
			g := T(k * (a*(float64(er[y])*inv) - a))
			if add {
				g += before
			}
			out[y] = g
		}
	}
}

// sums holds scratch slices of float64 for the sums of blocks.
var sums = newScratch[float64]()

// scratch32 and scratch64 hold scratch slices of float32 and float64
// elements; floatScratch returns T's.
var scratch32, scratch64 = newScratch[float32](), newScratch[float64]()

func floatScratch[T Float]() scratch[T] {
	if sc, ok := any(scratch32).(scratch[T]); ok {
		return sc
	}
	return any(scratch64).(scratch[T])
}

// scratch is a free list of slices of T, so that a kernel called on
// every run of a graph takes its scratch without allocating.
type scratch[T any] struct{ list parallel.List[[]T] }

func newScratch[T any]() scratch[T] { return scratch[T]{parallel.NewList[[]T](16)} }

// Get returns a slice of n elements (not cleared) from the list, or a new
// one.
func (sc scratch[T]) Get(n int) *[]T {
	p := sc.list.Get()
	if cap(*p) < n {
		*p = make([]T, n)
	}
	*p = (*p)[:n]
	return p
}

// Put gives p back.
func (sc scratch[T]) Put(p *[]T) { sc.list.Put(p) }

// rangeTask is the parallel.Task of a kernel's work on a range: a struct
// of what it reads, with a rows method, so that a parallel call of it
// allocates nothing (a closure handed to parallel.For is allocated).
type rangeTask[K interface{ rows(lo, hi int) }] struct{ k K }

func (t rangeTask[K]) Part(lo, hi int) int {
	t.k.rows(lo, hi)
	return -1
}

// SquaredErrors sets out[i] = (x[i] - y[i])².
func SquaredErrors[T Float](out, x, y []T) {
	y, out = y[:len(x)], out[:len(x)]
	for i, v := range x {
		d := v - y[i]
		out[i] = d * d
	}
}

// SquaredErrorSum returns Σ (x[i] - y[i])², each term computed in T and
// summed in float64.
func SquaredErrorSum[T Float](x, y []T) float64 {
	y = y[:len(x)]
	var s float64
	for i, v := range x {
		d := v - y[i]
		s += float64(d * d)
	}
	return s
}

// SquaredErrorGrad writes (or with add, adds) into dst scale·(x - y),
// times up[i] elementwise when up is not nil: the gradient of the squared
// errors' sum (scale 2), mean (2/n), or per-element losses (2, up the
// upstream gradient), with respect to x; -scale gives y's.
func SquaredErrorGrad[T Float](dst, x, y, up []T, scale float64, add bool) {
	y, dst = y[:len(x)], dst[:len(x)]
	c := T(scale)
	for i, v := range x {
		g := c * (v - y[i])
		if up != nil {
			g *= up[i]
		}
		if add {
			dst[i] += g
		} else {
			dst[i] = g
		}
	}
}
