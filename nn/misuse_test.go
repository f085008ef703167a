package nn

import (
	"context"
	"errors"
	"testing"

	"github.com/gathergrad/gather/internal/vmtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/gradcheck"
	"github.com/gathergrad/gather/optim"
)

// Targets must have exactly the logits' shape without the class axis:
// (2), (2, 1) and (1, 2) are different shapes.
func TestTargetShapesExact(t *testing.T) {
	cases := []struct {
		logits, targets []int
		ok              bool
	}{
		{[]int{2, 3}, []int{2}, true},
		{[]int{2, 3}, []int{2, 1}, false},
		{[]int{2, 3}, []int{1, 2}, false},
		{[]int{2, 1, 3}, []int{2}, false},
		{[]int{2, 1, 3}, []int{2, 1}, true},
		{[]int{3}, []int{}, true},
	}
	for _, c := range cases {
		for _, loss := range []string{"cross_entropy", "nll_loss"} {
			g := gorgonia.NewGraph()
			x := gorgonia.NewTensor(g, tensor.Float64, len(c.logits), gorgonia.WithShape(c.logits...), gorgonia.WithName("x"))
			var y *gorgonia.Node
			if len(c.targets) == 0 {
				y = gorgonia.NewScalar(g, tensor.Int, gorgonia.WithName("y"))
			} else {
				y = gorgonia.NewTensor(g, tensor.Int, len(c.targets), gorgonia.WithShape(c.targets...), gorgonia.WithName("y"))
			}
			var err error
			if loss == "cross_entropy" {
				_, err = CrossEntropy(x, y)
			} else {
				_, err = NLLLoss(x, y)
			}
			if c.ok {
				assert.NoError(t, err, "%s: logits %v, targets %v", loss, c.logits, c.targets)
			} else {
				assert.ErrorIs(t, err, gather.ErrShape, "%s: logits %v, targets %v", loss, c.logits, c.targets)
			}
		}
	}
}

// A dense solver handed the taps (GradNodes) trains the taps, not the
// table: RowGrad then fails and says why.
func TestTapsGivenToDenseSolver(t *testing.T) {
	g := gorgonia.NewGraph()
	emb, err := NewEmbedding(g, "words", 10, 3, tensor.Float64, WithSparse())
	require.NoError(t, err)
	ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{1, 2}))))
	h, err := emb.Lookup(ids)
	require.NoError(t, err)
	cost := gorgonia.Must(gorgonia.Sum(h))
	wrong := emb.GradNodes() // the mistake: taps as dense learnables
	_, err = gorgonia.Grad(cost, wrong...)
	require.NoError(t, err)
	vm := vmtest.Bound(t, g, wrong...)
	defer vm.Close()
	solver := gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.1))
	require.NoError(t, vm.RunAll())
	// The dense step first: it moves the taps by their gradients and
	// clears those, so the table's row gradient would be zero.
	require.NoError(t, solver.Step(gorgonia.NodesToValueGrads(wrong)))
	err = emb.Step(context.Background(), optim.NewSparseAdam(0.1))
	require.ErrorIs(t, err, gather.ErrGraph)
	assert.Contains(t, err.Error(), "is no longer zero")
}

// Index errors name the table of an nn lookup, and the node of a named
// Gather, so that two lookups into one vocabulary can be told apart.
func TestIndexErrorsNameTheirTable(t *testing.T) {
	g := gorgonia.NewGraph()
	words, err := NewEmbedding(g, "words", 5, 2, tensor.Float32)
	require.NoError(t, err)
	ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{0, 9}))))
	_, err = words.Lookup(ids)
	require.NoError(t, err)
	vm := vmtest.New(t, g)
	defer vm.Close()
	err = vm.RunAll()
	var ie *gather.IndexError
	require.True(t, errors.As(gather.Cause(err), &ie), "%v", err)
	assert.Equal(t, "words", ie.Name)
	assert.Equal(t, `embedding "words": ids[1] = 9 is out of range [0, 4] for axis 0 of size 5`, ie.Error())

	g2 := gorgonia.NewGraph()
	data := gorgonia.NewMatrix(g2, tensor.Float32, gorgonia.WithShape(5, 2), gorgonia.WithName("data"), gorgonia.WithInit(gorgonia.Zeroes()))
	idx := gorgonia.NewVector(g2, tensor.Int, gorgonia.WithName("idx"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(1), tensor.WithBacking([]int{-6}))))
	_, err = gather.Gather(data, idx, 0, gather.WithName("rows"))
	require.NoError(t, err)
	vm2 := vmtest.New(t, g2)
	defer vm2.Close()
	err = vm2.RunAll()
	require.True(t, errors.As(gather.Cause(err), &ie), "%v", err)
	assert.Equal(t, `gather "rows": indices[0] = -6 is out of range [-5, 4] for axis 0 of size 5`, ie.Error())
}

