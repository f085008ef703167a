package nn

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gathergrad/gather/table/driver"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// rawModel is a sparse embedding whose lookup of batch ids is trained to
// shrink its rows: the loss is the sum of the squared looked-up values.
type rawModel struct {
	emb *Embedding
	ids *tensor.Dense
	vm  gorgonia.VM
}

func newRawModel(t testing.TB, g *gorgonia.ExprGraph, emb *Embedding, batch int) rawModel {
	ids := tensor.New(tensor.WithShape(batch), tensor.Of(tensor.Int))
	n := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(batch), gorgonia.WithName("ids"), gorgonia.WithValue(ids))
	h, err := emb.Lookup(n)
	require.NoError(t, err)
	_, err = gorgonia.Grad(gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.Square(h)))), emb.GradNodes()...)
	require.NoError(t, err)
	vm := gorgonia.NewTapeMachine(g)
	t.Cleanup(func() { vm.Close() })
	return rawModel{emb, ids, vm}
}

func (m rawModel) step(t *testing.T, opt optim.Sparse) {
	require.NoError(t, m.vm.RunAll())
	require.NoError(t, m.emb.Step(context.Background(), opt))
	m.vm.Reset()
}

// rawStream returns steps batches of raw ids (any int64), the first of
// distinct ids more often.
func rawStream(seed uint64, distinct, steps, batch int) [][]int64 {
	r := rand.New(rand.NewPCG(seed, 12))
	raw := make([]int64, distinct)
	for k := range raw {
		raw[k] = int64(r.Uint64())
	}
	stream := make([][]int64, steps)
	for s := range stream {
		for range batch {
			stream[s] = append(stream[s], raw[min(r.IntN(len(raw)), r.IntN(len(raw)))])
		}
	}
	return stream
}

// Training on raw 64-bit ids through RawIDs (every id admitted at once,
// rows for all of them) is bit for bit training a fixed table on the same
// ids numbered in order of first appearance, each row starting from
// table.InitialRow of its id: the map gives rows in that order, and the
// default row (the padding row) is never read. In the heap and behind a
// cache too small for the table.
func TestRawIDsEqualNumbered(t *testing.T) {
	const rows, dim, batch, steps, seed = 40, 4, 16, 25, 5
	stream := rawStream(11, 30, steps, batch)
	opts := []NewEmbeddingOption{WithSparse(), WithPadding(rows)}

	// The same ids numbered in order of first appearance.
	wb, number, _, _ := trainNumbered(t, stream, rows, dim, seed)

	// The raw ids, mapped, in the heap and behind a cache.
	for _, where := range []string{"heap", "cached"} {
		g := gorgonia.NewGraph()
		optA := optim.NewSparseAdam(0.05)
		var err error
		var emb *Embedding
		var c *table.Cached
		if where == "heap" {
			emb, err = NewEmbedding(g, "a", rows+1, dim, tensor.Float32, opts...)
			require.NoError(t, err)
			w, _ := emb.Home().(Weights).Weight()
			w.Zero()
		} else {
			store, err := table.NewMemoryStore("a", tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(rows+1, dim)), optA.Columns(dim)...)
			require.NoError(t, err)
			c, err = table.NewCached(context.Background(), store, table.CacheOptions{Budget: 20 * (3*dim*4 + 72)})
			require.NoError(t, err)
			emb, err = CachedEmbedding(context.Background(), g, c, WithPadding(rows))
			require.NoError(t, err)
		}
		a := newRawModel(t, g, emb, batch)
		m, err := table.NewIDMap("a", driver.IDMapOptions{Rows: rows})
		require.NoError(t, err)
		raw, err := NewRawIDs(emb, m, driver.RowInit{Seed: seed, Std: 1})
		require.NoError(t, err)
		for s, ids := range stream {
			require.NoError(t, raw.Map(context.Background(), ids, a.ids, int64(s)))
			a.step(t, optA)
		}
		got := make([]float32, (rows+1)*dim)
		if c == nil {
			w, _ := emb.Home().(Weights).Weight()
			copy(got, w.Float32s())
		} else {
			for r := range rows + 1 {
				v, err := c.Read(context.Background(), []int64{int64(r)})
				require.NoError(t, err)
				copy(got[r*dim:], v.Float32s()[:dim])
			}
		}
		for i, v := range wb.Float32s() {
			require.Equal(t, math.Float32bits(v), math.Float32bits(got[i]), "%s: value %d", where, i)
		}
		require.Equal(t, len(number), statsOf(m).Used, where)
	}
}

