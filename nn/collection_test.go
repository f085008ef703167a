package nn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gathergrad/gather/table/driver"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/vmtest"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// collSpec is a collection's test model: each feature's table (equal
// numbers share one) and mode, each table's vocabulary and padding id
// (-1 none), and where the tables live.
type collSpec struct {
	tableOf  []int
	modes    []BagMode
	vocab    []int
	pad      []int
	dim      int
	weighted bool
	cached   bool
	fused    bool
	dtype    tensor.Dtype
	rule     optim.Sparse    // whose columns a cache's store keeps
	maps     []driver.Mapper // the collection's id maps, a table each (raw ids)
	init     driver.RowInit
}

const collBatch = 7

// collPer is how many ids a feature has in a batch of collBatchOf.
const collPer = 2 * collBatch

// collBatchOf draws a batch of spec: collPer ids a feature, spread at
// random over its samples (empty bags among them), padding ids among
// them, weights in [0.5, 1.5).
func collBatchOf(spec collSpec, r *rand.Rand) (lengths, values []int64, weights []float64) {
	for f := range spec.modes {
		vocab := spec.vocab[spec.tableOf[f]]
		var ls [collBatch]int64
		for range collPer {
			ls[r.IntN(collBatch)]++
		}
		for _, n := range ls {
			lengths = append(lengths, n)
			for range n {
				v := int64(r.IntN(vocab))
				if p := spec.pad[spec.tableOf[f]]; p >= 0 && r.IntN(5) == 0 {
					v = int64(p)
				}
				values = append(values, v)
				weights = append(weights, 0.5+r.Float64())
			}
		}
	}
	return lengths, values, weights
}

// collModel is spec's tables and loss, built once as a collection and once
// as separate embeddings with a Bag each, concatenated.
type collModel struct {
	g       *gorgonia.ExprGraph
	tables  []*Embedding
	coll    *Collection
	out     *gorgonia.Node
	vm      *vmtest.Twin
	values  *tensor.Dense // the collection's
	offsets *tensor.Dense
	weights *tensor.Dense
	ids     []*tensor.Dense // the separate embeddings', a feature each
	offs    []*tensor.Dense
	ws      []*tensor.Dense
	n       int // values' capacity
}

