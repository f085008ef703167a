package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/gathergrad/gather/internal/ref"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClearStreamed: a streamed clear sets every element to zero, and
// nothing before or after the slice, whatever its alignment and length,
// for both float types; below minStream it is an ordinary clear.
func TestClearStreamed(t *testing.T) {
	n32 := minStream/4 + 37
	for _, off := range []int{0, 1, 2, 3} { // 0, 4, 8 and 12 bytes past a 16-byte boundary
		for _, n := range []int{n32, n32 - 1, 100} {
			buf := make([]float32, off+n+5)
			for i := range buf {
				buf[i] = float32(i + 1)
			}
			clearStreamed(buf[off : off+n])
			for i, v := range buf {
				want := float32(0)
				if i < off || i >= off+n {
					want = float32(i + 1)
				}
				if v != want {
					t.Fatalf("float32, offset %d, length %d: element %d is %v, want %v", off, n, i, v, want)
				}
			}
		}
	}
	n64 := minStream/8 + 3
	buf := make([]float64, n64+2)
	for i := range buf {
		buf[i] = -1
	}
	clearStreamed(buf[1 : n64+1])
	want := make([]float64, len(buf))
	want[0], want[n64+1] = -1, -1
	sameFloats(t, want, buf, "float64, offset 8 bytes")
}

// TestAddRow: the row add gives each element the bits of d + c*g, the
// loop's result, for both float types, rows of any length and a scale;
// with c == 0 it still turns an infinite or NaN g into NaN.
func TestAddRow(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 15, 16, 17, 64, 131} {
		d32, g32 := make([]float32, n), make([]float32, n)
		d64, g64 := make([]float64, n), make([]float64, n)
		for i := range n {
			d32[i], g32[i] = float32(i)*0.37-1, float32(i*i)*1.3e-3+0.1
			d64[i], g64[i] = float64(i)*0.37-1, float64(i*i)*1.3e-3+0.1
		}
		w32, w64 := slices.Clone(d32), slices.Clone(d64)
		for i := range n {
			w32[i] += 0.7 * g32[i]
			w64[i] += 0.7 * g64[i]
		}
		AddRow(d32, g32, 0.7)
		AddRow(d64, g64, 0.7)
		for i := range n {
			if math.Float32bits(d32[i]) != math.Float32bits(w32[i]) || math.Float64bits(d64[i]) != math.Float64bits(w64[i]) {
				t.Fatalf("length %d, element %d: float32 %v want %v, float64 %v want %v", n, i, d32[i], w32[i], d64[i], w64[i])
			}
		}
	}
	d := []float32{1, 2, 3}
	AddRow(d, []float32{float32(math.Inf(1)), float32(math.NaN()), 5}, 0)
	assert.True(t, math.IsNaN(float64(d[0])), "0*Inf")
	assert.True(t, math.IsNaN(float64(d[1])), "0*NaN")
	assert.Equal(t, float32(3), d[2])
}