// trainNumbered trains a table of rows+1 rows of dim values (padding row
// rows) with SparseAdam (lr 0.05) on the ids of stream numbered in order
// of first appearance, each row starting from table.InitialRow of its
// id with seed: it returns the trained values, the numbers, the table
// and its optimiser.
func trainNumbered(t *testing.T, stream [][]int64, rows, dim int, seed uint64) (*tensor.Dense, map[int64]int64, *Embedding, *optim.SparseAdam) {
	g := gorgonia.NewGraph()
	e, err := NewEmbedding(g, "b", rows+1, dim, tensor.Float32, WithSparse(), WithPadding(rows))
	require.NoError(t, err)
	w, _ := e.Home().(Weights).Weight()
	w.Zero()
	number := map[int64]int64{}
	for _, ids := range stream {
		for _, id := range ids {
			if _, ok := number[id]; !ok {
				number[id] = int64(len(number))
				table.InitialRow(w.Float32s()[number[id]*int64(dim):(number[id]+1)*int64(dim)], seed, id)
			}
		}
	}
	m := newRawModel(t, g, e, len(stream[0]))
	opt := optim.NewSparseAdam(0.05)
	for _, ids := range stream {
		for k, id := range ids {
			m.ids.Ints()[k] = int(number[id])
		}
		m.step(t, opt)
	}
	return w, number, e, opt
}

// A row that a full map takes from one id for another starts afresh:
// its values are InitialRow of the new id and its optimiser state is at
// its Init, not what the old id trained into them.
func TestRawIDsResetEvicted(t *testing.T) {
	const rows, dim, seed = 3, 4, 9
	g := gorgonia.NewGraph()
	emb, err := NewEmbedding(g, "e", rows+1, dim, tensor.Float64, WithSparse(), WithPadding(rows))
	require.NoError(t, err)
	model := newRawModel(t, g, emb, 2)
	m, err := table.NewIDMap("e", driver.IDMapOptions{Rows: rows})
	require.NoError(t, err)
	raw, err := NewRawIDs(emb, m, driver.RowInit{Seed: seed, Std: 1})
	require.NoError(t, err)
	adam := optim.NewSparseAdam(0.1)
	for s, ids := range [][]int64{{-5, 6}, {7, -5}, {6, 7}, {6, 7}, {-5, 6}} {
		require.NoError(t, raw.Map(context.Background(), ids, model.ids, int64(s)))
		model.step(t, adam)
	}
	// -5 held the row that 42 now takes (the least recently used).
	old, ok := m.Row(7)
	require.True(t, ok)
	require.NoError(t, raw.Map(context.Background(), []int64{42, 6}, model.ids, 5))
	require.Equal(t, []driver.Assignment{{Row: old, ID: 42}}, raw.Fresh())
	w, _ := emb.Home().(Weights).Weight()
	want := make([]float64, dim)
	table.InitialRow(want, seed, 42)
	require.Equal(t, want, w.Float64s()[old*dim:(old+1)*dim])
	st, err := emb.Home().(Weights).Rows(adam)
	require.NoError(t, err)
	for k, col := range st.State {
		require.Equal(t, make([]float64, dim), col.Float64s()[old*dim:(old+1)*dim], "state column %d", k)
	}
	require.NotEqual(t, make([]float64, dim), st.State[0].Float64s()[0:dim], "the state of a row kept was reset too")
}