func newCollModel(t *testing.T, spec collSpec, asCollection bool, capacity int) *collModel {
	m := &collModel{g: gorgonia.NewGraph(), n: capacity}
	dt := spec.dtype
	for k, v := range spec.vocab {
		name := fmt.Sprintf("t%d", k)
		opts := []NewEmbeddingOption{WithSparse(), WithSeed(uint64(10 + k))}
		if spec.pad[k] >= 0 {
			opts = append(opts, WithPadding(spec.pad[k]))
		}
		var e *Embedding
		var err error
		if spec.cached {
			init, err := NewEmbedding(gorgonia.NewGraph(), name, v, spec.dim, dt, WithSeed(uint64(10+k)))
			require.NoError(t, err)
			w, _ := init.Home().(Weights).Weight()
			store, err := table.NewMemoryStore(name, w, spec.rule.Columns(spec.dim)...)
			require.NoError(t, err)
			c, err := table.NewCached(context.Background(), store, table.CacheOptions{Budget: 1 << 20})
			require.NoError(t, err)
			var copts []OpenOption
			if spec.pad[k] >= 0 {
				copts = append(copts, WithPadding(spec.pad[k]))
			}
			e, err = CachedEmbedding(context.Background(), m.g, c, copts...)
			require.NoError(t, err)
			t.Cleanup(func() { e.Close(context.Background()) })
		} else {
			e, err = NewEmbedding(m.g, name, v, spec.dim, dt, opts...)
			require.NoError(t, err)
		}
		m.tables = append(m.tables, e)
	}
	nf := len(spec.modes)
	var pooled *gorgonia.Node
	var err error
	if asCollection {
		var feats []Feature
		for f, mode := range spec.modes {
			ft := Feature{Key: fmt.Sprintf("f%d", f), Table: m.tables[spec.tableOf[f]], Mode: mode}
			if spec.maps != nil {
				ft.IDs = spec.maps[spec.tableOf[f]]
			}
			feats = append(feats, ft)
		}
		m.coll, err = NewCollection(feats, CollectionOptions{Weighted: spec.weighted, Fused: spec.fused, Init: spec.init})
		require.NoError(t, err)
		m.values = tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(capacity))
		m.offsets = tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(nf*collBatch+1))
		v := gorgonia.NodeFromAny(m.g, m.values, gorgonia.WithName("values"))
		o := gorgonia.NodeFromAny(m.g, m.offsets, gorgonia.WithName("offsets"))
		var w *gorgonia.Node
		if spec.weighted {
			m.weights = tensor.New(tensor.Of(dt), tensor.WithShape(capacity))
			w = gorgonia.NodeFromAny(m.g, m.weights, gorgonia.WithName("weights"))
		}
		pooled, err = m.coll.Bag(v, o, w)
		require.NoError(t, err)
	} else {
		var parts []*gorgonia.Node
		for f, mode := range spec.modes {
			ids := tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(capacity))
			offs := tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(collBatch+1))
			m.ids, m.offs = append(m.ids, ids), append(m.offs, offs)
			in := gorgonia.NodeFromAny(m.g, ids, gorgonia.WithName(fmt.Sprintf("ids%d", f)))
			on := gorgonia.NodeFromAny(m.g, offs, gorgonia.WithName(fmt.Sprintf("offs%d", f)))
			var wn *gorgonia.Node
			if spec.weighted {
				w := tensor.New(tensor.Of(dt), tensor.WithShape(capacity))
				m.ws = append(m.ws, w)
				wn = gorgonia.NodeFromAny(m.g, w, gorgonia.WithName(fmt.Sprintf("w%d", f)))
			}
			p, err := m.tables[spec.tableOf[f]].Bag(in, on, wn, mode, WithIncludeLastOffset())
			require.NoError(t, err)
			parts = append(parts, p)
		}
		pooled, err = Concat(1, parts...)
		require.NoError(t, err)
	}
	m.out = pooled
	width := pooled.Shape()[1]
	r := rand.New(rand.NewPCG(9, 9))
	coef := make([]float64, collBatch*width)
	for k := range coef {
		coef[k] = r.NormFloat64()
	}
	var ct *tensor.Dense
	if dt == tensor.Float32 {
		c32 := make([]float32, len(coef))
		for k, v := range coef {
			c32[k] = float32(v)
		}
		ct = tensor.New(tensor.WithShape(collBatch, width), tensor.WithBacking(c32))
	} else {
		ct = tensor.New(tensor.WithShape(collBatch, width), tensor.WithBacking(coef))
	}
	cn := gorgonia.NodeFromAny(m.g, ct, gorgonia.WithName("coef"))
	loss := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(pooled, cn))))
	var wrt gorgonia.Nodes
	if asCollection {
		wrt = m.coll.GradNodes()
	} else {
		for _, e := range m.tables {
			wrt = append(wrt, e.GradNodes()...)
		}
	}
	_, err = gorgonia.Grad(loss, wrt...)
	require.NoError(t, err)
	m.vm = vmtest.New(t, m.g)
	t.Cleanup(func() { m.vm.Close() })
	return m
}

// set binds a batch: the collection's values and offsets, or each
// feature's ids and offsets.
func (m *collModel) set(spec collSpec, lengths, values []int64, weights []float64) {
	fill := func(dst *tensor.Dense, src []float64) {
		if dst.Dtype() == tensor.Float32 {
			d := dst.Float32s()
			for k := range d {
				d[k] = 1
				if k < len(src) {
					d[k] = float32(src[k])
				}
			}
			return
		}
		d := dst.Float64s()
		for k := range d {
			d[k] = 1
			if k < len(src) {
				d[k] = src[k]
			}
		}
	}
	if m.coll != nil {
		v, o := m.values.Int64s(), m.offsets.Int64s()
		for k := range v {
			v[k] = -99 // past the last offset: never read
			if k < len(values) {
				v[k] = values[k]
			}
		}
		o[0] = 0
		for k, n := range lengths {
			o[k+1] = o[k] + n
		}
		if m.weights != nil {
			fill(m.weights, weights)
		}
		return
	}
	at := 0
	for f := range spec.modes {
		ids, offs := m.ids[f].Int64s(), m.offs[f].Int64s()
		start := at
		offs[0] = 0
		for b := range collBatch {
			offs[b+1] = offs[b] + lengths[f*collBatch+b]
		}
		n := int(offs[collBatch])
		copy(ids, values[start:start+n])
		if m.ws != nil {
			fill(m.ws[f], weights[start:start+n])
		}
		at += n
	}
}

