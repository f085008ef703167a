package gather

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/ref"
	"github.com/gathergrad/gather/internal/vmtest"
)

// views returns tensors holding the values of a row-major [a, b] tensor x
// in strided layouts: a column slice of a wider tensor, a transpose (of the
// transposed values, so the view has x's shape) and a column-major copy.
func views(t *testing.T, x *tensor.Dense) (name []string, view []*tensor.Dense) {
	t.Helper()
	a, b := x.Shape()[0], x.Shape()[1]
	// place stores each x[i][j] with set.
	place := func(set func(v any, i, j int) error) {
		for i := 0; i < a; i++ {
			for j := 0; j < b; j++ {
				v, err := x.At(i, j)
				require.NoError(t, err)
				require.NoError(t, set(v, i, j))
			}
		}
	}

	// A [a, b] slice of a wider [a, b+2] tensor.
	wide := tensor.New(tensor.Of(x.Dtype()), tensor.WithShape(a, b+2))
	place(func(v any, i, j int) error { return wide.SetAt(v, i, j+1) })
	s, err := wide.Slice(nil, tensor.S(1, b+1))
	require.NoError(t, err)
	name, view = append(name, "column slice"), append(view, s.(*tensor.Dense))

	// The transpose of a [b, a] tensor holding x's transpose.
	tt := tensor.New(tensor.Of(x.Dtype()), tensor.WithShape(b, a))
	place(func(v any, i, j int) error { return tt.SetAt(v, j, i) })
	require.NoError(t, tt.T())
	name, view = append(name, "transpose"), append(view, tt)

	// Column-major storage.
	cm := tensor.New(tensor.Of(x.Dtype()), tensor.WithShape(a, b), tensor.AsFortran(nil))
	place(func(v any, i, j int) error { return cm.SetAt(v, i, j) })
	name, view = append(name, "column-major"), append(view, cm)

	for _, v := range view {
		require.False(t, operand.IsRowMajor(v) && !v.DataOrder().IsColMajor(), "not a strided layout")
	}
	return name, view
}

// Views and column-major tensors, as data, indices or upstream gradient,
// give the results of their materialised copies.
func TestViewsAndLayouts(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	data := ref.FloatTensor(ref.RandFloats(r, 12), []int{3, 4}, tensor.Float64)
	idx := ref.CastIndices(ref.RandIndices(r, 6, 3), []int{2, 3}, tensor.Int64)  // rows of data, for axis 0
	idx1 := ref.CastIndices(ref.RandIndices(r, 6, 4), []int{3, 2}, tensor.Int32) // for axis 1
	up := ref.FloatTensor(ref.RandFloats(r, 24), []int{2, 3, 4}, tensor.Float64)

	dn, dv := views(t, data)
	for k, v := range dv {
		t.Run("data/"+dn[k], func(t *testing.T) {
			want, err := Take(data, idx, 0)
			require.NoError(t, err)
			got, err := Take(v, idx, 0)
			require.NoError(t, err)
			requireSameTensor(t, want, got)
			want, err = TakeAlongAxis(data, idx1, 1)
			require.NoError(t, err)
			got, err = TakeAlongAxis(v, idx1, 1)
			require.NoError(t, err)
			requireSameTensor(t, want, got)
		})
	}
	in, iv := views(t, idx)
	for k, v := range iv {
		t.Run("indices/"+in[k], func(t *testing.T) {
			want, err := Take(data, idx, 0)
			require.NoError(t, err)
			got, err := Take(data, v, 0)
			require.NoError(t, err)
			requireSameTensor(t, want, got)

			// Backward with the view as indices.
			wantG := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(3, 4))
			require.NoError(t, IndexAdd(wantG, idx, up, 0))
			gotG := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(3, 4))
			require.NoError(t, IndexAdd(gotG, v, up, 0))
			requireSameTensor(t, wantG, gotG)
		})
	}
	// A strided upstream gradient for ScatterAdd.
	g2 := ref.FloatTensor(ref.RandFloats(r, 6), []int{3, 2}, tensor.Float64)
	gn, gv := views(t, g2)
	for k, v := range gv {
		t.Run("gradient/"+gn[k], func(t *testing.T) {
			want := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(3, 4))
			require.NoError(t, ScatterAdd(want, idx1, g2, 1))
			got := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(3, 4))
			require.NoError(t, ScatterAdd(got, idx1, v, 1))
			requireSameTensor(t, want, got)
		})
	}
	// A view as the destination of a backward kernel is refused.
	_, dests := views(t, tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(3, 4)))
	err := IndexAdd(dests[0], idx, up, 0)
	assert.ErrorIs(t, err, ErrShape)
	assert.Contains(t, err.Error(), "must be a row-major tensor that is not a view")

	// A row slice is a contiguous view: read in place, same result.
	rows, err := data.Slice(tensor.S(1, 3))
	require.NoError(t, err)
	got, err := Take(rows, tensor.New(tensor.WithShape(2), tensor.WithBacking([]int{1, 0})), 0)
	require.NoError(t, err)
	want, err := Take(data, tensor.New(tensor.WithShape(2), tensor.WithBacking([]int{2, 1})), 0)
	require.NoError(t, err)
	requireSameTensor(t, want, got)
}

