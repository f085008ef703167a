package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gathergrad/gather/internal/ref"
)

// A destination block large enough for addFirstTouch takes its row bitmap
// from a free list, which collections leave as it is: a gradient call
// allocates nothing, even the first after two collections.
func TestFirstTouchAllocations(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	big := make([]float32, 80000*8)
	require.True(t, writesFirst(big, 8) || !streamStores)
	rows := ref.RandIndices(rand.New(rand.NewPCG(3, 3)), 5000, 80000)
	up := make([]float32, 5000*8)
	grad := func() { IndexAdd(big, up, rows, 1, 80000, 8, 1, -1, true) }
	allocs := testing.AllocsPerRun(20, grad)
	assert.Zero(t, allocs, "gradient into a 2.5 MB block")
	// The first call after two collections, counted without a warm-up
	// call (testing.AllocsPerRun makes one).
	runtime.GC()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	grad()
	runtime.ReadMemStats(&after)
	assert.Zero(t, after.Mallocs-before.Mallocs, "gradient into a 2.5 MB block, after two collections")
}

// Take writes a new output of at least minStreamOutput bytes (lowered
// here to minStream, so that the outputs stay small) with streaming
// stores when its rows are whole multiples of 16 bytes, and moves rows of
// whole multiples of 32 bytes in batches by assembly (streamed or not). On
// every path the result is the same, every element is written (the output
// starts as NaN), and a bad index anywhere, at the start, in the middle or
// at the end of a batch, is reported where it is. The last case's table is
// large enough for the row copy to prefetch rows ahead.
func TestStreamedRows(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	small := Uninit[float32](1 << 20) // 4 MB, from a 1.3 MB table
	assert.False(t, streams(small, make([]float32, 5000*64), 64), "an output under minStreamOutput streams")
	defer func(m uintptr) { minStreamOutput = m }(minStreamOutput)
	minStreamOutput = minStream
	r := rand.New(rand.NewPCG(23, 24))
	cases := []struct {
		name              string
		f32               bool
		dshape, ishape    []int
		axis              int
		streamed, batched bool
		ahead             bool // the row copy prefetches
	}{
		{"float32 rows of 80 bytes", true, []int{5000, 20}, []int{16000}, 0, true, false, false},
		{"float64 rows of 512 bytes", false, []int{900, 64}, []int{3, 900}, 0, true, true, false},
		{"middle axis, rows of 192 bytes", true, []int{4, 700, 48}, []int{2, 900}, 1, true, true, false},
		{"middle axis, rows of 256 bytes", true, []int{5, 300, 64}, []int{1003}, 1, true, true, false},
		{"rows of 12 bytes", true, []int{5000, 3}, []int{100000}, 0, false, false, false},
		{"small output, rows of 64 bytes", true, []int{5000, 16}, []int{1001}, 0, false, true, false},
		{"rows of 32 bytes", false, []int{300, 4}, []int{7, 5}, 0, false, true, false},
		{"rows of 256 bytes from a table of 1.3 MB, prefetched", true, []int{5000, 64}, []int{1500}, 0, false, true, true},
	}
	for _, c := range cases {
		data := ref.RandFloats(r, size(c.dshape))
		outer, s, inner := split(c.dshape, c.axis)
		idx := ref.RandIndices(r, size(c.ishape), s)
		want, oshape := ref.Take(data, c.dshape, idx, c.ishape, c.axis)
		if c.f32 {
			// Values a float32 holds, so that the float64 reference is exact.
			for i := range data {
				data[i] = float64(float32(data[i]))
			}
			want, _ = ref.Take(data, c.dshape, idx, c.ishape, c.axis)
		}
		// Uninit's alignment, as for a new output.
		var chosen, batched, batchedInto, ahead bool
		if c.f32 {
			out, src := Uninit[float32](size(oshape)), toFloat32(data)
			chosen, ahead = streams(out, src, inner), prefetches(src, inner)
			batched, batchedInto = batches(out, inner, chosen), batches(out, inner, false)
		} else {
			out := Uninit[float64](size(oshape))
			chosen, ahead = streams(out, data, inner), prefetches(data, inner)
			batched, batchedInto = batches(out, inner, chosen), batches(out, inner, false)
		}
		require.Equal(t, c.ahead, ahead, "%s: prefetching chosen", c.name)
		require.Equal(t, c.streamed && streamStores, chosen, "%s: streaming chosen", c.name)
		require.Equal(t, c.batched && hasRowAsm, batched, "%s: batches chosen", c.name)
		require.Equal(t, c.batched && hasRowAsm, batchedInto, "%s: batches chosen into a caller's buffer", c.name)
		for _, procs := range []int{1, 2} {
			runtime.GOMAXPROCS(procs)
			t.Run(fmt.Sprintf("%s/GOMAXPROCS=%d", c.name, procs), func(t *testing.T) {
				for _, fresh := range []bool{true, false} {
					got, bad := takeFloats(c.f32, data, idx, outer, s, inner, size(oshape), fresh)
					require.Equal(t, -1, bad)
					sameFloats(t, want, got, fmt.Sprintf("fresh=%v", fresh))
				}
				n := len(idx)
				for _, p := range []int{0, 3, rowsAhead - 1, rowsAhead, takeChunk - 1, takeChunk, takeChunk + rowsAhead, n/2 + 1, n - 2, n - 1} {
					if p >= n {
						continue
					}
					withBad := slices.Clone(idx)
					withBad[p] = int64(-s - 1)
					_, got := takeFloats(c.f32, data, withBad, outer, s, inner, size(oshape), true)
					require.Equal(t, p, got, "bad index at %d", p)
				}
			})
		}
	}
}

