package nn

import (
	"math"
	"testing"

	"github.com/gathergrad/gather/internal/vmtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/gradcheck"
)

// counting is an initialiser filling the table with 1, 2, 3, ..., so tests can predict it.
func counting(dt tensor.Dtype, s ...int) any {
	n := tensor.Shape(s).TotalSize()
	if dt == tensor.Float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i + 1)
		}
		return v
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(i + 1)
	}
	return v
}

func TestEmbeddingLookupShapes(t *testing.T) {
	g := gorgonia.NewGraph()
	emb, err := NewEmbedding(g, "emb", 5, 3, tensor.Float64, WithInit(counting))
	require.NoError(t, err)
	ids := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]int32{4, 0, 4, 1})), gorgonia.WithName("ids"))
	vecs, err := emb.Lookup(ids)
	require.NoError(t, err)
	assert.Equal(t, tensor.Shape{2, 2, 3}, vecs.Shape())
	vm := vmtest.New(t, g)
	defer vm.Close()
	require.NoError(t, vm.RunAll())
	assert.Equal(t, []float64{13, 14, 15, 1, 2, 3, 13, 14, 15, 4, 5, 6}, vecs.Value().Data())
	assert.Equal(t, gorgonia.Nodes{emb.Table}, emb.Learnables())

	_, err = NewEmbedding(g, "bad", 0, 3, tensor.Float64)
	assert.ErrorIs(t, err, gather.ErrShape)
	_, err = NewEmbedding(g, "bad", 5, 3, tensor.Int)
	assert.ErrorIs(t, err, gather.ErrDtype)
	_, err = NewEmbedding(g, "bad", 5, 3, tensor.Float32, WithPadding(5))
	assert.ErrorIs(t, err, gather.ErrIndexOutOfRange)
}

// One SGD step on sum(lookup) moves every looked-up row but the padding row,
// which starts and stays at zero.
func TestEmbeddingPaddingAndFrozen(t *testing.T) {
	for _, frozen := range []bool{false, true} {
		g := gorgonia.NewGraph()
		opts := []NewEmbeddingOption{WithInit(counting), WithPadding(-4)} // id 1
		if frozen {
			opts = append(opts, WithFrozen())
		}
		emb, err := NewEmbedding(g, "emb", 5, 2, tensor.Float32, opts...)
		require.NoError(t, err)
		assert.Equal(t, []float32{1, 2, 0, 0, 5, 6, 7, 8, 9, 10}, emb.Table.Value().Data(), "padding row starts at zero")
		ids := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(4), tensor.WithBacking([]int64{1, 0, 1, 3})), gorgonia.WithName("ids"))
		vecs, err := emb.Lookup(ids)
		require.NoError(t, err)
		bias := gorgonia.NewScalar(g, tensor.Float32, gorgonia.WithValue(float32(0)), gorgonia.WithName("bias"))
		cost := gorgonia.Must(gorgonia.Add(gorgonia.Must(gorgonia.Sum(vecs)), bias))
		learn := append(emb.Learnables(), bias)
		_, err = gorgonia.Grad(cost, learn...)
		require.NoError(t, err)
		vm := vmtest.Bound(t, g, learn...)
		require.NoError(t, vm.RunAll())
		solver := gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.5))
		require.NoError(t, solver.Step(gorgonia.NodesToValueGrads(learn)))
		vm.Close()
		if frozen {
			assert.Empty(t, emb.Learnables())
			assert.Equal(t, []float32{1, 2, 0, 0, 5, 6, 7, 8, 9, 10}, emb.Table.Value().Data())
		} else {
			assert.Equal(t, []float32{0.5, 1.5, 0, 0, 5, 6, 6.5, 7.5, 9, 10}, emb.Table.Value().Data())
		}
	}
}

func TestNLLLoss(t *testing.T) {
	g := gorgonia.NewGraph()
	lp := []float64{math.Log(0.5), math.Log(0.25), math.Log(0.25), math.Log(0.1), math.Log(0.2), math.Log(0.7)}
	logProbs := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(lp)), gorgonia.WithName("lp"))
	targets := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(2), tensor.WithBacking([]int{0, 2})), gorgonia.WithName("y"))
	loss, err := NLLLoss(logProbs, targets)
	require.NoError(t, err)
	require.True(t, loss.IsScalar())
	vm := vmtest.New(t, g)
	defer vm.Close()
	require.NoError(t, vm.RunAll())
	assert.InDelta(t, -(math.Log(0.5)+math.Log(0.7))/2, loss.Value().Data(), 1e-12)

	bad := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(3), gorgonia.WithName("bad"))
	_, err = NLLLoss(logProbs, bad)
	assert.ErrorIs(t, err, gather.ErrShape)

	// The gradient through LogSoftMax and the pick, in both machines.
	inputs := []tensor.Tensor{
		tensor.New(tensor.WithShape(3, 4), tensor.WithBacking([]float64{0.1, -0.3, 0.7, 0.2, 1, 2, -1, 0, 0.5, 0.5, 0.1, -0.2})),
		tensor.New(tensor.WithShape(3), tensor.WithBacking([]int64{2, 0, 3})),
	}
	build := func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) {
		lsm, err := gorgonia.LogSoftMax(in[0])
		if err != nil {
			return nil, err
		}
		return NLLLoss(lsm, in[1])
	}
	require.NoError(t, gradcheck.Check(build, inputs))
	require.NoError(t, gradcheck.Check(build, inputs, gradcheck.WithLispMachine()))
}

