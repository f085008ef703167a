package nn

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gathergrad/gather/internal/vmtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// cachedModel is a model of one table: a lookup of [batch] ids and a mean
// bag of [2*batch] ids in bags of two, added, times a fixed [dim, 5]
// matrix, cross entropy against labels. Its table is emb.
type cachedModel struct {
	g           *gorgonia.ExprGraph
	emb         *Embedding
	ids, bagIDs *tensor.Dense
	y           *tensor.Dense
	vm          gorgonia.VM
	loss        *gorgonia.Node
}

const cmBatch, cmDim, cmVocab = 12, 6, 300

func newCachedModel(t *testing.T, emb *Embedding, g *gorgonia.ExprGraph, dt tensor.Dtype) *cachedModel {
	m := &cachedModel{g: g, emb: emb,
		ids: tensor.New(tensor.Of(tensor.Int), tensor.WithShape(cmBatch)), bagIDs: tensor.New(tensor.Of(tensor.Int), tensor.WithShape(2*cmBatch)),
		y: tensor.New(tensor.Of(tensor.Int), tensor.WithShape(cmBatch))}
	offs := make([]int, cmBatch)
	for i := range offs {
		offs[i] = 2 * i
	}
	idn := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"), gorgonia.WithValue(m.ids))
	bagn := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("bag"), gorgonia.WithValue(m.bagIDs))
	offn := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("offs"), gorgonia.WithValue(tensor.New(tensor.WithShape(cmBatch), tensor.WithBacking(offs))))
	yn := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("y"), gorgonia.WithValue(m.y))
	r := rand.New(rand.NewPCG(1, 2))
	wv := make([]float64, cmDim*5)
	for i := range wv {
		wv[i] = r.NormFloat64()
	}
	var w tensor.Tensor = tensor.New(tensor.WithShape(cmDim, 5), tensor.WithBacking(wv))
	if dt == tensor.Float32 {
		w32 := make([]float32, len(wv))
		for i, v := range wv {
			w32[i] = float32(v)
		}
		w = tensor.New(tensor.WithShape(cmDim, 5), tensor.WithBacking(w32))
	}
	wn := gorgonia.NewMatrix(g, dt, gorgonia.WithName("w"), gorgonia.WithValue(w))
	h, err := emb.Lookup(idn)
	require.NoError(t, err)
	b, err := emb.Bag(bagn, offn, nil, BagMean)
	require.NoError(t, err)
	loss, err := CrossEntropy(gorgonia.Must(gorgonia.Mul(gorgonia.Must(gorgonia.Add(h, b)), wn)), yn)
	require.NoError(t, err)
	m.loss = loss
	_, err = gorgonia.Grad(loss, emb.GradNodes()...)
	require.NoError(t, err)
	m.vm = vmtest.New(t, g)
	t.Cleanup(func() { m.vm.Close() })
	return m
}

// batch fills the model's inputs with batch n of a stream whose ids are
// skewed (a hot tenth of the vocabulary takes half the ids), so that rows
// leave the cache and come back.
func cmBatchIDs(n int) (ids, bag, y []int) {
	r := rand.New(rand.NewPCG(uint64(n), 77))
	draw := func() int {
		if r.IntN(2) == 0 {
			return r.IntN(cmVocab / 10)
		}
		return r.IntN(cmVocab)
	}
	ids, bag, y = make([]int, cmBatch), make([]int, 2*cmBatch), make([]int, cmBatch)
	for i := range ids {
		ids[i], y[i] = draw(), r.IntN(5)
	}
	for i := range bag {
		bag[i] = draw()
	}
	return ids, bag, y
}

