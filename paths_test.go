package gather

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/opkit"
	"github.com/gathergrad/gather/internal/parallel"
	"github.com/gathergrad/gather/internal/ref"
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
		kind           operator
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
			idx := ref.RandIndices(r, tensor.Shape(c.ishape).TotalSize(), c.dshape[c.axis]/4) // heavy duplicates
			indices := ref.CastIndices(idx, c.ishape, tensor.Int64)
			var oshape tensor.Shape
			if c.kind == opGather {
				oshape, _ = gatherShape("gather", nil, c.dshape, c.ishape, c.axis)
			} else {
				oshape = c.ishape
			}
			require.GreaterOrEqual(t, oshape.TotalSize(), parallel.MinWork, "too small to run in parallel")
			src := tensor.New(tensor.WithShape(oshape...), tensor.WithBacking(randF32(oshape.TotalSize())))
			var want []uint32
			for _, procs := range []int{1, 2, 3, 4, 7} {
				runtime.GOMAXPROCS(procs)
				dst := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(c.dshape...))
				require.NoError(t, backward(c.kind, dst, indices, src, c.axis, 1, -1, label{Op: c.kind.String()}, false))
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
				_, diff := testOps(t, c.kind, c.axis, tensor.Float32, c.dshape, c.ishape)
				_, err := diff.UsePreallocDo(stale, nil, indices, src)
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
	idx := ref.CastIndices(ref.RandIndices(rand.New(rand.NewPCG(1, 1)), 64, 100), []int{64}, tensor.Int64)
	buf := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(64, 16))
	gbuf := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(100, 16))
	fwd := out.Op().(gorgonia.UsePreallocDoer)
	bwd := grads[0].Op()

	// Gorgonia passes an op its inputs as a slice; so do we, so that the
	// variadic call itself allocates nothing.
	fwdIn := []gorgonia.Value{data, idx}
	bwdIn := []gorgonia.Value{data, idx, buf}
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
	gi := ref.CastIndices(ref.RandIndices(rand.New(rand.NewPCG(2, 2)), 160, 10), []int{10, 16}, tensor.Int32)
	gout := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(10, 16))
	allocs = testing.AllocsPerRun(50, func() {
		if _, err := forward(opGatherElements, ge, gi, 1, target{out: gout}, label{Op: opGatherElements.String()}); err != nil {
			t.Fatal(err)
		}
		if err := ScatterAdd(ge, gi, gout, 1); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "GatherElements forward into a buffer and ScatterAdd")

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
	o, diff := testOps(t, opGather, 0, tensor.Float32, []int{3000, 64}, []int{4096})
	data := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(3000, 64))
	idx := ref.CastIndices(ref.RandIndices(r, 4096, 3000), []int{4096}, tensor.Int64)
	out := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(4096, 64))
	grad := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(3000, 64))
	require.Greater(t, parallel.Workers(4096*64, 4096), 1, "the calls must run in parallel")
	require.Greater(t, parallel.Workers(512*256, 512), 1, "the calls must run in parallel")
	fwdIn, bwdIn := []gorgonia.Value{data, idx}, []gorgonia.Value{data, idx, out}
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
		gi := ref.CastIndices(ref.RandIndices(r, 512*256, 256), []int{512, 256}, tensor.Int32)
		gout := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(512, 256))
		allocs = parallelAllocs(100, func() {
			if _, err := forward(opGatherElements, ge, gi, axis, target{out: gout}, label{Op: opGatherElements.String()}); err != nil {
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
// and the memory they come from is large (these cases are: rows of at
// least a cache line, tables of 1 MB or more; see prefetches in
// internal/kernel). The prefetching must
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
		data := ref.RandFloats(r, tensor.Shape(c.dshape).TotalSize())
		_, s, _ := split(c.dshape, c.axis)
		idx := ref.RandIndices(r, tensor.Shape(c.ishape).TotalSize(), c.dshape[c.axis])
		wantOut, oshape := ref.Take(data, c.dshape, idx, c.ishape, c.axis)
		up := ref.RandFloats(r, tensor.Shape(oshape).TotalSize())
		wantGrad := ref.IndexAdd(c.dshape, idx, c.ishape, c.axis, up)
		d := ref.FloatTensor(data, c.dshape, tensor.Float64)
		for _, procs := range []int{1, 2} {
			runtime.GOMAXPROCS(procs)
			t.Run(fmt.Sprintf("%s/GOMAXPROCS=%d", c.name, procs), func(t *testing.T) {
				out, err := Take(d, ref.CastIndices(idx, c.ishape, tensor.Int64), c.axis)
				require.NoError(t, err)
				require.Equal(t, wantOut, ref.Floats(out))

				_, diff := testOps(t, opGather, c.axis, tensor.Float64, c.dshape, c.ishape)
				g, err := diff.Do(d, ref.CastIndices(idx, c.ishape, tensor.Int64), ref.FloatTensor(up, oshape, tensor.Float64))
				require.NoError(t, err)
				require.InDeltaSlice(t, wantGrad, ref.Floats(g.(*tensor.Dense)), 1e-9)

				n := len(idx)
				// Positions around the kernels' look-ahead of 8 rows.
				for _, p := range []int{0, 1, n/2 - 1, n/2 + 1, n - 9, n - 8, n - 1} {
					for _, v := range []int64{int64(s), int64(-s - 1)} {
						bad := append([]int64(nil), idx...)
						bad[p] = v
						_, err := Take(d, ref.CastIndices(bad, c.ishape, tensor.Int64), c.axis)
						var ie *IndexError
						require.ErrorAs(t, err, &ie, "bad index %d at %d", v, p)
						assert.Equal(t, ref.Unravel(p, c.ishape), ie.Pos, "bad index %d at %d", v, p)
						assert.Equal(t, v, ie.Value)
					}
				}
			})
		}
	}
}

// testOps returns the op of kind for data of dtype dt and shape dshape and
// Int64 indices of shape ishape along axis, and its gradient op, which
// takes data (which it does not read), indices and the upstream gradient.
func testOps(t testing.TB, kind operator, axis int, dt tensor.Dtype, dshape, ishape tensor.Shape) (*gatherOp, *opkit.Grad) {
	t.Helper()
	g := gorgonia.NewGraph()
	d := gorgonia.NewTensor(g, dt, len(dshape), gorgonia.WithShape(dshape...))
	i := gorgonia.NewTensor(g, tensor.Int64, len(ishape), gorgonia.WithShape(ishape...))
	o, err := newOp(kind, d, i, axis, gatherConfig(nil))
	if err != nil {
		t.Fatal(err)
	}
	return o, o.Grads[0]
}