func (m *collModel) step(t *testing.T, opt optim.Sparse) {
	require.NoError(t, m.vm.RunAll())
	if m.coll != nil {
		require.NoError(t, m.coll.Step(context.Background(), opt))
	} else {
		for _, e := range m.tables {
			require.NoError(t, e.Step(context.Background(), opt))
		}
	}
	m.vm.Reset()
}

// rows returns every table's rows.
func (m *collModel) rows(t *testing.T) [][]float64 {
	var out [][]float64
	for _, e := range m.tables {
		var w *tensor.Dense
		switch h := e.Home().(type) {
		case Weights:
			w, _ = h.Weight()
		case Cache:
			ids := make([]int64, h.Vocab())
			for i := range ids {
				ids[i] = int64(i)
			}
			var err error
			w, err = h.Cached().Read(context.Background(), ids)
			require.NoError(t, err)
		}
		out = append(out, floatsOf(w))
	}
	return out
}

func floatsOf(t tensor.Tensor) []float64 {
	switch d := t.Data().(type) {
	case []float32:
		out := make([]float64, len(d))
		for k, v := range d {
			out[k] = float64(v)
		}
		return out
	case []float64:
		return append([]float64{}, d...)
	}
	return nil
}

// A collection pools and trains every feature to the bits of separate
// embeddings with a Bag each: every pooling mode, weights, padding, a
// table shared by two features, a cache's tables, float32 and float64,
// each rule; fused and unfused.
func TestCollectionEqualsSeparate(t *testing.T) {
	base := collSpec{tableOf: []int{0, 1, 1, 2}, modes: []BagMode{BagSum, BagMean, BagSum, BagMax},
		vocab: []int{50, 30, 9}, pad: []int{-1, 29, 0}, dim: 5, dtype: tensor.Float32}
	specs := map[string]collSpec{}
	specs["modes"] = base
	f64 := base
	f64.dtype = tensor.Float64
	specs["float64"] = f64
	w := base
	w.weighted, w.modes = true, []BagMode{BagSum, BagMean, BagSum, BagMean}
	specs["weighted"] = w
	fused := w
	fused.fused = true
	specs["fused"] = fused
	c := base
	c.cached = true
	specs["cached"] = c
	cf := fused
	cf.cached = true
	specs["cached fused"] = cf
	rules := map[string]func() optim.Sparse{
		"sgd":  func() optim.Sparse { return &optim.SparseSGD{LearnRate: 0.3, WeightDecay: 0.01} },
		"adam": func() optim.Sparse { return optim.NewSparseAdam(0.1) },
	}
	for name, spec := range specs {
		for rn, newOpt := range rules {
			spec.rule = newOpt()
			t.Run(name+"/"+rn, func(t *testing.T) {
				coll := newCollModel(t, spec, true, len(spec.modes)*collPer+3)
				sep := newCollModel(t, spec, false, collPer)
				r := rand.New(rand.NewPCG(1, 2))
				o1, o2 := newOpt(), newOpt()
				for range 4 {
					lengths, values, weights := collBatchOf(spec, r)
					coll.set(spec, lengths, values, weights)
					sep.set(spec, lengths, values, weights)
					coll.step(t, o1)
					sep.step(t, o2)
					require.Equal(t, floatsOf(sep.out.Value().(tensor.Tensor)), floatsOf(coll.out.Value().(tensor.Tensor)), "pooled")
				}
				want, got := sep.rows(t), coll.rows(t)
				for k := range want {
					require.Equal(t, want[k], got[k], "table %d", k)
				}
			})
		}
	}
}