func int64s(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

func (m *cachedModel) step(t *testing.T, n int, opt optim.Sparse, prefetch bool) {
	ids, bag, y := cmBatchIDs(n)
	copy(m.ids.Ints(), ids)
	copy(m.bagIDs.Ints(), bag)
	copy(m.y.Ints(), y)
	if prefetch {
		nids, nbag, _ := cmBatchIDs(n + 1)
		m.emb.Home().(Cache).Prefetch(int64s(nids), int64s(nbag))
	}
	require.NoError(t, m.vm.RunAll())
	require.NoError(t, m.emb.Step(context.Background(), opt))
	m.vm.Reset()
}

// A table behind a cache far smaller than the rows it trains (every
// step evicts), stepped by each row-wise optimiser, with and without
// prefetch, equals the same table in memory to the bit: values and
// optimiser state.
func TestCachedEqualsMemory(t *testing.T) {
	opts := map[string]func() optim.Sparse{
		"sgd":     func() optim.Sparse { return &optim.SparseSGD{LearnRate: 0.3, WeightDecay: 0.01} },
		"adam":    func() optim.Sparse { return optim.NewSparseAdam(0.05) },
		"adagrad": func() optim.Sparse { return optim.NewRowWiseAdagrad(0.2) },
		"sparse adagrad": func() optim.Sparse {
			return &optim.SparseAdagrad{LearnRate: 0.2, LRDecay: 0.01, InitialAccumulatorValue: 0.1, Eps: 1e-10}
		},
	}
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		for name, newOpt := range opts {
			for _, prefetch := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/%s/prefetch=%v", dt, name, prefetch), func(t *testing.T) {
					cachedEqualsMemory(t, dt, newOpt, prefetch)
				})
			}
		}
	}
}

func cachedEqualsMemory(t *testing.T, dt tensor.Dtype, newOpt func() optim.Sparse, prefetch bool) {
	const steps, slots = 40, 3 * cmBatch // 36 ids a step: every step evicts
	g1 := gorgonia.NewGraph()
	mem, err := NewEmbedding(g1, "t", cmVocab, cmDim, dt, WithSparse(), WithSeed(4))
	require.NoError(t, err)
	w0, err := mem.Home().(Weights).Weight()
	require.NoError(t, err)
	opt1, opt2 := newOpt(), newOpt()
	cols := opt2.Columns(cmDim)
	store, err := table.NewMemoryStore("t", w0.Clone().(*tensor.Dense), cols...)
	require.NoError(t, err)
	width := cmDim
	for _, c := range cols {
		width += c.Width
	}
	c, err := table.NewCached(context.Background(), store, table.CacheOptions{Budget: int64(slots * (width*int(dt.Size()) + 72))})
	require.NoError(t, err)
	require.Equal(t, slots, c.Weight().Shape()[0])
	g2 := gorgonia.NewGraph()
	cached, err := CachedEmbedding(context.Background(), g2, c)
	require.NoError(t, err)
	defer cached.Close(context.Background())

	m1 := newCachedModel(t, mem, g1, dt)
	m2 := newCachedModel(t, cached, g2, dt)
	for n := range steps {
		m1.step(t, n, opt1, false)
		m2.step(t, n, opt2, prefetch)
	}
	st := c.Stats()
	assert.Greater(t, st.Misses, uint64(steps*cmBatch/2), "rows came and went")
	if prefetch {
		assert.Greater(t, st.Prefetched, uint64(0))
	}
	require.NoError(t, cached.Home().(Syncer).Sync(context.Background()))

	// The store now holds every row as the table in memory has it, and its
	// optimiser state as the in-memory optimiser keeps it.
	ids := make([]int64, cmVocab)
	for i := range ids {
		ids[i] = int64(i)
	}
	got, err := c.Read(context.Background(), ids)
	require.NoError(t, err)
	want, err := mem.Home().(Weights).Weight()
	require.NoError(t, err)
	state, err := optim.State(mem.Home().(Weights), opt1).State()
	require.NoError(t, err)
	for r := range cmVocab {
		for j := range cmDim {
			require.Equal(t, want.Get(r*cmDim+j), got.Get(r*width+j), "row %d value %d", r, j)
		}
		at := cmDim
		for _, col := range cols {
			key := "t." + col.Name
			var s tensor.Tensor = state[key]
			require.NotNil(t, s, key)
			for j := range col.Width {
				require.Equal(t, s.(*tensor.Dense).Get(r*col.Width+j), got.Get(r*width+at+j), "row %d %s[%d]", r, col.Name, j)
			}
			at += col.Width
		}
	}
	if _, ok := opt2.(*optim.SparseAdam); ok {
		assert.Equal(t, int64(steps), c.Stats().Steps)
	}
}