// Shapes whose element count overflows int are errors, found without
// allocating anything of that size.
func TestSizeLimits(t *testing.T) {
	// Sizes in powers of two scaled to the platform's int: on 64-bit
	// platforms h = 2^31, w = 2^20, m = 2^22 and e = 2^40.
	const (
		h = 1 << (bits.UintSize/2 - 1) // h*h*4 = 2^UintSize elements
		w = 1 << (bits.UintSize/4 + 4)
		m = 1 << (bits.UintSize/4 + 6) // w*m*m = 2^UintSize elements
	)
	g := gorgonia.NewGraph()
	huge := gorgonia.NewTensor(g, tensor.Float32, 3, gorgonia.WithShape(h, h, 4), gorgonia.WithName("huge"))
	i := gorgonia.NewVector(g, tensor.Int64, gorgonia.WithShape(2), gorgonia.WithName("i"))
	_, err := Gather(huge, i, 0)
	require.ErrorIs(t, err, ErrShape)
	assert.Contains(t, err.Error(), fmt.Sprintf("gather: data shape (%d, %d, 4) has more than %d elements", h, h, math.MaxInt))

	// Each input fits, the output does not.
	wide := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(w, w), gorgonia.WithName("wide"))
	many := gorgonia.NewTensor(g, tensor.Int64, 2, gorgonia.WithShape(m, m), gorgonia.WithName("many"))
	_, err = Gather(wide, many, 1)
	require.ErrorIs(t, err, ErrShape)
	assert.Contains(t, err.Error(), fmt.Sprintf("gather: output shape (%d, %d, %d) has more than", w, m, m))

	// Index values beyond any axis size, including beyond int32 and the
	// extremes of int64, are range errors, never wrapped.
	for _, v := range []int64{1 << 31, 1<<32 + 1, math.MaxInt64, math.MinInt64, -1 << 40} {
		_, ok := kernel.Norm(v, 5)
		assert.False(t, ok, "%d", v)
		_, err := Take(tensor.New(tensor.WithShape(5), tensor.WithBacking(make([]float32, 5))),
			tensor.New(tensor.WithShape(1), tensor.WithBacking([]int64{v})), 0)
		assert.ErrorIs(t, err, ErrIndexOutOfRange)
	}
}

// guarded returns a tensor of shape over the middle of a NaN-filled
// backing array, and a function reporting whether the guards still hold NaN.
func guarded(shape []int, fill float64) (*tensor.Dense, func() bool) {
	const pad = 16
	n := tensor.Shape(shape).TotalSize()
	back := make([]float64, n+2*pad)
	for i := range back {
		back[i] = math.NaN()
	}
	for i := pad; i < pad+n; i++ {
		back[i] = fill
	}
	t := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(back[pad:pad+n]))
	return t, func() bool {
		for i := range pad {
			if !math.IsNaN(back[i]) || !math.IsNaN(back[pad+n+i]) {
				return false
			}
		}
		return true
	}
}