// Map refuses raw ids it cannot map without changing the map, the table
// or the ids tensor; NewRawIDs refuses a table without the default row.
func TestRawIDsErrors(t *testing.T) {
	g := gorgonia.NewGraph()
	emb, err := NewEmbedding(g, "e", 3, 2, tensor.Float32, WithSparse(), WithPadding(2))
	require.NoError(t, err)
	m, _ := table.NewIDMap("e", driver.IDMapOptions{Rows: 2, Evict: driver.Refuse})
	_, err = NewRawIDs(emb, m, driver.RowInit{Seed: 1, Std: 1})
	require.NoError(t, err)
	small, _ := table.NewIDMap("s", driver.IDMapOptions{Rows: 1})
	_, err = NewRawIDs(emb, small, driver.RowInit{})
	require.ErrorIs(t, err, gather.ErrOption)
	require.ErrorContains(t, err, "padding row 1")

	raw, _ := NewRawIDs(emb, m, driver.RowInit{Seed: 1, Std: 1})
	ids := tensor.New(tensor.WithShape(2), tensor.WithBacking([]int{7, 7}))
	require.NoError(t, raw.Map(context.Background(), []int64{10, 11}, ids, 0))
	w, _ := emb.Home().(Weights).Weight()
	before := append([]float32(nil), w.Float32s()...)
	err = raw.Map(context.Background(), tensor.New(tensor.WithShape(2), tensor.WithBacking([]int64{12, 10})), ids, 1)
	require.True(t, errors.Is(err, table.ErrCapacity), "%v", err)
	require.ErrorContains(t, err, "id 12")
	require.Equal(t, []int{0, 1}, ids.Ints())
	require.Equal(t, before, w.Float32s())
	require.Equal(t, 2, statsOf(m).Used)
	require.ErrorIs(t, raw.Map(context.Background(), []int64{10}, ids, 2), gather.ErrShape)
	require.ErrorIs(t, raw.Map(context.Background(), []int32{10, 11}, ids, 2), gather.ErrDtype)
}

// When a cached table cannot start the new rows (here: its cache is
// closed), the map forgets the ids it had just given rows, and the ids
// tensor is unchanged.
func TestRawIDsResetFails(t *testing.T) {
	store, err := table.NewMemoryStore("c", tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(4, 2)))
	require.NoError(t, err)
	c, err := table.NewCached(context.Background(), store, table.CacheOptions{Budget: 1 << 12})
	require.NoError(t, err)
	emb, err := CachedEmbedding(context.Background(), gorgonia.NewGraph(), c, WithPadding(3))
	require.NoError(t, err)
	m, _ := table.NewIDMap("c", driver.IDMapOptions{Rows: 3})
	raw, err := NewRawIDs(emb, m, driver.RowInit{Seed: 1, Std: 1})
	require.NoError(t, err)
	require.NoError(t, c.Close(context.Background()))
	ids := tensor.New(tensor.WithShape(2), tensor.WithBacking([]int{9, 9}))
	err = raw.Map(context.Background(), []int64{40, 41}, ids, 0)
	require.ErrorIs(t, err, table.ErrClosed)
	require.Equal(t, []int{9, 9}, ids.Ints())
	_, held := m.Row(40)
	require.False(t, held)
	require.Zero(t, statsOf(m).Used)
	require.Zero(t, statsOf(m).Admitted)
}

// A row a full map takes from one id for another starts afresh in a
// dense table too: the dense optimiser's state of the row (Adam's
// moments, Adagrad's sum, SGD's momentum buffer) is zeros again, the
// state of the rows kept is not. A dense table without its optimiser is
// refused.
func TestRawIDsResetDense(t *testing.T) {
	const rows, dim, seed = 3, 4, 9
	for _, opt := range []optim.Dense{optim.NewAdam(0.1), optim.NewAdagrad(0.1), &optim.SGD{LearnRate: 0.1, Momentum: 0.9}} {
		g := gorgonia.NewGraph()
		emb, err := NewEmbedding(g, "d", rows+1, dim, tensor.Float64, WithPadding(rows))
		require.NoError(t, err)
		ids := tensor.New(tensor.WithShape(2), tensor.Of(tensor.Int))
		h, err := emb.Lookup(gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(2), gorgonia.WithName("ids"), gorgonia.WithValue(ids)))
		require.NoError(t, err)
		_, err = gorgonia.Grad(gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.Square(h)))), emb.Learnables()...)
		require.NoError(t, err)
		vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(emb.Learnables()...))
		defer vm.Close()
		m, err := table.NewIDMap("d", driver.IDMapOptions{Rows: rows})
		require.NoError(t, err)
		_, err = NewRawIDs(emb, m, driver.RowInit{Seed: seed, Std: 1})
		require.ErrorIs(t, err, gather.ErrOption)
		require.ErrorContains(t, err, `embedding "d" is dense`)
		raw, err := NewRawIDs(emb, m, driver.RowInit{Seed: seed, Std: 1}, WithDenseOptimizer(opt))
		require.NoError(t, err)
		step := func(batch []int64, s int64) {
			require.NoError(t, raw.Map(context.Background(), batch, ids, s))
			require.NoError(t, vm.RunAll())
			require.NoError(t, opt.Step(gorgonia.NodesToValueGrads(emb.Learnables())))
			vm.Reset()
		}
		for s, ids := range [][]int64{{-5, 6}, {7, -5}, {6, 7}, {6, 7}, {-5, 6}} {
			step(ids, int64(s))
		}
		old, ok := m.Row(7) // the least recently used: 42 takes it
		require.True(t, ok)
		kept, _ := m.Row(6)
		require.NoError(t, raw.Map(context.Background(), []int64{42, 6}, ids, 5))
		require.Equal(t, []driver.Assignment{{Row: old, ID: 42}}, raw.Fresh())
		state, err := optim.DenseState("o", opt, emb.Learnables()...).State()
		require.NoError(t, err)
		for name, v := range state {
			if name == "o.step" {
				continue
			}
			st := v.(*tensor.Dense).Float64s()
			require.Equal(t, make([]float64, dim), st[old*dim:(old+1)*dim], "%T %s of the row given to 42", opt, name)
			require.NotEqual(t, make([]float64, dim), st[kept*dim:(kept+1)*dim], "%T %s of the row kept was reset too", opt, name)
		}
		w, _ := emb.Home().(Weights).Weight()
		want := make([]float64, dim)
		table.InitialRow(want, seed, 42)
		require.Equal(t, want, w.Float64s()[old*dim:(old+1)*dim])
	}
}