// The gradient of Gather writes large destination blocks with streaming
// stores, row by row as indices first name them (addFirstTouch), and
// clears the rows no index names afterwards. The result must be, bit for
// bit, that of clearing and then adding c*g in index order: with repeated
// and negative indices, a padding row, a negative scale (0 + -0 is +0), a
// zero scale times Inf (NaN), float32 and float64, several outer blocks,
// and the destination split across goroutines; a stale buffer is
// overwritten everywhere.
func TestFirstTouchGradient(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	r := rand.New(rand.NewPCG(31, 32))
	cases := []struct {
		name   string
		dshape []int
		axis   int
		n, pad int
		c      float64
		first  bool // whether the blocks are written by addFirstTouch
	}{
		{"float rows of 32 bytes, padding row", []int{80000, 8}, 0, 5000, 3, 1, true},
		{"three outer blocks", []int{3, 70000, 4}, 1, 3000, -1, -0.5, true},
		{"rows of 48 bytes, zero scale", []int{60000, 12}, 0, 4000, -1, 0, true},
		{"rows of 12 bytes", []int{100000, 3}, 0, 4000, 7, 2, false},
		// Enough indices for rows named again to be prefetched.
		{"rows of 64 bytes, many repeats", []int{20000, 16}, 0, 4000, 5, 1.5, true},
	}
	// Whether addFirstTouch looks ahead for repeats (float32 rows):
	assert.True(t, prefetchesRepeats(make([]float32, 20000*16), 16, 4000), "many repeats")
	assert.False(t, prefetchesRepeats(make([]float32, 80000*8), 8, 5000), "rows of 32 bytes")
	assert.False(t, prefetchesRepeats(make([]float32, 100000*16), 16, 4000), "few repeats")
	for _, c := range cases {
		outer, s, inner := split(c.dshape, c.axis)
		idx := make([]int64, c.n)
		for i := range idx {
			idx[i] = int64(r.IntN(s / 4)) // repeats
			if i%3 == 0 {
				idx[i] -= int64(s / 4) // negative
			}
		}
		idx[c.n-1] = int64(c.pad) // the padding row is named, and must stay zero
		g := ref.RandFloats(r, outer*c.n*inner)
		for i := 0; i < len(g); i += 7 {
			g[i] = 0 // c*0 is -0 for a negative c
		}
		g[5], g[len(g)-3] = math.Inf(1), math.NaN()
		for _, dt := range []string{"float32", "float64"} {
			for _, procs := range []int{1, 2} {
				runtime.GOMAXPROCS(procs)
				t.Run(fmt.Sprintf("%s/%s/GOMAXPROCS=%d", c.name, dt, procs), func(t *testing.T) {
					if dt == "float32" {
						firstTouchCase(t, c.dshape, c.axis, idx, toFloat32(g), float32(c.c), c.pad, c.first)
					} else {
						firstTouchCase(t, c.dshape, c.axis, idx, g, c.c, c.pad, c.first)
					}
				})
			}
		}
	}
}

func firstTouchCase[T Float](t *testing.T, dshape []int, axis int, idx []int64, g []T, c T, pad int, first bool) {
	t.Helper()
	outer, s, inner := split(dshape, axis)
	n := len(idx)
	want := make([]T, outer*s*inner)
	for o := range outer {
		for i, v := range idx {
			j := Wrap(v, s)
			if j == pad {
				continue
			}
			for k := range inner {
				want[(o*s+j)*inner+k] += c * g[(o*n+i)*inner+k]
			}
		}
	}
	got := make([]T, len(want))
	for i := range got {
		got[i] = T(math.NaN()) // a stale buffer
	}
	require.Equal(t, first && streamStores, writesFirst(got[:s*inner], inner), "addFirstTouch chosen")
	IndexAdd(got, g, idx, outer, s, inner, c, pad, true)
	for i := range want {
		w, v := float64(want[i]), float64(got[i])
		if math.Float64bits(w) != math.Float64bits(v) && !(math.IsNaN(w) && math.IsNaN(v)) {
			t.Fatalf("element %d (row %d) is %v, want %v", i, i/inner, v, w)
		}
		if w == 0 && math.Signbit(w) != math.Signbit(v) {
			t.Fatalf("element %d: sign of zero differs", i)
		}
	}
}