// Embedding -> linear -> LogSoftMax -> NLLLoss learns a toy mapping with Adam.
func TestEmbeddingTrainsWithAdam(t *testing.T) {
	g := gorgonia.NewGraph()
	emb, err := NewEmbedding(g, "emb", 6, 4, tensor.Float64, WithInit(gorgonia.Uniform(-0.1, 0.1)))
	require.NoError(t, err)
	ids := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(6), tensor.WithBacking([]int{0, 1, 2, 3, 4, 5})), gorgonia.WithName("ids"))
	targets := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(6), tensor.WithBacking([]int{1, 2, 0, 1, 2, 0})), gorgonia.WithName("y"))
	w := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(4, 3), gorgonia.WithName("w"), gorgonia.WithInit(gorgonia.Uniform(-0.1, 0.1)))
	h, err := emb.Lookup(ids)
	require.NoError(t, err)
	logits := gorgonia.Must(gorgonia.Mul(h, w))
	loss, err := NLLLoss(gorgonia.Must(gorgonia.LogSoftMax(logits)), targets)
	require.NoError(t, err)
	learn := append(emb.Learnables(), w)
	_, err = gorgonia.Grad(loss, learn...)
	require.NoError(t, err)
	vm := vmtest.Bound(t, g, learn...)
	defer vm.Close()
	solver := gorgonia.NewAdamSolver(gorgonia.WithLearnRate(0.1))
	var first, last float64
	for step := 0; step < 100; step++ {
		require.NoError(t, vm.RunAll())
		if step == 0 {
			first = loss.Value().Data().(float64)
		}
		last = loss.Value().Data().(float64)
		require.NoError(t, solver.Step(gorgonia.NodesToValueGrads(learn)))
		vm.Reset()
	}
	assert.InDelta(t, math.Log(3), first, 0.05, "an untrained model is uniform")
	assert.Less(t, last, 0.05, "the mapping is learnable exactly")
}

// WithWeights starts a table as a copy of pretrained vectors (the
// padding row keeping its values, as from_pretrained does), refuses
// another shape or dtype, and contradicts WithInit.
func TestEmbeddingWeights(t *testing.T) {
	pre := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6}))
	g := gorgonia.NewGraph()
	emb, err := NewEmbedding(g, "glove", 3, 2, tensor.Float32, WithWeights(pre), WithFrozen(), WithPadding(0))
	require.NoError(t, err)
	table := emb.Table.Value().(*tensor.Dense)
	assert.Equal(t, []float32{1, 2, 3, 4, 5, 6}, table.Float32s())
	table.Float32s()[0] = 9
	assert.Equal(t, float32(1), pre.Float32s()[0], "a copy")
	assert.Empty(t, emb.Learnables())

	// A view of a larger tensor gives its own values.
	big := tensor.New(tensor.WithShape(4, 2), tensor.WithBacking([]float32{0, 0, 1, 2, 3, 4, 5, 6}))
	view, err := big.Slice(tensor.S(1, 4))
	require.NoError(t, err)
	e2, err := NewEmbedding(g, "view", 3, 2, tensor.Float32, WithWeights(view))
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3, 4, 5, 6}, e2.Table.Value().(*tensor.Dense).Float32s())

	_, err = NewEmbedding(g, "e1", 4, 2, tensor.Float32, WithWeights(pre))
	require.ErrorIs(t, err, gather.ErrShape)
	_, err = NewEmbedding(g, "e2", 3, 2, tensor.Float64, WithWeights(pre))
	require.ErrorIs(t, err, gather.ErrDtype)
	_, err = NewEmbedding(g, "e3", 3, 2, tensor.Float32, WithWeights(pre), WithSeed(1))
	require.ErrorIs(t, err, gather.ErrOption)
	_, err = NewEmbedding(g, "e4", 3, 2, tensor.Float32, WithWeights(nil))
	require.ErrorIs(t, err, gather.ErrShape)
}