// statsOf returns m's Stats.
func statsOf(m driver.Mapper) driver.IDMapStats {
	s, err := m.Stats(context.Background())
	if err != nil {
		panic(err)
	}
	return s
}

// storeMap is a driver.StoreMapper over a MemoryStore: a table.IDMap
// whose new rows it starts in the store (InitialRow of their ids, std 1),
// returning every row it gave as read, as cluster.IDMap does.
type storeMap struct {
	*table.IDMap
	store *table.MemoryStore
	dim   int
}

func (m storeMap) Store() driver.Store     { return m.store }
func (m storeMap) RowInit() driver.RowInit { return driver.RowInit{Seed: 9, Std: 1} }
func (m storeMap) MapRead(ctx context.Context, raw, rows []int64, step int64, assigned []driver.Assignment, read []int64) ([]driver.Assignment, []int64, error) {
	n := len(assigned)
	assigned, err := m.Map(ctx, raw, rows, step, assigned)
	if err != nil {
		return assigned, read, err
	}
	for _, a := range assigned[n:] {
		v := make([]float32, m.dim)
		table.InitialRow(v, 9, a.ID)
		if err := m.store.WriteRows(ctx, []int64{a.Row}, fileio.LittleEndianBytes(v)); err != nil {
			return assigned, read, err
		}
	}
	return assigned, append(read, rows...), nil
}

// Raw ids through a map beside the store of a Shared cache: when the map
// gives a row to a new id (the one row taken back from the last), the
// cache forgets its copy of the row, and the id reads its own start, not
// the id's before it, though the cache would serve that copy for 100
// batches more.
func TestRawIDsForgetMapped(t *testing.T) {
	ctx := context.Background()
	const dim = 2
	w := tensor.New(tensor.WithShape(2, dim), tensor.Of(tensor.Float32))
	store, err := table.NewMemoryStore("t", w)
	require.NoError(t, err)
	im, err := table.NewIDMap("t", driver.IDMapOptions{Rows: 1})
	require.NoError(t, err)
	m := storeMap{IDMap: im, store: store, dim: dim}
	c, err := table.NewCached(ctx, store, table.CacheOptions{Budget: 1 << 10, Shared: &table.SharedOptions{MaxAge: 100}})
	require.NoError(t, err)
	emb, err := CachedEmbedding(ctx, gorgonia.NewGraph(), c, WithPadding(1))
	require.NoError(t, err)
	raw, err := NewRawIDs(emb, m, m.RowInit())
	require.NoError(t, err)
	ids := tensor.New(tensor.Of(tensor.Int), tensor.WithShape(1))
	for step, id := range []int64{101, 202} {
		require.NoError(t, raw.Map(ctx, []int64{id}, ids, int64(step)))
		slots := make([]int32, 1)
		c.NewBatch()
		require.NoError(t, c.Fetch(ctx, []int64{int64(ids.Ints()[0])}, slots))
		want := make([]float32, dim)
		table.InitialRow(want, 9, id)
		require.Equal(t, want, c.Weight().Float32s()[dim*int(slots[0]):dim*int(slots[0])+dim], "id %d", id)
	}
}