// The fused step leaves every table as the unfused one does, bit for bit,
// over batches with repeated rows, for each rule, with per-id weights and
// without them (DLRM's usual case, where every sum bag's coefficient is
// 1).
func TestCollectionFusedEqualsUnfused(t *testing.T) {
	for _, weighted := range []bool{true, false} {
		spec := collSpec{tableOf: []int{0, 0, 1}, modes: []BagMode{BagSum, BagMean, BagSum},
			vocab: []int{600, 20}, pad: []int{3, -1}, dim: 8, weighted: weighted, dtype: tensor.Float32}
		for rn, newOpt := range map[string]func() optim.Sparse{
			"sgd":     func() optim.Sparse { return &optim.SparseSGD{LearnRate: 0.3} },
			"adam":    func() optim.Sparse { return optim.NewSparseAdam(0.1) },
			"adagrad": func() optim.Sparse { return optim.NewRowWiseAdagrad(0.2) },
		} {
			t.Run(fmt.Sprintf("%s/weighted=%v", rn, weighted), func(t *testing.T) {
				fused := spec
				fused.fused = true
				a := newCollModel(t, spec, true, 3*collPer)
				b := newCollModel(t, fused, true, 3*collPer+5)
				r := rand.New(rand.NewPCG(3, 4))
				o1, o2 := newOpt(), newOpt()
				for range 5 {
					l, v, w := collBatchOf(spec, r)
					a.set(spec, l, v, w)
					b.set(fused, l, v, w)
					a.step(t, o1)
					b.step(t, o2)
				}
				assert.Equal(t, a.rows(t), b.rows(t))
			})
		}
	}
}

// Bad input is an error naming what is wrong, before anything is written.
func TestCollectionErrors(t *testing.T) {
	spec := collSpec{tableOf: []int{0, 1}, modes: []BagMode{BagSum, BagSum}, vocab: []int{10, 4}, pad: []int{-1, -1}, dim: 3, dtype: tensor.Float32}
	m := newCollModel(t, spec, true, 2*collPer+1)
	r := rand.New(rand.NewPCG(5, 6))
	l, v, w := collBatchOf(spec, r)
	m.set(spec, l, v, w)
	require.NoError(t, m.vm.RunAll())
	m.vm.Reset()
	before := m.rows(t)

	// An id of feature 1 outside its table's 4 rows.
	v2 := append([]int64{}, v...)
	pos := len(v2) - 1
	v2[pos] = 4
	m.set(spec, l, v2, w)
	err := m.vm.RunAll()
	var ie *gather.IndexError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, "t1", ie.Name)
	assert.Equal(t, int64(4), ie.Value)
	assert.Equal(t, []int{pos}, ie.Pos)
	assert.Contains(t, err.Error(), `feature "f1"`)
	m.vm.Reset()

	// Offsets that go backwards.
	m.set(spec, l, v, w)
	o := m.offsets.Int64s()
	o[3] = o[4] + 1
	err = m.vm.RunAll()
	require.ErrorIs(t, err, gather.ErrShape)
	assert.Contains(t, err.Error(), "offsets[4]")
	m.vm.Reset()

	// Step with no run since the last.
	m.set(spec, l, v, w)
	require.NoError(t, m.vm.RunAll())
	require.NoError(t, m.coll.Step(context.Background(), &optim.SparseSGD{LearnRate: 0.1}))
	m.vm.Reset()
	require.ErrorIs(t, m.coll.Step(context.Background(), &optim.SparseSGD{LearnRate: 0.1}), gather.ErrGraph)
	after := m.rows(t)
	assert.NotEqual(t, before, after, "the one step moved rows")

	// Bad settings move nothing.
	require.NoError(t, m.vm.RunAll())
	err = m.coll.Step(context.Background(), &optim.SparseSGD{LearnRate: -1})
	require.ErrorIs(t, err, gather.ErrOption)
	assert.Equal(t, after, m.rows(t))
	m.vm.Reset()

	// A table looked up elsewhere, a dense table, a max bag with weights,
	// keys twice.
	g := gorgonia.NewGraph()
	e1, _ := NewEmbedding(g, "a", 5, 2, tensor.Float32, WithSparse())
	e2, _ := NewEmbedding(g, "b", 5, 2, tensor.Float32)
	for name, tc := range map[string]struct {
		f []Feature
		o CollectionOptions
	}{
		"dense":        {[]Feature{{Key: "x", Table: e2}}, CollectionOptions{}},
		"keys twice":   {[]Feature{{Key: "x", Table: e1}, {Key: "x", Table: e1}}, CollectionOptions{}},
		"max weighted": {[]Feature{{Key: "x", Table: e1, Mode: BagMax}}, CollectionOptions{Weighted: true}},
		"max fused":    {[]Feature{{Key: "x", Table: e1, Mode: BagMax}}, CollectionOptions{Fused: true}},
		"none":         {nil, CollectionOptions{}},
	} {
		_, err := NewCollection(tc.f, tc.o)
		assert.ErrorIs(t, err, gather.ErrOption, name)
	}
	c, err := NewCollection([]Feature{{Key: "x", Table: e1}}, CollectionOptions{})
	require.NoError(t, err)
	_, err = e1.Lookup(gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(2), gorgonia.WithName("ids")))
	assert.ErrorIs(t, err, gather.ErrOption, "a table in a collection is looked up by it alone")
	_, err = NewCollection([]Feature{{Key: "y", Table: e1}}, CollectionOptions{})
	assert.ErrorIs(t, err, gather.ErrOption, "a table in another collection")
	require.ErrorIs(t, c.Step(context.Background(), &optim.SparseSGD{LearnRate: 0.1}), gather.ErrGraph, "Step before Bag")
}