func toFloat32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// firstBad checks the leading blocks of 16 indices with assembly where
// there is some (checkedPrefix) and the rest one by one: a bad index must
// be found at every position of a block and of the tail, for each index
// type, at the edges of the range and beyond those of the types.
func TestFirstBad(t *testing.T) {
	type named int64
	// want is the definition: the first v with v < -s or v >= s.
	want := func(idx []int64, s int) int {
		for p, v := range idx {
			if v < -int64(s) || v >= int64(s) {
				return p
			}
		}
		return -1
	}
	check := func(t *testing.T, idx []int64, s int) {
		t.Helper()
		w := want(idx, s)
		i32 := make([]int32, len(idx))
		fits, fitsInt := true, true // every index fits in an int32, in an int
		for i, v := range idx {
			i32[i] = int32(v)
			fits = fits && int64(int32(v)) == v
			fitsInt = fitsInt && int64(int(v)) == v
		}
		assert.Equal(t, w, firstBad(idx, s), "int64")
		if fitsInt {
			assert.Equal(t, w, firstBad(convertIndices[int](idx), s), "int")
		}
		assert.Equal(t, w, firstBad(convertIndices[named](idx), s), "named int64")
		if fits {
			assert.Equal(t, w, firstBad(i32, s), "int32")
		}
		if !hasCheckAsm || s < 1 {
			assert.Zero(t, checkedPrefix(idx, s))
			return
		}
		// The assembly vouches for every whole block before the bad one.
		blocks := len(idx) &^ 15
		if w >= 0 {
			blocks = min(blocks, w&^15)
		}
		assert.Equal(t, blocks, checkedPrefix(idx, s), "int64 blocks checked by assembly")
		if fits {
			assert.Equal(t, blocks, checkedPrefix(i32, s), "int32 blocks checked by assembly")
		}
	}
	r := rand.New(rand.NewPCG(21, 22))
	for _, s64 := range []int64{1, 5, 1000, math.MaxInt32, math.MaxInt32 + 1, 1 << 62} {
		s := int(s64)
		if int64(s) != s64 {
			continue // beyond int on this platform
		}
		for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 33, 64, 70} {
			idx := make([]int64, n)
			for i := range idx {
				idx[i] = int64(r.Uint64N(2*uint64(s))) - int64(s)
			}
			t.Run(fmt.Sprintf("s=%d n=%d valid", s, n), func(t *testing.T) { check(t, idx, s) })
			bad := []int64{int64(s), -int64(s) - 1, math.MaxInt64, math.MinInt64, math.MaxInt32, math.MinInt32}
			for p := range n {
				for _, b := range bad {
					if b >= -int64(s) && b < int64(s) {
						continue // in range for this s
					}
					withBad := slices.Clone(idx)
					withBad[p] = b
					if p+1 < n {
						withBad[p+1] = int64(s) // a second bad one after it must not be reported
					}
					check(t, withBad, s)
				}
				edges := slices.Clone(idx)
				edges[p] = -int64(s)
				if p+1 < n {
					edges[p+1] = int64(s) - 1
				}
				check(t, edges, s)
			}
		}
	}
	// An empty axis has no valid index.
	assert.Equal(t, 0, firstBad(make([]int64, 40), 0))
	assert.Equal(t, -1, firstBad([]int64{}, 0))
}

func convertIndices[J Index](idx []int64) []J {
	out := make([]J, len(idx))
	for i, v := range idx {
		out[i] = J(v)
	}
	return out
}

// Exp32 against math.Exp: within 2 units in the last place of float32
// from expMin to 88, 0 below expMin, and IEEE's answer for -Inf and NaN;
// lengths that are not a multiple of 8 take both paths.
func TestExp32(t *testing.T) {
	var src []float32
	for x := float64(expMin); x <= 88; x += 0.0137 {
		src = append(src, float32(x))
	}
	src = append(src, 0, -1e-30, 88, expMin, -87.31, -1e4, float32(math.Inf(-1)), float32(math.NaN()))
	got := make([]float32, len(src))
	Exp32(got, src)
	worst := 0.0
	for i, x := range src {
		want := math.Exp(float64(x))
		switch {
		case math.IsNaN(float64(x)):
			assert.True(t, math.IsNaN(float64(got[i])), "Exp32(NaN) = %g", got[i])
		case x < expMin:
			assert.Zero(t, got[i], "Exp32(%g) below expMin", x)
		default:
			worst = max(worst, ulps(got[i], want))
		}
	}
	assert.LessOrEqual(t, worst, 2.0, "largest error of Exp32, in units in the last place")
	t.Logf("largest error: %.2f ulp over %d values", worst, len(src))
}

// ulps returns how far got lies from want in units in the last place of
// float32 at want.
func ulps(got float32, want float64) float64 {
	ulp := float64(math.Nextafter32(float32(want), float32(math.Inf(1))) - float32(want))
	return math.Abs(float64(got)-want) / ulp
}

// Log1p32 against math.Log1p: within 3 units in the last place of float32
// over [0, 1], tiny values included, 0 for 0 and NaN for NaN; the length is
// not a multiple of 8, so both paths run.
func TestLog1p32(t *testing.T) {
	var src []float32
	for e := 0.0; e <= 1; e += 0.000137 {
		src = append(src, float32(e))
	}
	for e := 1e-38; e < 1e-3; e *= 3.7 {
		src = append(src, float32(e))
	}
	src = append(src, 1, math.SmallestNonzeroFloat32, float32(math.NaN()))
	got := make([]float32, len(src))
	Log1p32(got, src)
	worst := 0.0
	for i, e := range src {
		want := math.Log1p(float64(e))
		switch {
		case math.IsNaN(float64(e)):
			assert.True(t, math.IsNaN(float64(got[i])), "Log1p32(NaN) = %g", got[i])
		case e == 0:
			assert.Zero(t, got[i], "Log1p32(0)")
		default:
			worst = max(worst, ulps(got[i], want))
		}
	}
	assert.LessOrEqual(t, worst, 3.0, "largest error of Log1p32, in units in the last place")
	t.Logf("largest error: %.2f ulp over %d values", worst, len(src))
}

