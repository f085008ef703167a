package kernel

import "math"

// RowMaxShift32 sets, for each row r of x (rows of c elements, len(m)
// rows), m[r] to the row's largest element that is not NaN (-Inf when
// there is none) and e[r*c+j] = x[r*c+j] - m[r]: the shifted logits of a
// softmax. e and x have len(m)×c elements at least.
func RowMaxShift32(e, x, m []float32, c int) {
	n := len(m) * c
	e, x = e[:n], x[:n]
	if hasSoftmaxAsm && len(m) > 0 && c > 0 {
		rowMaxShift32(&e[0], &x[0], &m[0], len(m), c)
		return
	}
	rowMaxShift32Go(e, x, m, c)
}

// rowMaxShift32Go is RowMaxShift32 in Go, the reference for its
// assembly.
func rowMaxShift32Go(e, x, m []float32, c int) {
	for r := range m {
		row, er := x[r*c:(r+1)*c], e[r*c:(r+1)*c]
		mr := float32(math.Inf(-1))
		for _, v := range row {
			if v > mr {
				mr = v
			}
		}
		m[r] = mr
		for j, v := range row {
			er[j] = v - mr
		}
	}
}

// RowSums32 sets s[r] to the sum in float64 of row r of e (rows of c
// elements, len(s) rows). The elements below the last multiple of four
// are added in four running sums, element j to sum j mod 4 in order, which
// are then added as (sum0 + sum2) + (sum1 + sum3); the last c mod 4
// elements are added to that in order.
func RowSums32(s []float64, e []float32, c int) {
	e = e[:len(s)*c]
	if hasSoftmaxAsm && len(s) > 0 && c > 0 {
		rowSums32(&s[0], &e[0], len(s), c)
		return
	}
	rowSums32Go(s, e, c)
}

// rowSums32Go is RowSums32 in Go, the reference for its assembly.
func rowSums32Go(s []float64, e []float32, c int) {
	c4 := c &^ 3
	for r := range s {
		row := e[r*c : (r+1)*c]
		var a [4]float64
		for j := 0; j < c4; j += 4 {
			a[0] += float64(row[j])
			a[1] += float64(row[j+1])
			a[2] += float64(row[j+2])
			a[3] += float64(row[j+3])
		}
		sum := (a[0] + a[2]) + (a[1] + a[3])
		for _, v := range row[c4:] {
			sum += float64(v)
		}
		s[r] = sum
	}
}

// SubRows32 sets out[r*c+j] = float32(float64(x[r*c+j]) - l[r]) for the
// len(l) rows of c elements: a row shifted by its log-sum-exp (the
// forward of LogSoftmax), four elements at a time in AVX where the
// processor has it, to the bits of subRows32Go.
func SubRows32(out, x []float32, l []float64, c int) {
	n := len(l) * c
	out, x = out[:n], x[:n]
	if hasSoftmaxAsm && len(l) > 0 && c > 0 {
		subRows32(&out[0], &x[0], &l[0], len(l), c)
		return
	}
	subRows32Go(out, x, l, c)
}

// subRows32Go is SubRows32 in Go, the reference for its assembly.
func subRows32Go(out, x []float32, l []float64, c int) {
	for r, lr := range l {
		row, o := x[r*c:(r+1)*c], out[r*c:(r+1)*c]
		for j, v := range row {
			o[j] = float32(float64(v) - lr)
		}
	}
}

// ScaleSubRows32 sets out[r*c+j] = float32(float64(g[r*c+j]) -
// float64(e[r*c+j])·k[r]) for the len(k) rows of c elements, the product
// rounded to float64 before the subtraction: the backward of LogSoftmax
// (e = exp of its output, k the sums of g's rows), four elements at a
// time in AVX where the processor has it, to the bits of
// scaleSubRows32Go.
func ScaleSubRows32(out, g, e []float32, k []float64, c int) {
	n := len(k) * c
	out, g, e = out[:n], g[:n], e[:n]
	if hasSoftmaxAsm && len(k) > 0 && c > 0 {
		scaleSubRows32(&out[0], &g[0], &e[0], &k[0], len(k), c)
		return
	}
	scaleSubRows32Go(out, g, e, k, c)
}

// scaleSubRows32Go is ScaleSubRows32 in Go, the reference for its
// assembly.
func scaleSubRows32Go(out, g, e []float32, k []float64, c int) {
	for r, kr := range k {
		gr, er, o := g[r*c:(r+1)*c], e[r*c:(r+1)*c], out[r*c:(r+1)*c]
		er, o = er[:len(gr)], o[:len(gr)]
		for j, v := range gr {
			p := float64(float64(er[j]) * kr) // rounded, never fused with the subtraction
			o[j] = float32(float64(v) - p)
		}
	}
}

// ScaleRows32 sets out[r*c+j] = k[r]·e[r*c+j] in float32 for the len(k)
// rows of c elements, eight elements at a time in AVX where the processor
// has it, to the bits of scaleRows32Go.
func ScaleRows32(out, e, k []float32, c int) {
	n := len(k) * c
	out, e = out[:n], e[:n]
	if hasSoftmaxAsm && len(k) > 0 && c > 0 {
		scaleRows32(&out[0], &e[0], &k[0], len(k), c)
		return
	}
	scaleRows32Go(out, e, k, c)
}

// scaleRows32Go is ScaleRows32 in Go, the reference for its assembly.
func scaleRows32Go(out, e, k []float32, c int) {
	for r, kr := range k {
		er, o := e[r*c:(r+1)*c], out[r*c:(r+1)*c]
		o = o[:len(er)]
		for j, v := range er {
			o[j] = kr * v
		}
	}
}