// A fused step refuses a gradient that is not finite before any row
// moves.
func TestCollectionFusedNotFinite(t *testing.T) {
	spec := collSpec{tableOf: []int{0}, modes: []BagMode{BagSum}, vocab: []int{10}, pad: []int{-1}, dim: 3, fused: true, dtype: tensor.Float32}
	m := newCollModel(t, spec, true, collPer)
	r := rand.New(rand.NewPCG(7, 8))
	l, v, w := collBatchOf(spec, r)
	m.set(spec, l, v, w)
	require.NoError(t, m.vm.RunAll())
	m.vm.Reset()
	before := m.rows(t)
	coef := m.g.ByName("coef")[0].Value().(*tensor.Dense)
	coef.Float32s()[4] = float32(math.Inf(1)) // sample 1, column 1: feature 0's
	require.NoError(t, m.vm.RunAll())
	err := m.coll.Step(context.Background(), &optim.SparseSGD{LearnRate: 0.1})
	require.True(t, errors.Is(err, optim.ErrNotFinite), "%v", err)
	assert.Contains(t, err.Error(), `feature "f0", sample 1, column 1`)
	assert.Equal(t, before, m.rows(t))
}

// Pack writes a batch into the collection's order of features, whatever
// its order of keys; a batch that does not fit changes no tensor.
func TestCollectionPack(t *testing.T) {
	g := gorgonia.NewGraph()
	a, _ := NewEmbedding(g, "a", 10, 2, tensor.Float32, WithSparse())
	b, _ := NewEmbedding(g, "b", 10, 2, tensor.Float32, WithSparse())
	c, err := NewCollection([]Feature{{Key: "a", Table: a}, {Key: "b", Table: b}}, CollectionOptions{Weighted: true})
	require.NoError(t, err)
	values := tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(6))
	offsets := tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(2*2+1))
	weights := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(6))
	kj := KeyedJagged{Keys: []string{"b", "a"}, Lengths: []int64{1, 2, 0, 1}, Values: []int64{7, 3, 9, 4}, Weights: []float64{1, 2, 3, 4}}
	require.NoError(t, c.Pack(kj, values, offsets, weights))
	assert.Equal(t, []int64{4, 7, 3, 9, 0, 0}, values.Int64s())
	assert.Equal(t, []int64{0, 0, 1, 2, 4}, offsets.Int64s())
	assert.Equal(t, []float32{4, 1, 2, 3, 0, 0}, weights.Float32s())

	for name, bad := range map[string]KeyedJagged{
		"a key twice":   {Keys: []string{"a", "a"}, Lengths: []int64{1, 0, 0, 0}, Values: []int64{1}, Weights: []float64{1}},
		"unknown key":   {Keys: []string{"a", "c"}, Lengths: []int64{1, 0, 0, 0}, Values: []int64{1}, Weights: []float64{1}},
		"lengths short": {Keys: []string{"a", "b"}, Lengths: []int64{1, 0, 0}, Values: []int64{1}, Weights: []float64{1}},
		"values short":  {Keys: []string{"a", "b"}, Lengths: []int64{1, 1, 0, 0}, Values: []int64{1}, Weights: []float64{1}},
		"negative":      {Keys: []string{"a", "b"}, Lengths: []int64{2, -1, 0, 0}, Values: []int64{1}, Weights: []float64{1}},
		"no weights":    {Keys: []string{"a", "b"}, Lengths: []int64{1, 0, 0, 0}, Values: []int64{1}},
		"too many":      {Keys: []string{"a", "b"}, Lengths: []int64{7, 0, 0, 0}, Values: make([]int64, 7), Weights: make([]float64, 7)},
	} {
		err := c.Pack(bad, values, offsets, weights)
		assert.Error(t, err, name)
		assert.Equal(t, []int64{4, 7, 3, 9, 0, 0}, values.Int64s(), name)
		assert.Equal(t, []int64{0, 0, 1, 2, 4}, offsets.Int64s(), name)
	}
}

