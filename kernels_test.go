package gather

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The backward kernels split work so that each destination element sums its
// contributions in the same order for any number of workers: the results
// must be bit-identical for every GOMAXPROCS.
func TestBackwardDeterministicAcrossGOMAXPROCS(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	randF32 := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64()) * 1e3
		}
		return v
	}
	cases := []struct {
		name           string
		kind           string
		dshape, ishape []int
		axis           int
	}{
		{"gather rows", opGather, []int{300, 64}, []int{4096}, 0},
		{"gather middle", opGather, []int{16, 50, 32}, []int{600}, 1},
		{"gather many blocks", opGather, []int{512, 20, 8}, []int{64}, 1},
		{"elements axis 1", opGatherElements, []int{256, 100}, []int{256, 400}, 1},
		{"elements axis 0", opGatherElements, []int{50, 512}, []int{400, 512}, 0},
		{"elements rank 3", opGatherElements, []int{8, 40, 128}, []int{8, 90, 128}, 1},
		// Indices smaller than data on the dimension the workers split.
		{"elements axis 1, fewer rows", opGatherElements, []int{300, 100}, []int{256, 400}, 1},
		{"elements axis 0, fewer columns", opGatherElements, []int{50, 600}, []int{400, 512}, 0},
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			idx := randIndices(r, tensor.Shape(c.ishape).TotalSize(), c.dshape[c.axis]/4) // heavy duplicates
			indices := castIndices(idx, c.ishape, tensor.Int64)
			var oshape tensor.Shape
			if c.kind == opGather {
				oshape, _ = gatherShape(nil, c.dshape, c.ishape, c.axis)
			} else {
				oshape = c.ishape
			}
			require.GreaterOrEqual(t, oshape.TotalSize(), minParallelWork, "too small to run in parallel")
			src := tensor.New(tensor.WithShape(oshape...), tensor.WithBacking(randF32(oshape.TotalSize())))
			var want []uint32
			for _, procs := range []int{1, 2, 3, 4, 7} {
				runtime.GOMAXPROCS(procs)
				dst := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(c.dshape...))
				require.NoError(t, backward(c.kind, dst, indices, src, c.axis, 1, -1))
				bits := make([]uint32, len(dst.Float32s()))
				for i, x := range dst.Float32s() {
					bits[i] = math.Float32bits(x)
				}
				// The gradient op into a stale buffer: the workers clear
				// it as they go, and the result is the same.
				stale := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(c.dshape...))
				for i := range stale.Float32s() {
					stale.Float32s()[i] = float32(math.NaN())
				}
				diff := &diffOp{fwd: &op{kind: c.kind, axis: c.axis, dataType: tensor.Float32, dataShape: c.dshape, cfg: newConfig(nil)}}
				_, err := diff.UsePreallocDo(stale, indices, src)
				require.NoError(t, err)
				for i, x := range stale.Float32s() {
					require.Equal(t, bits[i], math.Float32bits(x), "GOMAXPROCS=%d: prealloc differs at %d", procs, i)
				}
				if want == nil {
					want = bits
					continue
				}
				require.Equal(t, want, bits, "GOMAXPROCS=%d differs from GOMAXPROCS=1", procs)
			}
		})
	}
}

