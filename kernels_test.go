package gather

import (
	"math"
	"math/rand/v2"
	"runtime"
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
// run on the calling goroutine.
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
}
