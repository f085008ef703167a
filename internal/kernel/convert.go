package kernel

import "math"

// ToFloat64 is
//
//	for i, v := range src { dst[i] = float64(v) }
func ToFloat64[T Float](dst []float64, src []T) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = float64(v)
	}
}

// FromFloat64 is
//
//	for i, v := range src { dst[i] = T(v) }
func FromFloat64[T Float](dst []T, src []float64) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = T(v)
	}
}

// FirstNonZero returns the position of the first element of s that is not
// zero, or -1.
func FirstNonZero[T Float](s []T) int {
	for i, v := range s {
		if v != 0 {
			return i
		}
	}
	return -1
}

// FirstNonFinite returns the position of the first element of s that is
// a NaN or an infinity, or -1.
//
// It sums x - x over blocks of 32 elements in four chains (NaN - NaN and
// ±Inf - ±Inf are NaN, x - x is 0 for any other x, and a NaN stays in a
// sum) and looks for the element only in a block whose sum is not 0.
func FirstNonFinite[T Float](s []T) int {
	const block = 32
	i := 0
	for ; i+block <= len(s); i += block {
		b := s[i : i+block : i+block]
		var a0, a1, a2, a3 T
		for k := 0; k < block; k += 4 {
			a0 += b[k] - b[k]
			a1 += b[k+1] - b[k+1]
			a2 += b[k+2] - b[k+2]
			a3 += b[k+3] - b[k+3]
		}
		if a0+a1+a2+a3 != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if s[i]-s[i] != 0 {
			return i
		}
	}
	return -1
}

// AppendInts appends idx's values to dst as ints and returns it.
func AppendInts[I Index](dst []int, idx []I) []int {
	for _, v := range idx {
		dst = append(dst, int(v))
	}
	return dst
}

// Renorm rescales, in place, each row of table (rows of dim values) that
// idx names (ids in [-vocab, vocab), checked already) and whose L2 norm
// exceeds maxNorm, by maxNorm/(norm+1e-7), PyTorch's max_norm. A row named
// twice is rescaled once: the second time its norm is below maxNorm.
func Renorm[T Float, I Index](table []T, idx []I, dim int, maxNorm float64) {
	vocab := len(table) / max(dim, 1)
	for _, v := range idx {
		j := Wrap(v, vocab)
		row := table[j*dim : (j+1)*dim]
		var ss float64
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		if norm := math.Sqrt(ss); norm > maxNorm {
			s := T(maxNorm / (norm + 1e-7))
			for d := range row {
				row[d] *= s
			}
		}
	}
}

// DivideByFreq divides row p of g (len(idx) rows of dim values) by the
// number of times idx[p] occurs in idx (ids of a table of vocab rows,
// checked already), PyTorch's scale_grad_by_freq.
func DivideByFreq[T Float, I Index](g []T, idx []I, vocab, dim int) {
	counts := make(map[int]float64)
	for _, v := range idx {
		counts[Wrap(v, vocab)]++
	}
	for p, v := range idx {
		c := T(counts[Wrap(v, vocab)])
		row := g[p*dim : (p+1)*dim]
		for k := range row {
			row[k] /= c
		}
	}
}