// The prealloc and incr paths allocate nothing for inputs small enough to
// run on the calling goroutine, nor for a gradient block large enough to be
// written with streaming stores.
func TestZeroAllocations(t *testing.T) {
	g := gorgonia.NewGraph()
	d := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(100, 16), gorgonia.WithName("d"))
	i := gorgonia.NewVector(g, tensor.Int64, gorgonia.WithShape(64), gorgonia.WithName("i"))
	out, err := Gather(d, i, 0)
	require.NoError(t, err)
	grads, err := out.Op().(gorgonia.SDOp).SymDiff(gorgonia.Nodes{d, i}, out, out)
	require.NoError(t, err)

	data := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(100, 16))
	idx := castIndices(randIndices(rand.New(rand.NewPCG(1, 1)), 64, 100), []int{64}, tensor.Int64)
	buf := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(64, 16))
	gbuf := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(100, 16))
	fwd := out.Op().(gorgonia.UsePreallocDoer)
	bwd := grads[0].Op()

	// Gorgonia passes an op its inputs as a slice; so do we, so that the
	// variadic call itself allocates nothing.
	fwdIn := []gorgonia.Value{data, idx}
	bwdIn := []gorgonia.Value{idx, buf}
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := fwd.UsePreallocDo(buf, fwdIn...); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "forward UsePreallocDo")
	allocs = testing.AllocsPerRun(50, func() {
		if _, err := bwd.(gorgonia.UsePreallocDoer).UsePreallocDo(gbuf, bwdIn...); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "gradient UsePreallocDo")
	allocs = testing.AllocsPerRun(50, func() {
		if err := bwd.(gorgonia.IncrDoer).IncrDo(gbuf, bwdIn...); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "gradient IncrDo")

	ge := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(10, 16))
	gi := castIndices(randIndices(rand.New(rand.NewPCG(2, 2)), 160, 10), []int{10, 16}, tensor.Int32)
	gout := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(10, 16))
	allocs = testing.AllocsPerRun(50, func() {
		if _, err := forward(opGatherElements, ge, gi, 1, gout); err != nil {
			t.Fatal(err)
		}
		if err := ScatterAdd(ge, gi, gout, 1); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "GatherElements forward into a buffer and ScatterAdd")

	// A destination block large enough for addFirstTouch takes its row
	// bitmap from a free list, which collections leave as it is.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	big := make([]float32, 80000*8)
	require.True(t, writesFirst(big, 8) || !streamStores)
	rows := castIndices(randIndices(rand.New(rand.NewPCG(3, 3)), 5000, 80000), []int{5000}, tensor.Int64).Int64s()
	up := make([]float32, 5000*8)
	grad := func() { indexAdd(big, up, rows, tensor.Shape{80000, 8}, 0, 1, -1, true) }
	allocs = testing.AllocsPerRun(20, grad)
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

// Above the parallel threshold the prealloc and incr paths allocate nothing
// either, once the pools of tasks, jobs and row bitmaps are warm: at
// GOMAXPROCS=2, the Gather forward into a buffer, its gradient into a
// reused buffer and added into a target, and GatherElements into a buffer
// and ScatterAdd. testing.AllocsPerRun sets GOMAXPROCS to 1, under which
// these calls run on one goroutine, so parallelAllocs counts instead.
func TestZeroAllocationsParallel(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	r := rand.New(rand.NewPCG(4, 4))
	o := &op{kind: opGather, axis: 0, dataType: tensor.Float32, dataShape: []int{3000, 64}, cfg: newConfig(nil)}
	diff := &diffOp{fwd: o}
	data := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(3000, 64))
	idx := castIndices(randIndices(r, 4096, 3000), []int{4096}, tensor.Int64)
	out := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(4096, 64))
	grad := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(3000, 64))
	require.Greater(t, workers(4096*64, 4096), 1, "the calls must run in parallel")
	require.Greater(t, workers(512*256, 512), 1, "the calls must run in parallel")
	fwdIn, bwdIn := []gorgonia.Value{data, idx}, []gorgonia.Value{idx, out}
	allocs := parallelAllocs(100, func() {
		if _, err := o.UsePreallocDo(out, fwdIn...); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "forward UsePreallocDo")
	allocs = parallelAllocs(100, func() {
		if _, err := diff.UsePreallocDo(grad, bwdIn...); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "gradient UsePreallocDo")
	allocs = parallelAllocs(100, func() {
		if err := diff.IncrDo(grad, bwdIn...); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "gradient IncrDo")

	for _, axis := range []int{0, 1} {
		ge := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(512, 256))
		gi := castIndices(randIndices(r, 512*256, 256), []int{512, 256}, tensor.Int32)
		gout := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(512, 256))
		allocs = parallelAllocs(100, func() {
			if _, err := forward(opGatherElements, ge, gi, axis, gout); err != nil {
				t.Fatal(err)
			}
			if err := ScatterAdd(ge, gi, gout, axis); err != nil {
				t.Fatal(err)
			}
		})
		assert.Zero(t, allocs, "GatherElements forward into a buffer and ScatterAdd, axis %d", axis)
	}
}

// parallelAllocs is testing.AllocsPerRun without setting GOMAXPROCS: the
// number of heap allocations per call of f, over runs calls after one,
// rounded down as AllocsPerRun does; the least of three such counts. A
// worker that has exited after polling in vain is started anew, and the
// runtime may then allocate its goroutine record; on a busy machine that
// happens every few calls for a while. An allocation in every call shows
// in all three counts.
func parallelAllocs(runs int, f func()) float64 {
	f()
	least := uint64(math.MaxUint64)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			f()
		}
		runtime.ReadMemStats(&after)
		least = min(least, (after.Mallocs-before.Mallocs)/uint64(runs))
	}
	return float64(least)
}