// Raw ids through the collection's id maps (Map) train the tables as
// RawIDs and a Bag per feature do, bit for bit: the same rows given, the
// same rows started afresh, a table shared by two features mapped once
// per feature.
func TestCollectionRawEqualsSeparate(t *testing.T) {
	const rows = 12 // each map's; the tables have one more, the padding row
	spec := collSpec{tableOf: []int{0, 1, 1}, modes: []BagMode{BagSum, BagMean, BagSum},
		vocab: []int{rows + 1, rows + 1}, pad: []int{rows, rows}, dim: 4, dtype: tensor.Float32}
	init := driver.RowInit{Seed: 5, Std: 0.1}
	newMaps := func() []driver.Mapper {
		var ms []driver.Mapper
		for k := range spec.vocab {
			m, err := table.NewIDMap(fmt.Sprintf("t%d", k), driver.IDMapOptions{Rows: rows, Pad: true, PadID: -1})
			require.NoError(t, err)
			ms = append(ms, m)
		}
		return ms
	}
	collMaps, sepMaps := newMaps(), newMaps()
	rspec := spec
	rspec.maps, rspec.init = collMaps, init
	rc := newCollModel(t, rspec, true, len(spec.modes)*collPer)
	raw := newCollModel(t, spec, false, collPer) // separate bags, fed by RawIDs
	var raws []*RawIDs
	for k, e := range raw.tables {
		r, err := NewRawIDs(e, sepMaps[k], init)
		require.NoError(t, err)
		raws = append(raws, r)
	}

	r := rand.New(rand.NewPCG(11, 12))
	opt1, opt2 := &optim.SparseSGD{LearnRate: 0.2}, &optim.SparseSGD{LearnRate: 0.2}
	for step := range 6 {
		lengths, _, weights := collBatchOf(spec, r)
		var values []int64
		pool := r.Perm(20)[:5] // 5 raw ids a step, 20 in all, for 12 rows: rows are taken back and given again
		for _, n := range lengths {
			for range n {
				v := int64(pool[r.IntN(len(pool))]) * 1_000_003
				if r.IntN(6) == 0 {
					v = -1 // the padding id
				}
				values = append(values, v)
			}
		}
		rc.set(spec, lengths, values, weights)
		require.NoError(t, rc.coll.Map(context.Background(), rc.values, rc.offsets, int64(step)))
		raw.set(spec, lengths, values, weights)
		for f := range spec.modes {
			ids := raw.ids[f]
			require.NoError(t, raws[spec.tableOf[f]].Map(context.Background(), append([]int64{}, ids.Int64s()...), ids, int64(step)))
		}
		rc.step(t, opt1)
		raw.step(t, opt2)
		require.Equal(t, floatsOf(raw.out.Value().(tensor.Tensor)), floatsOf(rc.out.Value().(tensor.Tensor)), "step %d", step)
	}
	assert.Equal(t, raw.rows(t), rc.rows(t))
	s, err := collMaps[1].Stats(context.Background())
	require.NoError(t, err)
	assert.Positive(t, s.Evicted, "rows were taken back and given again")
}