// The padding row of a cached table stays in the cache, gets no
// gradient, and is skipped by bags, as in memory.
func TestCachedPadding(t *testing.T) {
	g1 := gorgonia.NewGraph()
	mem, err := NewEmbedding(g1, "t", cmVocab, cmDim, tensor.Float64, WithSparse(), WithSeed(4), WithPadding(7))
	require.NoError(t, err)
	w0, _ := mem.Home().(Weights).Weight()
	opt1, opt2 := optim.NewRowWiseAdagrad(0.2), optim.NewRowWiseAdagrad(0.2)
	store, err := table.NewMemoryStore("t", w0.Clone().(*tensor.Dense), opt2.Columns(cmDim)...)
	require.NoError(t, err)
	c, err := table.NewCached(context.Background(), store, table.CacheOptions{Budget: 40 * ((cmDim+1)*8 + 72)})
	require.NoError(t, err)
	g2 := gorgonia.NewGraph()
	cached, err := CachedEmbedding(context.Background(), g2, c, WithPadding(7))
	require.NoError(t, err)
	m1, m2 := newCachedModel(t, mem, g1, tensor.Float64), newCachedModel(t, cached, g2, tensor.Float64)
	for n := range 20 {
		ids, bag, y := cmBatchIDs(n)
		bag[0], ids[1] = 7, 7
		copy(m2.ids.Ints(), ids)
		copy(m2.bagIDs.Ints(), bag)
		copy(m2.y.Ints(), y)
		copy(m1.ids.Ints(), ids)
		copy(m1.bagIDs.Ints(), bag)
		copy(m1.y.Ints(), y)
		require.NoError(t, m1.vm.RunAll())
		require.NoError(t, mem.Step(context.Background(), opt1))
		m1.vm.Reset()
		require.NoError(t, m2.vm.RunAll())
		require.NoError(t, cached.Step(context.Background(), opt2))
		m2.vm.Reset()
	}
	require.NoError(t, cached.Home().(Syncer).Sync(context.Background()))
	want, _ := mem.Home().(Weights).Weight()
	for r := range cmVocab {
		got, err := c.Read(context.Background(), []int64{int64(r)})
		require.NoError(t, err)
		for j := range cmDim {
			require.Equal(t, want.Get(r*cmDim+j), got.Get(j), "row %d", r)
		}
	}
}

// A table file made with WithState trains behind a cache, survives Close
// and OpenCached with its values, state and step count, and refuses an
// optimiser of other columns.
func TestCachedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.safetensors")
	opt := optim.NewSparseAdam(0.05)
	cols := opt.Columns(cmDim)
	require.NoError(t, table.Create(path, "t", cmVocab, cmDim, tensor.Float32, table.WithSeed(4), table.WithState(cols...)))

	_, err := table.Open(path, "t")
	require.ErrorIs(t, err, checkpoint.ErrMismatch, "a table with state is not mapped")
	c0, err := table.OpenCached(context.Background(), path, table.CacheOptions{Budget: 1 << 20}, table.FileOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"exp_avg", "exp_avg_sq"}, []string{c0.Schema().Columns[0].Name, c0.Schema().Columns[1].Name})
	g0 := &optim.RowGrad{Rows: []int64{}, Values: tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(0, cmDim))}
	err = c0.Step(context.Background(), optim.NewRowWiseAdagrad(0.1), g0)
	require.ErrorIs(t, err, gather.ErrOption, "another optimiser's state")
	assert.Contains(t, err.Error(), "exp_avg")
	require.NoError(t, c0.Close(context.Background()))

	g1 := gorgonia.NewGraph()
	mem, err := NewEmbedding(g1, "t", cmVocab, cmDim, tensor.Float32, WithSparse(), WithSeed(4))
	require.NoError(t, err)
	m1 := newCachedModel(t, mem, g1, tensor.Float32)
	memOpt := optim.NewSparseAdam(0.05)

	for round := range 2 { // 10 steps, close, reopen, 10 more
		c, err := table.OpenCached(context.Background(), path, table.CacheOptions{Budget: int64(40 * ((3*cmDim)*4 + 72))}, table.FileOptions{})
		require.NoError(t, err)
		_, err = table.OpenCached(context.Background(), path, table.CacheOptions{Budget: 1 << 20}, table.FileOptions{})
		require.ErrorIs(t, err, table.ErrInUse)
		g := gorgonia.NewGraph()
		emb, err := CachedEmbedding(context.Background(), g, c)
		require.NoError(t, err)
		m := newCachedModel(t, emb, g, tensor.Float32)
		for n := round * 10; n < round*10+10; n++ {
			m.step(t, n, opt, true)
			m1.step(t, n, memOpt, false)
		}
		err = emb.Step(context.Background(), &optim.SparseSGD{LearnRate: 1})
		require.ErrorIs(t, err, gather.ErrGraph, "no run since the last step")
		require.NoError(t, emb.Close(context.Background()))
		require.NoError(t, emb.Close(context.Background()))
	}
	c, err := table.OpenCached(context.Background(), path, table.CacheOptions{Budget: 1 << 20}, table.FileOptions{})
	require.NoError(t, err)
	defer c.Close(context.Background())
	assert.Equal(t, int64(20), c.Stats().Steps)
	want, _ := mem.Home().(Weights).Weight()
	ids := make([]int64, cmVocab)
	for i := range ids {
		ids[i] = int64(i)
	}
	got, err := c.Read(context.Background(), ids)
	require.NoError(t, err)
	for r := range cmVocab {
		for j := range cmDim {
			require.Equal(t, want.Get(r*cmDim+j), got.Get(r*3*cmDim+j), "row %d", r)
		}
	}
}

