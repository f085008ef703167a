package kernel

import (
	"math"
	"testing"
)

// split returns the products of the dimensions before, at and after axis.
func split(shape []int, axis int) (outer, mid, inner int) {
	outer, inner = 1, 1
	for _, d := range shape[:axis] {
		outer *= d
	}
	for _, d := range shape[axis+1:] {
		inner *= d
	}
	return outer, shape[axis], inner
}

func size(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// nans returns n NaNs: a buffer in which an element a kernel fails to
// write shows as a difference from the reference.
func nans(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.NaN()
	}
	return v
}

// sameFloats fails t at the first element where got differs from want:
// require.Equal would take minutes to print the difference of slices this long.
func sameFloats(t *testing.T, want, got []float64, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}