// TestPickRow: every length around the four-at-a-time loop's groups, with
// negative indices, gives row[x[k]] (counted from the end for negatives);
// an index out of range, above or below, at any position, is the position
// returned, with every element before it written.
func TestPickRow(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	row := []float32{10, 11, 12, 13, 14, 15, 16}
	s := int64(len(row))
	for n := range 14 {
		x := make([]int64, n)
		for i := range x {
			x[i] = r.Int64N(2*s) - s
		}
		want := make([]float32, n)
		for i, v := range x {
			want[i] = row[(v+s)%s]
		}
		d := make([]float32, n)
		require.Equal(t, -1, pickRow(d, row, x), "n=%d", n)
		assert.Equal(t, want, d, "n=%d x=%v", n, x)
		for bad := range n {
			for _, v := range []int64{s, -s - 1, math.MaxInt64, math.MinInt64} {
				xb := slices.Clone(x)
				xb[bad] = v
				d := make([]float32, n)
				require.Equal(t, bad, pickRow(d, row, xb), "n=%d bad=%d v=%d", n, bad, v)
				assert.Equal(t, want[:bad], d[:bad], "n=%d bad=%d v=%d", n, bad, v)
			}
		}
	}
}

// TestAddRowAt: every length around the four-at-a-time loop's groups, with
// negative and repeated indices, adds c*y[k] into row[x[k]] in the order
// of k, so the sums have the bits of the plain loop's.
func TestAddRowAt(t *testing.T) {
	r := rand.New(rand.NewPCG(63, 64))
	const s = 5
	for n := range 14 {
		x, y := make([]int32, n), make([]float32, n)
		for i := range x {
			x[i] = int32(r.IntN(2*s) - s)
			y[i] = float32(r.NormFloat64())
		}
		row, want := make([]float32, s), make([]float32, s)
		for i := range row {
			row[i] = float32(r.NormFloat64())
			want[i] = row[i]
		}
		for k, v := range x {
			want[(int(v)+s)%s] += 0.5 * y[k]
		}
		addRowAt(row, y, x, 0.5)
		assert.Equal(t, want, row, "n=%d x=%v", n, x)
	}
}

// Arrays whose rows the kernels take as addresses never stay on a
// goroutine's stack, which moves as it grows: the compiler puts them on
// the heap (heapOnly), one allocation per call here, where every other
// argument is already on the heap.
func TestRowSourcesLeaveTheStack(t *testing.T) {
	dst, idx := make([]float32, 4*64), []int{1, 3, 5, 7}
	bg := &Bags{Bounds: []int{0, 2, 4}, Pad: -1, Mode: BagSum}
	take := testing.AllocsPerRun(20, func() {
		var table [16 * 64]float32
		Take(dst, table[:], idx, 1, 16, 64, false)
	})
	bag := testing.AllocsPerRun(20, func() {
		var table [16 * 64]float32
		BagPool(dst[:2*64], table[:], idx, nil, 64, bg)
	})
	if take != 1 || bag != 1 {
		t.Errorf("Take allocates %v times a call, BagPool %v; want 1 each (the table)", take, bag)
	}
}

// sumLogs equals the sum of the logs within rounding, for row sums of up
// to a million classes, and passes 0, +Inf and NaN on as their logs do.
func TestSumLogs(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for _, n := range []int{0, 1, 15, 16, 17, 256, 1000} {
		s := make([]float64, n)
		want := 0.0
		for i := range s {
			s[i] = 1 + r.Float64()*1e6
			want += math.Log(s[i])
		}
		if got := sumLogs(s); math.Abs(got-want) > 1e-12*max(1, math.Abs(want)) {
			t.Fatalf("%d sums: %v, want %v", n, got, want)
		}
	}
	for _, v := range []float64{0, math.Inf(1), math.NaN()} {
		want := math.Log(2) + math.Log(v)
		if got := sumLogs([]float64{2, v}); !(got == want || math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("with %v: %v, want %v", v, got, want)
		}
	}
}