// The default initialiser is seeded: the same seed gives the same table.
func TestEmbeddingSeed(t *testing.T) {
	table := func(opts ...NewEmbeddingOption) []float32 {
		e, err := NewEmbedding(gorgonia.NewGraph(), "t", 20, 4, tensor.Float32, opts...)
		require.NoError(t, err)
		return e.Table.Value().(*tensor.Dense).Float32s()
	}
	assert.Equal(t, table(), table(), "no seed: the same table every time")
	assert.Equal(t, table(WithSeed(7)), table(WithSeed(7)))
	assert.NotEqual(t, table(WithSeed(7)), table(WithSeed(8)))
}

// Every error path wraps one of the sentinels (errors.Is), as the docs
// promise.
func TestErrorsWrapSentinels(t *testing.T) {
	sentinels := []error{gather.ErrIndexOutOfRange, gather.ErrAxisOutOfRange, gather.ErrShape, gather.ErrDtype,
		gather.ErrOption, gather.ErrGraph, gradcheck.ErrMismatch}
	g := gorgonia.NewGraph()
	f64 := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(2, 3), gorgonia.WithName("f64"))
	ints := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(2), gorgonia.WithName("ints"))
	i2 := gorgonia.NewMatrix(g, tensor.Int, gorgonia.WithShape(2, 3), gorgonia.WithName("i2"))
	table := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(4, 2))
	grad := &optim.RowGrad{Rows: []int64{1}, Values: tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(1, 2))}
	errs := map[string]func() error{
		"gather axis":          func() error { _, err := gather.Gather(f64, ints, 2); return err },
		"gather index dtype":   func() error { _, err := gather.Gather(f64, f64, 0); return err },
		"padding out of range": func() error { _, err := gather.Gather(f64, ints, 0, gather.WithPaddingIndex(5)); return err },
		"elements rank":        func() error { _, err := gather.GatherElements(f64, ints, 1); return err },
		"take reuse and incr": func() error {
			_, err := gather.Take(table, tensor.New(tensor.WithBacking([]int{0})), 0, tensor.WithReuse(table), tensor.WithIncr(table))
			return err
		},
		"index add into a view": func() error {
			v, _ := table.Slice(tensor.S(0, 2))
			return gather.IndexAdd(v.(*tensor.Dense), tensor.New(tensor.WithBacking([]int{0})), tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(1, 2)), 0)
		},
		"cross entropy targets": func() error { _, err := CrossEntropy(f64, i2); return err },
		"cross entropy dtype":   func() error { _, err := CrossEntropy(i2, ints); return err },
		"nll targets":           func() error { _, err := NLLLoss(f64, i2); return err },
		"embedding size":        func() error { _, err := NewEmbedding(g, "e", 0, 2, tensor.Float32); return err },
		"embedding dtype":       func() error { _, err := NewEmbedding(g, "e", 3, 2, tensor.Int); return err },
		"embedding padding":     func() error { _, err := NewEmbedding(g, "e", 3, 2, tensor.Float32, WithPadding(3)); return err },
		"sgd dtype":             func() error { return stepOnce(&optim.SparseSGD{LearnRate: 1}, table, grad) },
		"sgd rows": func() error {
			return stepOnce(&optim.SparseSGD{LearnRate: 1}, table, &optim.RowGrad{Rows: []int64{9}, Values: tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(1, 2))})
		},
		"adam eps": func() error {
			return stepOnce(&optim.SparseAdam{LearnRate: 1}, table, &optim.RowGrad{Values: tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(0, 2))})
		},
		"row gradient ids": func() error {
			_, err := optim.RowGradient(tensor.New(tensor.WithBacking([]int{5})), tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(1, 2)), 4, -1)
			return err
		},
		"row gradient shape": func() error {
			_, err := optim.RowGradient(tensor.New(tensor.WithBacking([]int{1})), tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(2, 1, 2)), 4, -1)
			return err
		},
		"gradcheck non-scalar": func() error {
			return gradcheck.Check(func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) { return in[0], nil }, []tensor.Tensor{table})
		},
		"gradcheck build failure": func() error {
			return gradcheck.Check(func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) {
				return gorgonia.Mul(in[0], in[0])
			}, []tensor.Tensor{table})
		},
	}
	for name, f := range errs {
		err := f()
		require.Error(t, err, name)
		found := 0
		for _, s := range sentinels {
			if errors.Is(err, s) {
				found++
			}
		}
		assert.Equal(t, 1, found, "%s: %v wraps %d sentinels", name, err, found)
	}
}
