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