// Row kernels prefetch rows ahead of the one they move when rows are long
// and the memory they come from is large (prefetches). The prefetching must
// not change a result or an error, and an index it looks at ahead of time
// that is out of range must not make it fail early or panic.
func TestPrefetchedRows(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	r := rand.New(rand.NewPCG(21, 22))
	cases := []struct {
		name           string
		dshape, ishape []int
		axis           int
	}{
		{"axis 0", []int{2100, 64}, []int{1500}, 0},
		{"middle axis, small blocks", []int{3, 800, 64}, []int{2, 150}, 1},
	}
	for _, c := range cases {
		data := randFloats(r, tensor.Shape(c.dshape).TotalSize())
		_, s, inner := split(c.dshape, c.axis)
		require.True(t, prefetches(data, inner), "the data must be large enough to be prefetched from")
		idx := randIndices(r, tensor.Shape(c.ishape).TotalSize(), c.dshape[c.axis])
		wantOut, oshape := refTake(data, c.dshape, idx, c.ishape, c.axis)
		up := randFloats(r, tensor.Shape(oshape).TotalSize())
		wantGrad := refIndexAdd(c.dshape, idx, c.ishape, c.axis, up)
		d := floatTensor(data, c.dshape, tensor.Float64)
		for _, procs := range []int{1, 2} {
			runtime.GOMAXPROCS(procs)
			t.Run(fmt.Sprintf("%s/GOMAXPROCS=%d", c.name, procs), func(t *testing.T) {
				out, err := Take(d, castIndices(idx, c.ishape, tensor.Int64), c.axis)
				require.NoError(t, err)
				require.Equal(t, wantOut, floats(out))

				diff := &diffOp{fwd: &op{kind: opGather, axis: c.axis, dataType: tensor.Float64, dataShape: c.dshape, cfg: newConfig(nil)}}
				g, err := diff.Do(castIndices(idx, c.ishape, tensor.Int64), floatTensor(up, oshape, tensor.Float64))
				require.NoError(t, err)
				require.InDeltaSlice(t, wantGrad, floats(g.(*tensor.Dense)), 1e-9)

				n := len(idx)
				for _, p := range []int{0, 1, n/2 - 1, n/2 + 1, n - rowsAhead - 1, n - rowsAhead, n - 1} {
					for _, v := range []int64{int64(s), int64(-s - 1)} {
						bad := append([]int64(nil), idx...)
						bad[p] = v
						_, err := Take(d, castIndices(bad, c.ishape, tensor.Int64), c.axis)
						var ie *IndexError
						require.ErrorAs(t, err, &ie, "bad index %d at %d", v, p)
						assert.Equal(t, unravel(p, c.ishape), ie.Pos, "bad index %d at %d", v, p)
						assert.Equal(t, v, ie.Value)
					}
				}
			})
		}
	}
	blocks := make([]float32, 600*512) // one block of s rows: 1.2 MB
	assert.True(t, prefetches(blocks, 512), "a destination block larger than a core's cache")
	assert.False(t, prefetches(blocks[:1000*8], 8), "rows shorter than a cache line")
	assert.False(t, prefetches(blocks[:100*64], 64), "a block that fits in cache")
}