// takeFloats runs Take on data as float32 (f32) or float64 into a
// NaN-filled output of n elements from Uninit, and returns it as float64s
// with Take's result.
func takeFloats(f32 bool, data []float64, idx []int64, outer, s, inner, n int, fresh bool) ([]float64, int) {
	if f32 {
		out := Uninit[float32](n)
		copy(out, toFloat32(nans(n)))
		bad := Take(out, toFloat32(data), idx, outer, s, inner, fresh)
		return toFloat64(out), bad
	}
	out := Uninit[float64](n)
	copy(out, nans(n))
	bad := Take(out, data, idx, outer, s, inner, fresh)
	return out, bad
}

func toFloat64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// Every kernel that writes a whole output writes every element of it, on
// one goroutine and split across several: outputs start as NaN, and the
// results must equal the references. The backward kernels with zero set
// overwrite a stale (NaN) buffer everywhere.
func TestKernelsWriteEveryElement(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	r := rand.New(rand.NewPCG(21, 22))
	cases := []struct {
		name           string
		along          bool
		dshape, ishape []int
		axis           int
	}{
		{"gather rows", false, []int{40, 3}, []int{7}, 0},
		{"gather rows, parallel", false, []int{300, 64}, []int{1024}, 0},
		{"gather middle, parallel", false, []int{16, 50, 32}, []int{2, 40}, 1},
		{"gather last", false, []int{5, 6}, []int{4}, 1},
		{"gather last, parallel", false, []int{600, 90}, []int{70}, 1},
		{"gather scalar index", false, []int{6, 4}, []int{}, 0},
		{"elements axis 1", true, []int{5, 9}, []int{5, 4}, 1},
		{"elements axis 1, parallel, fewer rows", true, []int{300, 100}, []int{256, 200}, 1},
		{"elements axis 0, parallel, fewer columns", true, []int{50, 600}, []int{100, 512}, 0},
		{"elements rank 3, parallel", true, []int{8, 40, 128}, []int{8, 50, 100}, 1},
	}
	for _, c := range cases {
		data := ref.RandFloats(r, size(c.dshape))
		outer, s, inner := split(c.dshape, c.axis)
		idx := ref.RandIndices(r, size(c.ishape), s)
		var want, wantGrad []float64
		var oshape []int
		if c.along {
			want, oshape = ref.TakeAlong(data, c.dshape, idx, c.ishape, c.axis), c.ishape
		} else {
			want, oshape = ref.Take(data, c.dshape, idx, c.ishape, c.axis)
		}
		up := ref.RandFloats(r, size(oshape))
		if c.along {
			wantGrad = ref.ScatterAdd(c.dshape, idx, c.ishape, c.axis, up)
		} else {
			wantGrad = ref.IndexAdd(c.dshape, idx, c.ishape, c.axis, up)
		}
		for _, procs := range []int{1, 2} {
			runtime.GOMAXPROCS(procs)
			t.Run(fmt.Sprintf("%s/GOMAXPROCS=%d", c.name, procs), func(t *testing.T) {
				out, grad := nans(size(oshape)), nans(len(data))
				if c.along {
					g := NewAlong(c.dshape, c.ishape, c.axis)
					require.Equal(t, -1, TakeAlong(out, data, idx, &g))
					ScatterAdd(grad, up, idx, &g, 1, true)
				} else {
					require.Equal(t, -1, Take(out, data, idx, outer, s, inner, true))
					IndexAdd(grad, up, idx, outer, s, inner, 1, -1, true)
				}
				sameFloats(t, want, out, "forward")
				for i := range wantGrad {
					if math.IsNaN(grad[i]) || math.Abs(grad[i]-wantGrad[i]) > 1e-9 {
						t.Fatalf("gradient element %d is %v, want %v", i, grad[i], wantGrad[i])
					}
				}
			})
		}
	}
}

