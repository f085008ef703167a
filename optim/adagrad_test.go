package optim

import (
	"math"
	"testing"

	"github.com/gathergrad/gather"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// RowWiseAdagrad follows its formula: one accumulator per row, the mean of
// the squared gradient (weight decay added), and refuses bad settings.
func TestRowWiseAdagradFormula(t *testing.T) {
	w := []float64{1, 2, 3, 4, 5, 6}
	table := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking(append([]float64{}, w...)))
	g := &RowGrad{Rows: []int{0, 2}, Values: tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{0.5, -1, 2, 0}))}
	o := &RowWiseAdagrad{LearnRate: 0.1, Eps: 1e-8, WeightDecay: 0.01}
	s := []float64{0, 0, 0}
	want := append([]float64{}, w...)
	for range 3 {
		require.NoError(t, o.Step(table, g))
		for k, r := range g.Rows {
			var sq float64
			x := make([]float64, 2)
			for j := range 2 {
				x[j] = g.Values.Float64s()[k*2+j] + 0.01*want[r*2+j]
				sq += x[j] * x[j]
			}
			s[r] += sq / 2
			for j := range 2 {
				want[r*2+j] -= 0.1 * x[j] / (math.Sqrt(s[r]) + 1e-8)
			}
		}
	}
	assert.Equal(t, want, table.Float64s())
	assert.Equal(t, s, o.sum)
	assert.Equal(t, w[2:4], table.Float64s()[2:4], "an untouched row stays")

	other := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking(make([]float64, 6)))
	require.ErrorIs(t, o.Step(other, g), ErrOtherTable)
	for _, bad := range []*RowWiseAdagrad{{LearnRate: -1, Eps: 1e-8}, {LearnRate: math.NaN(), Eps: 1e-8}, {LearnRate: 1}, {LearnRate: 1, Eps: 1e-8, WeightDecay: math.Inf(1)}} {
		require.ErrorIs(t, bad.Step(other, g), gather.ErrOption)
	}
	assert.Equal(t, 1e-8, NewRowWiseAdagrad(0.1).Eps)
}