// Misuse is an error naming what is wrong: ids outside the vocabulary, a
// run that names more ids than the cache holds, an optimiser of other
// columns, a budget below one row.
func TestCachedErrors(t *testing.T) {
	w := tensor.New(tensor.WithShape(cmVocab, cmDim), tensor.WithBacking(make([]float64, cmVocab*cmDim)))
	cols := optim.NewRowWiseAdagrad(0.1).Columns(cmDim)
	store, err := table.NewMemoryStore("t", w, cols...)
	require.NoError(t, err)
	_, err = table.NewCached(context.Background(), store, table.CacheOptions{Budget: 10})
	require.ErrorIs(t, err, table.ErrCapacity)
	assert.Contains(t, err.Error(), "10 bytes")

	c, err := table.NewCached(context.Background(), store, table.CacheOptions{Budget: 20 * ((cmDim+1)*8 + 72)})
	require.NoError(t, err)
	g := gorgonia.NewGraph()
	emb, err := CachedEmbedding(context.Background(), g, c)
	require.NoError(t, err)
	ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(30), gorgonia.WithName("ids"), gorgonia.WithValue(tensor.New(tensor.Of(tensor.Int), tensor.WithShape(30))))
	_, err = emb.Lookup(ids)
	require.ErrorIs(t, err, table.ErrCapacity)
	assert.Contains(t, err.Error(), "30 ids")
	assert.Contains(t, err.Error(), "20 rows")

	idv := tensor.New(tensor.WithShape(4), tensor.WithBacking([]int{1, 2, cmVocab, 3}))
	ids = gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(4), gorgonia.WithName("ids4"), gorgonia.WithValue(idv))
	h, err := emb.Lookup(ids)
	require.NoError(t, err)
	_, err = gorgonia.Grad(gorgonia.Must(gorgonia.Sum(h)), emb.GradNodes()...)
	require.NoError(t, err)
	vm := vmtest.New(t, g)
	defer vm.Close()
	err = gather.Cause(vm.RunAll())
	var ie *gather.IndexError
	require.True(t, errors.As(err, &ie), "%v", err)
	assert.Equal(t, int64(cmVocab), ie.Value)
	vm.Reset()
	idv.Ints()[2] = 5
	require.NoError(t, vm.RunAll())
	err = emb.Step(context.Background(), optim.NewSparseAdam(0.1))
	require.ErrorIs(t, err, gather.ErrOption)
	assert.Contains(t, err.Error(), "exp_avg")
	assert.Equal(t, 1, strings.Count(err.Error(), `embedding "t"`), "the error names the embedding once: %v", err)
	require.NoError(t, emb.Step(context.Background(), optim.NewRowWiseAdagrad(0.1)))
	_, inMemory := emb.Home().(Weights)
	require.False(t, inMemory, "a cached table's home holds its weights")
	_, err = emb.State()
	require.ErrorIs(t, err, gather.ErrOption)
	require.NoError(t, emb.Close(context.Background()))
	vm.Reset()
	require.ErrorIs(t, gather.Cause(vm.RunAll()), table.ErrClosed)
}
