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
	weights := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking(append([]float64{}, w...)))
	g := &RowGrad{Rows: []int{0, 2}, Values: tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{0.5, -1, 2, 0}))}
	o := &RowWiseAdagrad{LearnRate: 0.1, Eps: 1e-8, WeightDecay: 0.01}
	tab, err := NewTable(weights, o)
	require.NoError(t, err)
	s := []float64{0, 0, 0}
	want := append([]float64{}, w...)
	for range 3 {
		require.NoError(t, tab.Step(o, g))
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
	assert.Equal(t, want, weights.Float64s())
	assert.Equal(t, s, tab.State[0].Float64s())
	assert.Equal(t, int64(3), tab.Steps)
	assert.Equal(t, w[2:4], weights.Float64s()[2:4], "an untouched row stays")
	for _, bad := range []*RowWiseAdagrad{{LearnRate: -1, Eps: 1e-8}, {LearnRate: math.NaN(), Eps: 1e-8}, {LearnRate: 1}, {LearnRate: 1, Eps: 1e-8, WeightDecay: math.Inf(1)}} {
		require.ErrorIs(t, tab.Step(bad, g), gather.ErrOption)
	}
	assert.Equal(t, int64(3), tab.Steps, "refused steps are not counted")
	assert.Equal(t, 1e-8, NewRowWiseAdagrad(0.1).Eps)
}

// SparseAdagrad on a float64 table equals, to the bit, a float64
// transcription of torch.optim.Adagrad's sparse branch
// (_single_tensor_adagrad, PyTorch 1.13), lr_decay and
// initial_accumulator_value included; untouched rows and sums stay.
func TestSparseAdagradTorch(t *testing.T) {
	const vocab, dim = 5, 3
	const lr, decay, init, eps = 0.05, 0.01, 0.1, 1e-10
	w := make([]float64, vocab*dim)
	for i := range w {
		w[i] = math.Sin(float64(i+1)) * 0.7
	}
	weights := tensor.New(tensor.WithShape(vocab, dim), tensor.WithBacking(append([]float64{}, w...)))
	o := &SparseAdagrad{LearnRate: lr, LRDecay: decay, InitialAccumulatorValue: init, Eps: eps}
	tab, err := NewTable(weights, o)
	require.NoError(t, err)

	// The transcription: state_sum = full(init); per step,
	// clr = lr / (1 + (step-1)*lr_decay); sum += g²; std = sqrt(sum) + eps;
	// param += -clr * (g / std), on the gradient's rows.
	sum := make([]float64, vocab*dim)
	for i := range sum {
		sum[i] = init
	}
	want := append([]float64{}, w...)
	for step := 1; step <= 4; step++ {
		rows := []int{0, 2 + step%3}
		vals := make([]float64, len(rows)*dim)
		for i := range vals {
			vals[i] = math.Cos(float64(step*7+i)) * 1.3
		}
		g := &RowGrad{Rows: rows, Values: tensor.New(tensor.WithShape(len(rows), dim), tensor.WithBacking(vals))}
		require.NoError(t, tab.Step(o, g))
		clr := lr / (1 + float64(step-1)*decay)
		for k, r := range rows {
			for j := range dim {
				x := vals[k*dim+j]
				sum[r*dim+j] = sum[r*dim+j] + float64(x*x)
				std := float64(math.Sqrt(sum[r*dim+j])) + eps
				want[r*dim+j] = want[r*dim+j] + float64(-clr*float64(x/std))
			}
		}
	}
	assert.Equal(t, want, weights.Float64s())
	assert.Equal(t, sum, tab.State[0].Float64s())
	assert.Equal(t, w[dim:2*dim], weights.Float64s()[dim:2*dim], "row 1 is never named")
	assert.Equal(t, []float64{init, init, init}, tab.State[0].Float64s()[dim:2*dim])

	for _, bad := range []*SparseAdagrad{{LearnRate: 0.1}, {LearnRate: -1, Eps: 1e-10}, {LearnRate: 0.1, Eps: 1e-10, LRDecay: -1},
		{LearnRate: 0.1, Eps: 1e-10, InitialAccumulatorValue: math.NaN()}} {
		_, err := NewTable(weights, bad)
		if err == nil {
			err = bad.StepRows(Rows{Weight: weights, State: tab.State, Step: 1}, &RowGrad{Rows: []int{0}, Values: tensor.New(tensor.WithShape(1, dim), tensor.WithBacking(make([]float64, dim)))})
		}
		assert.ErrorIs(t, err, gather.ErrOption, "%+v", *bad)
	}
	assert.Equal(t, 1e-10, NewSparseAdagrad(0.1).Eps)
}