// Kernels writing into buffers they are given touch nothing outside them,
// and a failed call leaves the buffer as it was.
func TestGuardedWrites(t *testing.T) {
	data := tensor.New(tensor.WithShape(4, 3), tensor.WithBacking([]float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}))
	idx := tensor.New(tensor.WithShape(5), tensor.WithBacking([]int64{3, 0, -1, 1, 3}))
	bad := tensor.New(tensor.WithShape(5), tensor.WithBacking([]int64{3, 0, 4, 1, 3}))
	eidx := tensor.New(tensor.WithShape(4, 2), tensor.WithBacking([]int32{2, 0, 1, 1, 0, -1, 2, 2}))
	ebad := tensor.New(tensor.WithShape(4, 2), tensor.WithBacking([]int32{2, 0, 1, 1, 0, -4, 2, 2}))

	g := gorgonia.NewGraph()
	dn := gorgonia.NodeFromAny(g, data, gorgonia.WithName("d"))
	in := gorgonia.NodeFromAny(g, idx, gorgonia.WithName("i"))
	en := gorgonia.NodeFromAny(g, eidx, gorgonia.WithName("e"))
	gat, err := Gather(dn, in, 0)
	require.NoError(t, err)
	gel, err := GatherElements(dn, en, 1)
	require.NoError(t, err)

	for _, c := range []struct {
		name      string
		node, idx *gorgonia.Node
		good, bad *tensor.Dense
	}{{"gather", gat, in, idx, bad}, {"gather_elements", gel, en, eidx, ebad}} {
		t.Run(c.name, func(t *testing.T) {
			o := c.node.Op().(gorgonia.UsePreallocDoer)
			out, intact := guarded(c.node.Shape(), 7)
			v, err := o.UsePreallocDo(out, data, c.good)
			require.NoError(t, err)
			require.Same(t, out, v)
			assert.True(t, intact(), "forward wrote outside its buffer")
			before := out.Clone().(*tensor.Dense)
			_, err = o.UsePreallocDo(out, data, c.bad)
			require.ErrorIs(t, err, ErrIndexOutOfRange)
			requireSameTensor(t, before, out)
			assert.True(t, intact())

			grads, err := c.node.Op().(gorgonia.SDOp).SymDiff(gorgonia.Nodes{dn, c.idx}, c.node, c.node)
			require.NoError(t, err)
			diff := grads[0].Op()
			up := tensor.New(tensor.WithShape(c.node.Shape()...), tensor.WithBacking(ref.Floats(before)))
			gbuf, gintact := guarded([]int{4, 3}, 5)
			_, err = diff.(gorgonia.UsePreallocDoer).UsePreallocDo(gbuf, data, c.good, up)
			require.NoError(t, err)
			assert.True(t, gintact(), "gradient wrote outside its buffer")
			gbefore := gbuf.Clone().(*tensor.Dense)
			require.NoError(t, diff.(gorgonia.IncrDoer).IncrDo(gbuf, data, c.good, up))
			assert.True(t, gintact(), "IncrDo wrote outside its buffer")
			for i, x := range ref.Floats(gbuf) {
				assert.Equal(t, 2*ref.Floats(gbefore)[i], x, "IncrDo must add the same gradient again")
			}
			gbefore = gbuf.Clone().(*tensor.Dense)
			_, err = diff.(gorgonia.UsePreallocDoer).UsePreallocDo(gbuf, data, c.bad, up)
			require.ErrorIs(t, err, ErrIndexOutOfRange)
			require.ErrorIs(t, diff.(gorgonia.IncrDoer).IncrDo(gbuf, data, c.bad, up), ErrIndexOutOfRange)
			requireSameTensor(t, gbefore, gbuf)
			assert.True(t, gintact())
		})
	}
}

// One op value used from many goroutines on different inputs, and one op
// shared by several graphs run at once, give the serial results.
func TestConcurrentUse(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	g := gorgonia.NewGraph()
	d := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(64, 8), gorgonia.WithName("d"))
	i := gorgonia.NewVector(g, tensor.Int64, gorgonia.WithShape(4096), gorgonia.WithName("i"))
	n, err := Gather(d, i, 0)
	require.NoError(t, err)
	op := n.Op()

	type job struct{ data, idx, want *tensor.Dense }
	jobs := make([]job, 16)
	for k := range jobs {
		vals := ref.RandFloats(r, 64*8)
		idx := ref.RandIndices(r, 4096, 64)
		want, oshape := ref.Take(vals, []int{64, 8}, idx, []int{4096}, 0)
		jobs[k] = job{ref.FloatTensor(vals, []int{64, 8}, tensor.Float64), ref.CastIndices(idx, []int{4096}, tensor.Int64), ref.FloatTensor(want, oshape, tensor.Float64)}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(jobs))
	outs := make([]*tensor.Dense, len(jobs))
	for k := range jobs {
		wg.Go(func() {
			v, err := op.Do(jobs[k].data, jobs[k].idx)
			errs[k] = err
			if err == nil {
				outs[k] = v.(*tensor.Dense)
			}
		})
	}
	wg.Wait()
	for k := range jobs {
		require.NoError(t, errs[k])
		requireSameTensor(t, jobs[k].want, outs[k])
	}

	// Graphs sharing the op, with gradients, run concurrently. Gorgonia's
	// Grad adds package-level constant nodes to each graph and caches
	// their hashes on first use without a lock, a race of its own: one
	// graph built first, before the goroutines, fills that cache.
	grads := make([][]float64, len(jobs))
	graph := func(k int) {
		gk := gorgonia.NewGraph()
		dk := gorgonia.NodeFromAny(gk, jobs[k].data, gorgonia.WithName("d"))
		ik := gorgonia.NodeFromAny(gk, jobs[k].idx, gorgonia.WithName("i"))
		out, err := gorgonia.ApplyOp(op, dk, ik)
		if err != nil {
			errs[k] = err
			return
		}
		if _, err = gorgonia.Grad(gorgonia.Must(gorgonia.Sum(out)), dk); err != nil {
			errs[k] = err
			return
		}
		vm := vmtest.New(t, gk)
		defer vm.Close()
		if errs[k] = vm.RunAll(); errs[k] != nil {
			return
		}
		gv, _ := dk.Grad()
		grads[k] = ref.Floats(gv.(*tensor.Dense))
	}
	graph(0)
	for k := range jobs {
		wg.Go(func() { graph(k) })
	}
	wg.Wait()
	for k := range jobs {
		require.NoError(t, errs[k])
		ones := make([]float64, 4096*8)
		for x := range ones {
			ones[x] = 1
		}
		assert.Equal(t, ref.IndexAdd([]int{64, 8}, jobs[k].idx.Int64s(), []int{4096}, 0, ones), grads[k])
	}
}