// A new output of at least minStream bytes is written with streaming stores
// when its rows are whole multiples of 16 bytes, and rows of whole
// multiples of 32 bytes are moved in batches by assembly (streamed or not);
// on every path the result is the same, every element is written (new
// outputs are poisoned here), and a bad index anywhere, at the start, in
// the middle or at the end of a batch, is reported where it is.
func TestStreamedRows(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	defer func(p bool) { poisonOutputs = p }(poisonOutputs)
	poisonOutputs = true
	r := rand.New(rand.NewPCG(23, 24))
	cases := []struct {
		name           string
		dt             tensor.Dtype
		dshape, ishape []int
		axis           int
		streamed       bool
		batched        bool
	}{
		{"float32 rows of 80 bytes", tensor.Float32, []int{5000, 20}, []int{16000}, 0, true, false},
		{"float64 rows of 512 bytes", tensor.Float64, []int{900, 64}, []int{3, 900}, 0, true, true},
		{"middle axis, rows of 192 bytes", tensor.Float32, []int{4, 700, 48}, []int{2, 900}, 1, true, true},
		{"middle axis, rows of 256 bytes", tensor.Float32, []int{5, 300, 64}, []int{1003}, 1, true, true},
		{"rows of 12 bytes", tensor.Float32, []int{5000, 3}, []int{100000}, 0, false, false},
		{"small output, rows of 64 bytes", tensor.Float32, []int{5000, 16}, []int{1001}, 0, false, true},
		{"rows of 32 bytes", tensor.Float64, []int{300, 4}, []int{7, 5}, 0, false, true},
	}
	for _, c := range cases {
		data := randFloats(r, tensor.Shape(c.dshape).TotalSize())
		_, s, inner := split(c.dshape, c.axis)
		idx := randIndices(r, tensor.Shape(c.ishape).TotalSize(), c.dshape[c.axis])
		wantOut, oshape := refTake(data, c.dshape, idx, c.ishape, c.axis)
		d := floatTensor(data, c.dshape, c.dt)
		out := newOutput(c.dt, oshape)
		var chosen, batched, batchedInto bool
		if c.dt == tensor.Float32 {
			chosen = streams(out.Float32s(), d.Float32s(), inner)
			batched, batchedInto = batches(out.Float32s(), inner, chosen), batches(out.Float32s(), inner, false)
		} else {
			chosen = streams(out.Float64s(), d.Float64s(), inner)
			batched, batchedInto = batches(out.Float64s(), inner, chosen), batches(out.Float64s(), inner, false)
		}
		require.Equal(t, c.streamed && streamStores, chosen, "%s: streaming chosen", c.name)
		require.Equal(t, c.batched && rowAssembly, batched, "%s: batches chosen", c.name)
		require.Equal(t, c.batched && rowAssembly, batchedInto, "%s: batches chosen into a caller's buffer", c.name)
		for _, procs := range []int{1, 2} {
			runtime.GOMAXPROCS(procs)
			t.Run(fmt.Sprintf("%s/GOMAXPROCS=%d", c.name, procs), func(t *testing.T) {
				got, err := Take(d, castIndices(idx, c.ishape, tensor.Int64), c.axis)
				require.NoError(t, err)
				sameFloats(t, wantOut, floats(got), "new output")

				buf := newOutput(c.dt, oshape) // a caller's buffer: ordinary stores
				o := &op{kind: opGather, axis: c.axis}
				got2, err := o.UsePreallocDo(buf, d, castIndices(idx, c.ishape, tensor.Int32))
				require.NoError(t, err)
				sameFloats(t, wantOut, floats(got2.(*tensor.Dense)), "caller's buffer")

				n := len(idx)
				for _, p := range []int{0, 3, rowsAhead - 1, rowsAhead, n/2 + 1, n - 2, n - 1} {
					bad := append([]int64(nil), idx...)
					bad[p] = int64(-s - 1)
					_, err := Take(d, castIndices(bad, c.ishape, tensor.Int64), c.axis)
					var ie *IndexError
					require.ErrorAs(t, err, &ie, "bad index at %d", p)
					assert.Equal(t, unravel(p, c.ishape), ie.Pos)
					assert.Equal(t, int64(-s-1), ie.Value)
				}
			})
		}
	}
}

// sameFloats fails t at the first element where got differs from want:
// require.Equal would take minutes to print the difference of slices this long.
func sameFloats(t *testing.T, want, got []float64, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

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
		addRow(d32, g32, 0.7)
		addRow(d64, g64, 0.7)
		for i := range n {
			if math.Float32bits(d32[i]) != math.Float32bits(w32[i]) || math.Float64bits(d64[i]) != math.Float64bits(w64[i]) {
				t.Fatalf("length %d, element %d: float32 %v want %v, float64 %v want %v", n, i, d32[i], w32[i], d64[i], w64[i])
			}
		}
	}
	d := []float32{1, 2, 3}
	addRow(d, []float32{float32(math.Inf(1)), float32(math.NaN()), 5}, 0)
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
		g := randFloats(r, outer*c.n*inner)
		for i := 0; i < len(g); i += 7 {
			g[i] = 0 // c*0 is -0 for a negative c
		}
		g[5], g[len(g)-3] = math.Inf(1), math.NaN()
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			for _, procs := range []int{1, 2} {
				runtime.GOMAXPROCS(procs)
				t.Run(fmt.Sprintf("%s/%v/GOMAXPROCS=%d", c.name, dt, procs), func(t *testing.T) {
					if dt == tensor.Float32 {
						firstTouchCase(t, c.dshape, c.axis, idx, toFloat32(g), float32(c.c), c.pad, c.first)
					} else {
						firstTouchCase(t, c.dshape, c.axis, idx, g, c.c, c.pad, c.first)
					}
				})
			}
		}
	}
}

func firstTouchCase[T float](t *testing.T, dshape []int, axis int, idx []int64, g []T, c T, pad int, first bool) {
	t.Helper()
	outer, s, inner := split(dshape, axis)
	n := len(idx)
	want := make([]T, outer*s*inner)
	for o := range outer {
		for i, v := range idx {
			j := wrap(v, s)
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
	indexAdd(got, g, idx, tensor.Shape(dshape), axis, c, pad, true)
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
		if !checkAssembly || s < 1 {
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

func convertIndices[J index](idx []int64) []J {
	out := make([]J, len(idx))
	for i, v := range idx {
		out[i] = J(v)
	}
	return out
}
