package optim

import (
	"math"
	"testing"

	"github.com/gathergrad/gather"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// One SparseAdam on two tables of one shape (word2vec's input and output
// tables) is refused; its moments have the table's dtype.
func TestSparseAdamOneTable(t *testing.T) {
	a := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(10, 4))
	b := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(10, 4))
	g := &RowGrad{Rows: []int{1, 3}, Values: tensor.New(tensor.WithShape(2, 4), tensor.WithBacking(make([]float32, 8)))}
	opt := NewSparseAdam(0.1)
	require.NoError(t, opt.Step(a, g))
	require.NoError(t, opt.Step(a, g))
	err := opt.Step(b, g)
	require.ErrorIs(t, err, ErrOtherTable)
	assert.Equal(t, 2, opt.t, "the refused step did not count")
	_, ok := opt.m.([]float32)
	assert.True(t, ok, "moments of a float32 table are float32, got %T", opt.m)

	// Zero is a value: Beta1 0 is momentum-free Adam, not "use 0.9".
	opt0 := &SparseAdam{LearnRate: 0.1, Beta1: 0, Beta2: 0.999, Eps: 1e-8}
	require.NoError(t, opt0.Step(b, g))
	// Values PyTorch refuses are refused.
	for _, bad := range []*SparseAdam{{LearnRate: 0.1}, {LearnRate: -1, Eps: 1e-8}, {LearnRate: 0.1, Beta1: 1, Eps: 1e-8}} {
		err := bad.Step(a, g)
		assert.ErrorIs(t, err, gather.ErrOption, "%+v", *bad)
	}
}

// CheckFinite refuses a gradient holding a NaN or an infinity, naming the
// row, and changes nothing; without it the step goes ahead.
func TestCheckFinite(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		for name, opt := range map[string]Sparse{
			"sgd":     &SparseSGD{LearnRate: 0.1, CheckFinite: true},
			"adam":    &SparseAdam{LearnRate: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, CheckFinite: true},
			"adagrad": &RowWiseAdagrad{LearnRate: 0.1, Eps: 1e-8, CheckFinite: true},
		} {
			table := tensor.New(tensor.WithShape(4, 2), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6, 7, 8}))
			g := &RowGrad{Rows: []int{1, 3}, Values: tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{0.5, 0.5, 0.5, bad}))}
			err := opt.Step(table, g)
			require.ErrorIs(t, err, ErrNotFinite, name)
			assert.Contains(t, err.Error(), "row 3", name)
			assert.Equal(t, []float32{1, 2, 3, 4, 5, 6, 7, 8}, table.Float32s(), name)
			// A good gradient then steps as usual.
			g.Values.Float32s()[3] = 0.5
			require.NoError(t, opt.Step(table, g), name)
		}
	}
	table := tensor.New(tensor.WithShape(1, 1), tensor.WithBacking([]float64{1}))
	g := &RowGrad{Rows: []int{0}, Values: tensor.New(tensor.WithShape(1, 1), tensor.WithBacking([]float64{math.NaN()}))}
	require.NoError(t, (&SparseSGD{LearnRate: 0.1}).Step(table, g), "without CheckFinite")
	assert.True(t, math.IsNaN(table.Float64s()[0]))
}
