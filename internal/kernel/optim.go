package kernel

import (
	"math"

	"github.com/gathergrad/gather/internal/parallel"
)

// The row updates of the sparse optimisers. Each updates the rows of a
// table w (rows of dim values) that rows names, distinct, with the
// gradient g (row k the gradient of row rows[k]); the rows are split
// across goroutines, each row updated by one, so the result does not
// depend on GOMAXPROCS. Each is O(len(rows) × dim).

// prefetchAhead asks for the rows rows[k+rowsAhead] (rows of dim elements)
// of each of ts, when k+rowsAhead is below hi: the rows a batch names lie
// scattered through the table, and each update would otherwise wait for
// its row to come from memory.
func prefetchAhead[T Float](rows []int64, k, hi, dim int, ts ...[]T) {
	if k+rowsAhead >= hi {
		return
	}
	q := int(rows[k+rowsAhead])
	for _, t := range ts {
		PrefetchRow(t[q*dim : (q+1)*dim])
	}
}

// SGDRows is
//
//	for k, r := range rows { w[r] -= lr * (g[k] + wd*w[r]) }
//
// each product rounded before the sum, so that without weight decay it
// equals a dense solver's separate multiply and add (AddRow).
func SGDRows[T Float](w, g []T, rows []int64, dim int, lr, wd T) {
	parallel.Run(len(rows), len(rows)*dim, sgdTask[T]{w, g, rows, dim, lr, wd})
}

type sgdTask[T Float] struct {
	w, g   []T
	rows   []int64
	dim    int
	lr, wd T
}

func (t sgdTask[T]) Part(lo, hi int) int {
	w, g, rows, dim, lr, wd := t.w, t.g, t.rows, t.dim, t.lr, t.wd
	for k := lo; k < hi; k++ {
		prefetchAhead(rows, k, hi, dim, w)
		r := int(rows[k])
		wr, gr := w[r*dim:(r+1)*dim], g[k*dim:(k+1)*dim]
		if wd == 0 {
			AddRow(wr, gr, -lr)
			continue
		}
		gr = gr[:len(wr)]
		for j := range wr {
			d := gr[j] + T(wd*wr[j])
			// The conversion rounds the product, so that it is not fused
			// with the addition.
			wr[j] += T(-lr * d)
		}
	}
	return -1
}

// AdamRows32 is AdamRow32 on each named row of a float32 table w and its
// moments m and v (of w's shape).
func AdamRows32(w, g, m, v []float32, rows []int64, dim int, c *AdamConsts) {
	parallel.Run(len(rows), len(rows)*dim, adam32Task{w, g, m, v, rows, dim, c})
}

type adam32Task struct {
	w, g, m, v []float32
	rows       []int64
	dim        int
	c          *AdamConsts
}

func (t adam32Task) Part(lo, hi int) int {
	dim := t.dim
	for k := lo; k < hi; k++ {
		prefetchAhead(t.rows, k, hi, dim, t.w, t.m, t.v)
		r := int(t.rows[k])
		AdamRow32(t.w[r*dim:(r+1)*dim], t.g[k*dim:(k+1)*dim], t.m[r*dim:(r+1)*dim], t.v[r*dim:(r+1)*dim], t.c)
	}
	return -1
}

// AdamRows is, for each named row and each of its elements, computing in
// float64 and keeping w and the moments m and v in T,
//
//	m = b1*m + (1-b1)*g
//	v = b2*v + (1-b2)*g*g
//	w = w*decay - step*m/(sqrt(v)+eps)
func AdamRows[T Float](w, g, m, v []T, rows []int64, dim int, b1, b2, eps, step, decay float64) {
	parallel.Run(len(rows), len(rows)*dim, adamTask[T]{w, g, m, v, rows, dim, b1, b2, eps, step, decay})
}

type adamTask[T Float] struct {
	w, g, m, v               []T
	rows                     []int64
	dim                      int
	b1, b2, eps, step, decay float64
}