// FirstNonFinite finds the first NaN or infinity wherever it is: in a
// block, on a block's edge, in the tail, after another; -1 for none.
func TestFirstNonFinite(t *testing.T) {
	for _, n := range []int{0, 1, 31, 32, 33, 64, 100} {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(i) - 40.5
		}
		if got := FirstNonFinite(s); got != -1 {
			t.Fatalf("n=%d: all finite: got %d", n, got)
		}
		for p := range n {
			for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
				c := append([]float32{}, s...)
				c[p] = bad
				if p+3 < n {
					c[p+3] = float32(math.NaN())
				}
				if got := FirstNonFinite(c); got != p {
					t.Fatalf("n=%d, %v at %d: got %d", n, bad, p, got)
				}
				d := make([]float64, n)
				for i, v := range c {
					d[i] = float64(v)
				}
				if got := FirstNonFinite(d); got != p {
					t.Fatalf("float64 n=%d, %v at %d: got %d", n, bad, p, got)
				}
			}
		}
	}
}

// expNegAbs32 and sigmoidGrad32, in assembly where the processor runs
// it, give their Go twins' bits on values of every kind: both signs,
// zeros, tiny, huge, infinities, NaN; and the tails shorter than eight go
// to the twins.
func TestBCEKernelsMatchTwins(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 8))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 88, -88, 200, -200,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), expMin, -expMin}
	for _, n := range []int{0, 7, 8, 13, 64, 1001} {
		x, y, e := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range x {
			x[i] = float32(4 * r.NormFloat64())
			if i%5 == 0 {
				x[i] = special[r.IntN(len(special))]
			}
			y[i] = float32(r.Float64())
		}
		got, want := make([]float32, n), make([]float32, n)
		inEights(hasExpAsm, expNegAbs32, expNegAbs32Go, got, x)
		expNegAbs32Go(want, x)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
				t.Fatalf("n=%d: exp(-|%g|) = %g, twin %g", n, x[i], got[i], want[i])
			}
		}
		copy(e, want)
		bceGradPlain32(got, x, y, e, 0.37)
		sigmoidGrad32Go(want, x, y, e, 0.37)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
				t.Fatalf("n=%d: gradient at x=%g, y=%g: %g, twin %g", n, x[i], y[i], got[i], want[i])
			}
		}
	}
}

// SubRows32 and ScaleSubRows32, in assembly where the processor runs it,
// give their Go twins' bits, for rows of every length mod 4, with
// infinities and NaN among the values.
func TestRowKernelsMatchTwins(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 9))
	for _, c := range []int{1, 3, 4, 5, 16, 17} {
		const rows = 9
		x, e, got, want := make([]float32, rows*c), make([]float32, rows*c), make([]float32, rows*c), make([]float32, rows*c)
		l := make([]float64, rows)
		for i := range x {
			x[i], e[i] = float32(3*r.NormFloat64()), float32(r.Float64())
		}
		x[0], e[1%len(e)] = float32(math.Inf(1)), float32(math.NaN())
		for i := range l {
			l[i] = 2 * r.NormFloat64()
		}
		same := func(what string) {
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("%s, c=%d, element %d: %g, twin %g", what, c, i, got[i], want[i])
				}
			}
		}
		SubRows32(got, x, l, c)
		subRows32Go(want, x, l, c)
		same("SubRows32")
		ScaleSubRows32(got, x, e, l, c)
		scaleSubRows32Go(want, x, e, l, c)
		same("ScaleSubRows32")
		k := make([]float32, rows)
		for i := range k {
			k[i] = float32(l[i])
		}
		ScaleRows32(got, x, k, c)
		scaleRows32Go(want, x, k, c)
		same("ScaleRows32")
	}
}

// logs32 gives the log of a float32 row's sum of exponentials (at least
// 1) to float32's precision, and math.Log's answer for NaN, +Inf and
// values below 1.
func TestLogs32(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	s := []float64{1, 1.5, 2, 3.999, 16, 1e6, 1e300, math.Inf(1), math.NaN(), 0.5, 0}
	for range 200 {
		s = append(s, 1+r.ExpFloat64()*10)
	}
	want := make([]float64, len(s))
	for i, v := range s {
		want[i] = math.Log(v)
	}
	for lo := 0; lo < len(s); lo += entropyRows {
		logs32(s[lo:min(lo+entropyRows, len(s))])
	}
	for i, v := range s {
		switch {
		case math.IsNaN(want[i]):
			assert.True(t, math.IsNaN(v), "log(%g)", want[i])
		case math.IsInf(want[i], 0):
			assert.Equal(t, want[i], v)
		default:
			assert.InDelta(t, want[i], v, 3e-7*math.Max(1, math.Abs(want[i])), "element %d", i)
		}
	}
}