// Each assembly routine gives the result of its Go twin on the same
// inputs: the twin is its reference. Where the processor (or the build)
// has no assembly, the routines are the twins and the test checks them
// against themselves.
func TestAssemblyTwins(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	t.Run("inRange", func(t *testing.T) {
		if !hasCheckAsm {
			t.Skip("no AVX2 index check on this processor or build")
		}
		// The largest axis: 2^40 where int has 64 bits, 2^20 where it has 32.
		for _, s := range []int{1, 7, 1000, 1 << (strconv.IntSize * 5 / 8)} {
			for _, n := range []int{16, 32, 48, 160} {
				idx := make([]int64, n)
				for i := range idx {
					idx[i] = int64(r.Uint64N(2*uint64(s))) - int64(s)
				}
				for p := -1; p < n; p += 5 {
					x := slices.Clone(idx)
					if p >= 0 {
						x[p] = int64(s) // out of range
					}
					i32 := make([]int32, n)
					fits := true
					for i, v := range x {
						i32[i] = int32(v)
						fits = fits && int64(i32[i]) == v
					}
					assert.Equal(t, inRange64Go(&x[0], n, s), inRange64(&x[0], n, s), "int64 s=%d n=%d p=%d", s, n, p)
					if fits {
						assert.Equal(t, inRange32Go(&i32[0], n, s), inRange32(&i32[0], n, s), "int32 s=%d n=%d p=%d", s, n, p)
					}
				}
			}
		}
	})
	t.Run("copyRows", func(t *testing.T) {
		if !hasRowAsm {
			t.Skip("no AVX row copy on this processor or build")
		}
		for _, size := range []uintptr{32, 64, 96, 128, 160, 512} {
			src := make([]byte, 40*size)
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			for _, n := range []int{0, 1, 7, 8, 9, 40} {
				rows := make([]uintptr, n)
				for i := range n {
					rows[i] = addr(src[uintptr(r.IntN(40))*size:])
				}
				// Rows to prefetch: none, fewer than rows, or as many; they
				// must not change the copy.
				ahead := rows[min(rowsAhead, n):]
				if n%2 == 0 {
					ahead = rows
				}
				want := make([]byte, uintptr(n)*size+size) // a row past the end: must stay zero
				copyRowsGo(ptr(want), rows, size, nil)
				for i, a := range rows { // the twin itself, against the rows it read
					k := (a - addr(src)) / size
					require.Equal(t, src[k*size:(k+1)*size], want[uintptr(i)*size:uintptr(i+1)*size], "copyRowsGo row %d", i)
				}
				got := make([]byte, len(want))
				copyRows(ptr(got), rows, size, ahead)
				assert.Equal(t, want, got, "copyRows, rows of %d bytes, n=%d", size, n)
				aligned := Uninit[float64](len(want)/8 + 4) // 32-byte alignment for streamRows
				off := (32 - addr(aligned)%32) % 32
				dst := valuesAt[byte](offset(ptr(aligned), off), uintptr(len(want)))
				clear(dst)
				streamRows(ptr(dst), rows, size, ahead)
				storeFence()
				assert.Equal(t, want, slices.Clone(dst), "streamRows, rows of %d bytes, n=%d", size, n)
				runtime.KeepAlive(src)
			}
		}
	})
	t.Run("adam", func(t *testing.T) {
		// AdamRow32 against the plain float64 formula (close) and against
		// its twin (exact), with and without the assembly's tail.
		c := &AdamConsts{B1: 0.9, C1: 0.1, B2: 0.999, C2: 0.001, Eps: 1e-8, Step: 0.003, Decay: 0.99}
		for _, n := range []int{0, 1, 7, 8, 64, 100} {
			g, m, v, w := toFloat32(ref.RandFloats(r, n)), toFloat32(ref.RandFloats(r, n)), toFloat32(ref.RandFloats(r, n)), toFloat32(ref.RandFloats(r, n))
			for i := range v {
				v[i] *= v[i] // a second moment is not negative
				if i%5 == 0 {
					g[i], m[i], v[i] = 0, 0, 0 // sqrt(0) + eps
				}
			}
			w1, m1, v1 := slices.Clone(w), slices.Clone(m), slices.Clone(v)
			w2, m2, v2 := slices.Clone(w), slices.Clone(m), slices.Clone(v)
			AdamRow32(w1, g, m1, v1, c)
			adamRow32Go(w2, g, m2, v2, c)
			assert.Equal(t, w2, w1, "w, n=%d", n)
			assert.Equal(t, m2, m1, "m, n=%d", n)
			assert.Equal(t, v2, v1, "v, n=%d", n)
			for j := range w {
				x := float64(g[j])
				mj := 0.9*float64(m[j]) + 0.1*x
				vj := 0.999*float64(v[j]) + 0.001*x*x
				wj := float64(w[j])*0.99 - 0.003*mj/(math.Sqrt(vj)+1e-8)
				// float32 against float64: a few units in the last place.
				assert.InDelta(t, mj, float64(m1[j]), 1e-6*max(1, math.Abs(mj)), "m[%d], n=%d", j, n)
				assert.InDelta(t, vj, float64(v1[j]), 1e-6*max(1, math.Abs(vj)), "v[%d], n=%d", j, n)
				assert.InDelta(t, wj, float64(w1[j]), 1e-6*max(1, math.Abs(wj)), "w[%d], n=%d", j, n)
			}
		}
	})
	t.Run("adamDense32", func(t *testing.T) {
		// adamDense32 (the assembly, or its Go twin where there is none)
		// against adamDenseGo on the same values: the same bits.
		c := adamDenseConsts32{shrink: 0.99, wd: 0.01, b1: 0.9, c1: 0.1, b2: 0.999, c2: 0.001, bc2: 0.3, eps: 1e-8, size: 0.003}
		for _, n := range []int{8, 16, 64} {
			g, m, v, w := toFloat32(ref.RandFloats(r, n)), toFloat32(ref.RandFloats(r, n)), toFloat32(ref.RandFloats(r, n)), toFloat32(ref.RandFloats(r, n))
			for i := range v {
				v[i] *= v[i]
			}
			w1, m1, v1 := slices.Clone(w), slices.Clone(m), slices.Clone(v)
			w2, m2, v2 := slices.Clone(w), slices.Clone(m), slices.Clone(v)
			adamDense32(&w1[0], &g[0], &m1[0], &v1[0], n, &c) // the assembly, or the twin in a purego build
			adamDenseGo(w2, g, m2, v2, c.shrink, c.wd, c.b1, c.c1, c.b2, c.c2, c.bc2, c.eps, c.size)
			assert.Equal(t, w2, w1, "w, n=%d", n)
			assert.Equal(t, m2, m1, "m, n=%d", n)
			assert.Equal(t, v2, v1, "v, n=%d", n)
		}
	})
	t.Run("exp32", func(t *testing.T) {
		if !hasExpAsm {
			t.Skip("no AVX2 exp on this processor or build")
		}
		inf, nan := float32(math.Inf(1)), float32(math.NaN())
		special := []float32{0, float32(math.Copysign(0, -1)), -inf, nan, expMin, expMin - 1e-5, -87.4, -1000, 1, 88,
			-0.5 * float32(math.Ln2), 0.5 * float32(math.Ln2), -math.SmallestNonzeroFloat32}
		for _, n := range []int{0, 8, 16, 64, 1024} {
			src := make([]float32, n)
			for i := range src {
				src[i] = -100 * r.Float32()
				if i%5 == 0 {
					src[i] = special[(i/5)%len(special)]
				}
			}
			want, got := make([]float32, n), make([]float32, n)
			exp32Go(want, src)
			exp32(got, src)
			// Bit for bit, but for the payload of a NaN.
			same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
			for i := range src {
				require.True(t, same(want[i], got[i]), "exp32(%g): %g, exp32Go %g", src[i], got[i], want[i])
			}
			exp32(src, src) // in place
			for i := range src {
				require.True(t, same(want[i], src[i]), "exp32 in place, element %d: %g, exp32Go %g", i, src[i], want[i])
			}
		}
		// 2^20 values evenly over [-87, 88]: a step of the polynomial
		// rounded twice where the twin fuses it changes a handful.
		src := make([]float32, 1<<20)
		for i := range src {
			src[i] = -87 + 175*float32(i)/float32(len(src))
		}
		want, got := make([]float32, len(src)), make([]float32, len(src))
		exp32Go(want, src)
		exp32(got, src)
		for i := range src {
			require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "exp32(%g): %g, exp32Go %g", src[i], got[i], want[i])
		}
	})
	t.Run("log1p32", func(t *testing.T) {
		if !hasLog1pAsm {
			t.Skip("no AVX on this processor or build")
		}
		src := []float32{0, 1, 1e-30, float32(math.NaN()), math.SmallestNonzeroFloat32}
		for range 251 {
			src = append(src, r.Float32())
		}
		n := len(src) &^ 7
		want, got := make([]float32, n), make([]float32, n)
		log1p32Go(want, src[:n])
		log1p32(got, src[:n])
		for i := range want {
			require.True(t, math.Float32bits(want[i]) == math.Float32bits(got[i]) || want[i] != want[i] && got[i] != got[i],
				"log1p32(%g): %g, log1p32Go %g", src[i], got[i], want[i])
		}
	})
	t.Run("rowMaxShift32", func(t *testing.T) {
		if !hasSoftmaxAsm {
			t.Skip("no AVX2 on this processor or build")
		}
		inf, nan := float32(math.Inf(1)), float32(math.NaN())
		same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
		for _, c := range []int{1, 3, 8, 16, 21, 64} {
			rows := 9
			x := toFloat32(ref.RandFloats(r, rows*c))
			// Rows 1-4: a NaN, a +Inf, only -Inf, only NaN; row 5 has its
			// maximum last, where the one-at-a-time tail finds it.
			x[c] = nan
			x[2*c+c/2] = inf
			for j := range c {
				x[3*c+j], x[4*c+j] = -inf, nan
			}
			x[6*c-1] = 2000 // RandFloats are below 1000
			want, got := make([]float32, rows*c), make([]float32, rows*c)
			wm, gm := make([]float32, rows), make([]float32, rows)
			rowMaxShift32Go(want, x, wm, c)
			rowMaxShift32(&got[0], &x[0], &gm[0], rows, c)
			for i := range wm {
				require.True(t, same(wm[i], gm[i]), "c=%d row %d: max %g, twin %g", c, i, gm[i], wm[i])
			}
			for i := range want {
				require.True(t, same(want[i], got[i]), "c=%d element %d: %g, twin %g", c, i, got[i], want[i])
			}
			assert.Equal(t, float32(2000), gm[5], "c=%d: the maximum in the tail", c)
			assert.True(t, math.IsInf(float64(gm[4]), -1), "c=%d: a row of NaN has no maximum", c)
		}
	})
	t.Run("rowSums32", func(t *testing.T) {
		if !hasSoftmaxAsm {
			t.Skip("no AVX2 on this processor or build")
		}
		for _, c := range []int{1, 3, 4, 16, 19, 64} {
			rows := 7
			e := toFloat32(ref.RandFloats(r, rows*c))
			want, got := make([]float64, rows), make([]float64, rows)
			rowSums32Go(want, e, c)
			rowSums32(&got[0], &e[0], rows, c)
			assert.Equal(t, want, got, "c=%d", c)
			for i, s := range got {
				var plain float64
				for _, v := range e[i*c : (i+1)*c] {
					plain += float64(v)
				}
				assert.InDelta(t, plain, s, 1e-12, "c=%d row %d against a plain sum", c, i)
			}
		}
	})
	t.Run("sumRows", func(t *testing.T) {
		if !hasRowAsm {
			t.Skip("no AVX row sum on this processor or build")
		}
		// Every block path: 32-byte blocks only, one 256-byte block, 256-byte
		// blocks that prefetch the next, and both with a 32-byte rest.
		for _, size := range []uintptr{32, 96, 256, 288, 512, 800} {
			dim := int(size / 4)
			table := toFloat32(ref.RandFloats(r, 30*dim))
			for _, n := range []int{0, 1, 7, 64} {
				rows := make([]uintptr, n)
				coef := toFloat32(ref.RandFloats(r, n))
				for k := range rows {
					rows[k] = addr(table[r.IntN(30)*dim:])
				}
				// Rows to prefetch: none, fewer than rows, or as many; they
				// must not change the sum.
				ahead := rows[min(3, n):]
				if n%2 == 0 {
					ahead = rows
				}
				for i, c := range [][]float32{nil, coef, nil, coef, nil, coef} {
					scale := float32(1)
					if i >= 2 {
						scale = 1 / float32(n+3) // as a mean scales
					}
					acc := i < 4                                 // the last two start from zero
					start := toFloat32(ref.RandFloats(r, dim+8)) // 8 past the end: must stay as they are
					want, got := slices.Clone(start), slices.Clone(start)
					sumRowsGo(ptr(want), rows, c, size, nil, scale, acc)
					sumRows(ptr(got), rows, c, size, ahead, scale, acc)
					assert.Equal(t, want, got, "sumRows, rows of %d bytes, n=%d, weighted %t, scale %g, acc %t", size, n, c != nil, scale, acc)
					if n > 0 {
						assert.NotEqual(t, start[:dim], got[:dim], "sumRows added nothing: size %d, n=%d", size, n)
					}
					if n > 0 && !acc {
						// From zero, dst's old values play no part.
						zero := make([]float32, dim)
						sumRowsGo(ptr(zero), rows, c, size, nil, scale, true)
						assert.Equal(t, zero, got[:dim], "sumRows without acc read dst: size %d, n=%d", size, n)
					}
					assert.Equal(t, start[dim:], got[dim:], "sumRows wrote past dst: size %d, n=%d", size, n)
				}
				runtime.KeepAlive(table)
			}
		}
	})
	t.Run("stream", func(t *testing.T) {
		// Each routine and its twin against the plain loop: under the
		// purego tag the routine is its twin, and the loop still checks it.
		for _, n := range []int{4, 8, 64, 1000, 4096} {
			src := toFloat32(ref.RandFloats(r, n))
			src64 := ref.RandFloats(r, n)
			copied, scaled := make([]float32, n+4), make([]float32, n+4) // 4 past the end: must stay 0
			scaled64 := make([]float64, n+2)
			for i, v := range src {
				copied[i], scaled[i], scaled64[i] = v, float32(-0.75*v), 1.5*src64[i]
			}
			for name, f := range map[string]func(dst, src *byte, n uintptr){"streamCopy": streamCopy, "streamCopyGo": streamCopyGo} {
				got := make([]float32, n+4) // 16-byte aligned by the allocator
				f(ptr(got), ptr(src), uintptr(4*n))
				storeFence()
				assert.Equal(t, copied, got, "%s n=%d", name, n)
			}
			for name, f := range map[string]func(dst, src *byte, n uintptr, c float32){"streamScaled32": streamScaled32, "streamScaled32Go": streamScaled32Go} {
				got := make([]float32, n+4)
				f(ptr(got), ptr(src), uintptr(n), -0.75)
				storeFence()
				assert.Equal(t, scaled, got, "%s n=%d", name, n)
			}
			for name, f := range map[string]func(dst, src *byte, n uintptr, c float64){"streamScaled64": streamScaled64, "streamScaled64Go": streamScaled64Go} {
				got := make([]float64, n+2)
				f(ptr(got), ptr(src64), uintptr(n), 1.5)
				storeFence()
				assert.Equal(t, scaled64, got, "%s n=%d", name, n)
			}
			for name, f := range map[string]func(dst *byte, n uintptr){"streamClear": streamClear, "streamClearGo": streamClearGo} {
				got := slices.Clone(copied)
				f(ptr(got), uintptr(4*n))
				storeFence()
				assert.Equal(t, make([]float32, n+4), got, "%s n=%d", name, n)
			}
		}
	})
	t.Run("prefetch", func(t *testing.T) {
		// A prefetch changes nothing and never faults, whatever the address.
		buf := []float64{1, 2, 3}
		prefetch(ptr(buf), 24)
		prefetchGo(ptr(buf), 24)
		var rows [rowsAhead]uintptr
		rows[0] = addr(buf)
		rows[1] = ^uintptr(0) &^ 0xfff // the last page, not mapped
		prefetchLines(&rows, 2, 64)
		prefetchLinesGo(&rows, 2, 64)
		assert.Equal(t, []float64{1, 2, 3}, buf)
	})
}
