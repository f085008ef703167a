package operand

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
)

// Size returns the number of elements of shape, or an error if a dimension
// is negative or the count overflows int.
func Size(op, what string, shape tensor.Shape) (int, error) {
	n := uint64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("%s: %s shape %s has a negative dimension: %w", op, what, ShapeString(shape), errs.ErrShape)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt {
			return 0, fmt.Errorf("%s: %s shape %s has more than %d elements: %w", op, what, ShapeString(shape), math.MaxInt, errs.ErrShape)
		}
		n = lo
	}
	return int(n), nil
}

// ShapeString formats a shape as tensor.Shape does, "(2, 3)", without
// letting the slice escape: shapes built in stack buffers are formatted
// with it.
func ShapeString(shape []int) string {
	b := []byte{'('}
	for i, d := range shape {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, int64(d), 10)
	}
	return string(append(b, ')'))
}

// SameShape reports whether a and b have the same rank and the same size
// on every axis. Unlike tensor.Shape.Eq, it does not take (2), (2, 1) and
// (1, 2) for one shape.
func SameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Unravel returns the coordinates of flat position p in a row-major tensor
// of shape.
func Unravel(p int, shape tensor.Shape) []int {
	pos := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] > 0 {
			pos[d] = p % shape[d]
			p /= shape[d]
		}
	}
	return pos
}

// Writable reports whether kernels can write t in place through its
// storage: row-major and contiguous, not a view of another tensor, and in
// Go memory.
func Writable(t *tensor.Dense) bool {
	return IsRowMajor(t) && !t.IsView() && t.IsNativelyAccessible()
}

// IsRowMajor reports whether t's elements lie in row-major order from the
// start of its storage with no gaps.
func IsRowMajor(t *tensor.Dense) bool {
	if t.Shape().TotalSize() <= 1 {
		return true
	}
	want := 1
	shape, strides := t.Shape(), t.Strides()
	if len(strides) != len(shape) {
		return false
	}
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] != 1 && strides[d] != want {
			return false
		}
		want *= shape[d]
	}
	return true
}
