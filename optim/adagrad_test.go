package optim

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
)

// RowWiseAdagrad follows its formula: one accumulator per row, the mean of
// the squared gradient (weight decay added), and refuses bad settings.
func TestRowWiseAdagradFormula(t *testing.T) {
	w := []float64{1, 2, 3, 4, 5, 6}
	weights := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking(append([]float64{}, w...)))
	g := &RowGrad{Rows: []int64{0, 2}, Values: tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{0.5, -1, 2, 0}))}
	o := &RowWiseAdagrad{LearnRate: 0.1, Eps: 1e-8, WeightDecay: 0.01}
	tab, err := NewMemoryTable(weights, o)
	require.NoError(t, err)
	s := []float64{0, 0, 0}
	want := append([]float64{}, w...)
	for range 3 {
		require.NoError(t, tab.Step(context.Background(), o, g))
		for k, r := range g.Rows {
			var sq float64
			x := make([]float64, 2)
			for j := range 2 {
				x[j] = g.Values.Float64s()[k*2+j] + 0.01*want[int(r)*2+j]
				sq += x[j] * x[j]
			}
			s[r] += sq / 2
			for j := range 2 {
				want[int(r)*2+j] -= 0.1 * x[j] / (math.Sqrt(s[r]) + 1e-8)
			}
		}
	}
	assert.Equal(t, want, weights.Float64s())
	assert.Equal(t, s, tab.State[0].Float64s())
	assert.Equal(t, int64(3), tab.Steps())
	assert.Equal(t, w[2:4], weights.Float64s()[2:4], "an untouched row stays")
	for _, bad := range []*RowWiseAdagrad{{LearnRate: -1, Eps: 1e-8}, {LearnRate: math.NaN(), Eps: 1e-8}, {LearnRate: 1}, {LearnRate: 1, Eps: 1e-8, WeightDecay: math.Inf(1)}} {
		require.ErrorIs(t, tab.Step(context.Background(), bad, g), gather.ErrOption)
	}
	assert.Equal(t, int64(3), tab.Steps(), "refused steps are not counted")
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
	tab, err := NewMemoryTable(weights, o)
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
		rows := []int64{0, int64(2 + step%3)}
		vals := make([]float64, len(rows)*dim)
		for i := range vals {
			vals[i] = math.Cos(float64(step*7+i)) * 1.3
		}
		g := &RowGrad{Rows: rows, Values: tensor.New(tensor.WithShape(len(rows), dim), tensor.WithBacking(vals))}
		require.NoError(t, tab.Step(context.Background(), o, g))
		clr := lr / (1 + float64(step-1)*decay)
		for k, r64 := range rows {
			r := int(r64)
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
		_, err := NewMemoryTable(weights, bad)
		if err == nil {
			err = bad.StepRows(Rows{Weight: weights, State: tab.State, Step: 1}, &RowGrad{Rows: []int64{0}, Values: tensor.New(tensor.WithShape(1, dim), tensor.WithBacking(make([]float64, dim)))})
		}
		assert.ErrorIs(t, err, gather.ErrOption, "%+v", *bad)
	}
	assert.Equal(t, 1e-10, NewSparseAdagrad(0.1).Eps)
}

// tableParam is a Param of a Table in memory.
type tableParam struct {
	name string
	tab  *MemoryTable
}

func (p tableParam) Name() string                          { return p.name }
func (p tableParam) Rows(opt Sparse) (*MemoryTable, error) { return p.tab, nil }

// SparseAdagrad's state, its sums and step count, saved after 3 steps and
// loaded into another table resumes to the bits of 6 steps uninterrupted,
// under PyTorch's keys.
func TestSparseAdagradResume(t *testing.T) {
	const vocab, dim = 7, 4
	o := &SparseAdagrad{LearnRate: 0.3, LRDecay: 0.05, InitialAccumulatorValue: 0.2, Eps: 1e-10}
	newTab := func() *MemoryTable {
		w := make([]float32, vocab*dim)
		for i := range w {
			w[i] = float32(math.Sin(float64(i)))
		}
		tab, err := NewMemoryTable(tensor.New(tensor.WithShape(vocab, dim), tensor.WithBacking(w)), o)
		require.NoError(t, err)
		return tab
	}
	grad := func(step int) *RowGrad {
		v := make([]float32, 2*dim)
		for i := range v {
			v[i] = float32(math.Cos(float64(step*3 + i)))
		}
		return &RowGrad{Rows: []int64{int64(step % 3), int64(3 + step%4)}, Values: tensor.New(tensor.WithShape(2, dim), tensor.WithBacking(v))}
	}
	a, b := newTab(), newTab()
	for s := range 3 {
		require.NoError(t, a.Step(context.Background(), o, grad(s)))
	}
	path := filepath.Join(t.TempDir(), "state.safetensors")
	require.NoError(t, checkpoint.Save(path, nil, State(tableParam{"emb", a}, o)))
	saved, _, err := checkpoint.Read(path)
	require.NoError(t, err)
	assert.Equal(t, []int{vocab, dim}, []int(saved["emb.sum"].Shape()))
	assert.Equal(t, int64(3), saved["emb.step"].Data())

	_, err = checkpoint.Load(path, State(tableParam{"emb", b}, NewSparseAdagrad(0.3)))
	require.NoError(t, err)
	copy(b.Weight.Float32s(), a.Weight.Float32s()) // the table's values travel as the embedding's own part
	for s := 3; s < 6; s++ {
		require.NoError(t, a.Step(context.Background(), o, grad(s)))
		require.NoError(t, b.Step(context.Background(), o, grad(s)))
	}
	assert.Equal(t, a.Weight.Float32s(), b.Weight.Float32s())
	assert.Equal(t, a.State[0].Float32s(), b.State[0].Float32s())
	assert.Equal(t, int64(6), b.Steps())
}
