package optim

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
)

// A Table keeps the moments in the table's dtype and counts its steps;
// one SparseAdam steps two tables (word2vec's input and output tables),
// each with its own state and count.
func TestSparseAdamTables(t *testing.T) {
	a := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(10, 4))
	b := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(10, 4))
	g := &RowGrad{Rows: []int64{1, 3}, Values: tensor.New(tensor.WithShape(2, 4), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6, 7, 8}))}
	opt := NewSparseAdam(0.1)
	ta, err := NewMemoryTable(a, opt)
	require.NoError(t, err)
	tb, err := NewMemoryTable(b, opt)
	require.NoError(t, err)
	require.NoError(t, ta.Step(context.Background(), opt, g))
	require.NoError(t, ta.Step(context.Background(), opt, g))
	require.NoError(t, tb.Step(context.Background(), opt, g))
	assert.Equal(t, int64(2), ta.Steps())
	assert.Equal(t, int64(1), tb.Steps())
	assert.Equal(t, tensor.Float32, ta.State[0].Dtype())
	assert.NotEqual(t, a.Float32s(), b.Float32s(), "two steps move a row further than one")

	// Zero is a value: Beta1 0 is momentum-free Adam, not "use 0.9".
	opt0 := &SparseAdam{LearnRate: 0.1, Beta1: 0, Beta2: 0.999, Eps: 1e-8}
	require.NoError(t, tb.Step(context.Background(), opt0, g))
	// Values PyTorch refuses are refused.
	for _, bad := range []*SparseAdam{{LearnRate: 0.1}, {LearnRate: -1, Eps: 1e-8}, {LearnRate: 0.1, Beta1: 1, Eps: 1e-8}} {
		err := ta.Step(context.Background(), bad, g)
		assert.ErrorIs(t, err, gather.ErrOption, "%+v", *bad)
	}
	assert.Equal(t, int64(2), ta.Steps(), "refused steps are not counted")
}

// CheckFinite refuses a gradient holding a NaN or an infinity, naming the
// row, and changes nothing; without it the step goes ahead.
func TestCheckFinite(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		for name, opt := range map[string]Sparse{
			"sgd":            &SparseSGD{LearnRate: 0.1, CheckFinite: true},
			"adam":           &SparseAdam{LearnRate: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, CheckFinite: true},
			"adagrad":        &RowWiseAdagrad{LearnRate: 0.1, Eps: 1e-8, CheckFinite: true},
			"sparse adagrad": &SparseAdagrad{LearnRate: 0.1, Eps: 1e-10, CheckFinite: true},
		} {
			table := tensor.New(tensor.WithShape(4, 2), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6, 7, 8}))
			tab, err := NewMemoryTable(table, opt)
			require.NoError(t, err)
			g := &RowGrad{Rows: []int64{1, 3}, Values: tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{0.5, 0.5, 0.5, bad}))}
			serr := opt.Check(1, g, 2)
			require.ErrorIs(t, serr, ErrNotFinite, name)
			err = tab.Step(context.Background(), opt, g)
			require.ErrorIs(t, err, ErrNotFinite, name)
			assert.Contains(t, err.Error(), "row 3", name)
			assert.Equal(t, []float32{1, 2, 3, 4, 5, 6, 7, 8}, table.Float32s(), name)
			// A good gradient then steps as usual.
			g.Values.Float32s()[3] = 0.5
			require.NoError(t, tab.Step(context.Background(), opt, g), name)
		}
	}
	table := tensor.New(tensor.WithShape(1, 1), tensor.WithBacking([]float64{1}))
	g := &RowGrad{Rows: []int64{0}, Values: tensor.New(tensor.WithShape(1, 1), tensor.WithBacking([]float64{math.NaN()}))}
	tab, err := NewMemoryTable(table, &SparseSGD{})
	require.NoError(t, err)
	require.NoError(t, tab.Step(context.Background(), &SparseSGD{LearnRate: 0.1}, g), "without CheckFinite")
	assert.True(t, math.IsNaN(table.Float64s()[0]))
}