func (t adamTask[T]) Part(lo, hi int) int {
	dim, b1, b2 := t.dim, t.b1, t.b2
	for k := lo; k < hi; k++ {
		prefetchAhead(t.rows, k, hi, dim, t.w, t.m, t.v)
		r := int(t.rows[k])
		wr, gr := t.w[r*dim:(r+1)*dim], t.g[k*dim:(k+1)*dim]
		mr, vr := t.m[r*dim:(r+1)*dim], t.v[r*dim:(r+1)*dim]
		for j := range wr {
			x := float64(gr[j])
			mj := b1*float64(mr[j]) + (1-b1)*x
			vj := b2*float64(vr[j]) + (1-b2)*x*x
			mr[j], vr[j] = T(mj), T(vj)
			wr[j] = T(float64(wr[j])*t.decay - t.step*mj/(math.Sqrt(vj)+t.eps))
		}
	}
	return -1
}

// AdagradRows is row-wise Adagrad: for each named row r, in float64,
//
//	x = g[k] + wd*w[r]
//	s[r] += mean of x²
//	w[r] -= lr * x / (sqrt(s[r]) + eps)
func AdagradRows[T Float](w, g, s []T, rows []int64, dim int, lr, eps, wd float64) {
	parallel.Run(len(rows), len(rows)*dim, adagradTask[T]{w, g, s, rows, dim, lr, eps, wd})
}

type adagradTask[T Float] struct {
	w, g, s     []T
	rows        []int64
	dim         int
	lr, eps, wd float64
}

func (t adagradTask[T]) Part(lo, hi int) int {
	dim, wd := t.dim, t.wd
	for k := lo; k < hi; k++ {
		prefetchAhead(t.rows, k, hi, dim, t.w)
		r := int(t.rows[k])
		wr, gr := t.w[r*dim:(r+1)*dim], t.g[k*dim:(k+1)*dim]
		gr = gr[:len(wr)]
		var sq float64
		for j, v := range gr {
			x := float64(v) + wd*float64(wr[j])
			sq += x * x
		}
		t.s[r] = T(float64(t.s[r]) + sq/float64(dim))
		step := t.lr / (math.Sqrt(float64(t.s[r])) + t.eps)
		for j, v := range gr {
			x := float64(v) + wd*float64(wr[j])
			wr[j] = T(float64(wr[j]) - step*x)
		}
	}
	return -1
}

// SparseAdagradRows is PyTorch's Adagrad on the named rows, elementwise,
// in T's arithmetic: for each row r and each of its elements,
//
//	s = s + g*g
//	w = w + nclr * (g / (sqrt(s) + eps))
//
// each operation rounded to T (no product fused with a sum); s is the
// row's sums (w's shape) and nclr the negated learning rate of the step.
func SparseAdagradRows[T Float](w, g, s []T, rows []int64, dim int, nclr, eps T) {
	parallel.Run(len(rows), len(rows)*dim, sparseAdagradTask[T]{w, g, s, rows, dim, nclr, eps})
}

type sparseAdagradTask[T Float] struct {
	w, g, s   []T
	rows      []int64
	dim       int
	nclr, eps T
}

func (t sparseAdagradTask[T]) Part(lo, hi int) int {
	dim := t.dim
	for k := lo; k < hi; k++ {
		prefetchAhead(t.rows, k, hi, dim, t.w, t.s)
		r := int(t.rows[k])
		wr, gr, sr := t.w[r*dim:(r+1)*dim], t.g[k*dim:(k+1)*dim], t.s[r*dim:(r+1)*dim]
		gr, sr = gr[:len(wr)], sr[:len(wr)]
		for j, x := range gr {
			s := sr[j] + T(x*x)
			sr[j] = s
			wr[j] += T(t.nclr * T(x/(T(math.Sqrt(float64(s)))+t.eps)))
		}
	}
	return -1
}
