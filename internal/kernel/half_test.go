package kernel

import (
	"math"
	"testing"

	"github.com/x448/float16"
)

// Stochastic rounding gives one of the two neighbours, each a value of
// the format, unbiased on average, the same for the same (seed, step,
// id); nearest rounding is float16's round-to-nearest-even.
func TestRoundRow(t *testing.T) {
	values := []float32{0.1, -0.1, 1.0 / 3, 1000.7, -65000.3, 3e-5, -6e-8, 1e-9, 7, 3e38, -3.3e38}
	for _, f := range []HalfFormat{Float16, BFloat16} {
		for _, v := range values {
			if f == Float16 && math.Abs(float64(v)) > MaxFloat16 {
				x := []float32{v}
				RoundRow(f, x, true, 1, 1, 1)
				if want := float32(math.Copysign(MaxFloat16, float64(v))); x[0] != want {
					t.Fatalf("float16 of %v: %v, want it saturated to %v", v, x[0], want)
				}
				continue
			}
			lo, hi := below(f, v)
			const n = 20000
			sum := 0.0
			for id := range int64(n) {
				x := []float32{v}
				RoundRow(f, x, true, 7, 3, id)
				if x[0] != lo && x[0] != hi || nearest(f, x[0]) != x[0] {
					t.Fatalf("%v of %v: %v, not %v or %v", f, v, x[0], lo, hi)
				}
				again := []float32{v}
				RoundRow(f, again, true, 7, 3, id)
				if again[0] != x[0] {
					t.Fatalf("%v of %v: %v, then %v for the same seed, step and id", f, v, x[0], again[0])
				}
				sum += float64(x[0])
			}
			// The mean of n draws between lo and hi: within 5 standard errors.
			if d, se := math.Abs(sum/n-float64(v)), math.Abs(float64(hi-lo))/2/math.Sqrt(n); d > 5*se && lo != v {
				t.Fatalf("%v of %v: the mean of %d roundings is %v, off by %v (standard error %v)", f, v, n, sum/n, d, se)
			}
			x := []float32{v}
			RoundRow(f, x, false, 0, 0, 0)
			if f == Float16 && x[0] != float16.Fromfloat32(v).Float32() {
				t.Fatalf("nearest float16 of %v: %v", v, x[0])
			}
			if x[0] != lo && x[0] != hi {
				t.Fatalf("nearest %v of %v: %v, not %v or %v", f, v, x[0], lo, hi)
			}
		}
	}
}

// ToHalf and FromHalf round-trip a value of the format exactly.
func TestHalfRoundTrip(t *testing.T) {
	for _, f := range []HalfFormat{Float16, BFloat16} {
		x := []float32{0.5, -2, 0, 1.0 / 3, 65504, -1e-7}
		for j := range x {
			x[j] = nearest(f, x[j])
		}
		b := make([]byte, 2*len(x))
		ToHalf(f, b, x)
		got := make([]float32, len(x))
		FromHalf(f, got, b)
		for j := range x {
			if got[j] != x[j] {
				t.Fatalf("%v: %v came back as %v", f, x[j], got[j])
			}
		}
	}
}
