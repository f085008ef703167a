package optim

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
)

// param is a learnable with a settable gradient, as a bound node is.
type param struct {
	name string
	w, g *tensor.Dense
}

func (p param) Name() string                  { return p.name }
func (p param) Value() gorgonia.Value         { return p.w }
func (p param) Grad() (gorgonia.Value, error) { return p.g, nil }
func newParam(name string, w ...float64) param {
	return param{name, tensor.New(tensor.WithBacking(append([]float64(nil), w...))), tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(len(w)))}
}

// grads are the gradients of the reference runs, step by step.
var grads = [][]float64{{0.5, -1, 2}, {0.25, 0.5, -3}, {-1, 0, 1}, {2, -0.5, 0.75}}

// The dense optimisers follow PyTorch's update rules, written out here
// element by element in float64 as torch/optim's single-tensor code
// computes them.
func TestDenseOptimisersFollowPyTorch(t *testing.T) {
	w0 := []float64{1, -2, 0.5}
	type ref func(w, g []float64, step int)
	cases := map[string]struct {
		opt Dense
		ref func() ref
	}{
		"sgd momentum": {&SGD{LearnRate: 0.1, Momentum: 0.9, Dampening: 0.1, WeightDecay: 0.01}, func() ref {
			buf := make([]float64, 3)
			return func(w, g []float64, step int) {
				for i := range w {
					d := g[i] + 0.01*w[i]
					if step == 1 {
						buf[i] = d
					} else {
						buf[i] = 0.9*buf[i] + 0.9*d
					}
					w[i] -= 0.1 * buf[i]
				}
			}
		}},
		"sgd nesterov": {&SGD{LearnRate: 0.1, Momentum: 0.5, Nesterov: true}, func() ref {
			buf := make([]float64, 3)
			return func(w, g []float64, step int) {
				for i := range w {
					d := g[i]
					if step == 1 {
						buf[i] = d
					} else {
						buf[i] = 0.5*buf[i] + d
					}
					w[i] -= 0.1 * (d + 0.5*buf[i])
				}
			}
		}},
		"adam": {&Adam{LearnRate: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1}, func() ref {
			m, v := make([]float64, 3), make([]float64, 3)
			return func(w, g []float64, step int) {
				for i := range w {
					d := g[i] + 0.1*w[i]
					m[i] = 0.9*m[i] + 0.1*d
					v[i] = 0.999*v[i] + 0.001*d*d
					bc1, bc2 := 1-math.Pow(0.9, float64(step)), math.Sqrt(1-math.Pow(0.999, float64(step)))
					w[i] -= 0.01 / bc1 * m[i] / (math.Sqrt(v[i])/bc2 + 1e-8)
				}
			}
		}},
		"adamw": {NewAdamW(0.01), func() ref {
			m, v := make([]float64, 3), make([]float64, 3)
			return func(w, g []float64, step int) {
				for i := range w {
					w[i] *= 1 - 0.01*0.01
					m[i] = 0.9*m[i] + 0.1*g[i]
					v[i] = 0.999*v[i] + 0.001*g[i]*g[i]
					bc1, bc2 := 1-math.Pow(0.9, float64(step)), math.Sqrt(1-math.Pow(0.999, float64(step)))
					w[i] -= 0.01 / bc1 * m[i] / (math.Sqrt(v[i])/bc2 + 1e-8)
				}
			}
		}},
		"adagrad": {&Adagrad{LearnRate: 0.1, LRDecay: 0.5, WeightDecay: 0.01, Eps: 1e-10}, func() ref {
			s := make([]float64, 3)
			return func(w, g []float64, step int) {
				clr := 0.1 / (1 + float64(step-1)*0.5)
				for i := range w {
					d := g[i] + 0.01*w[i]
					s[i] += d * d
					w[i] -= clr * d / (math.Sqrt(s[i]) + 1e-10)
				}
			}
		}},
	}
	for name, c := range cases {
		p := newParam("w", w0...)
		want := append([]float64(nil), w0...)
		r := c.ref()
		for step, g := range grads {
			copy(p.g.Float64s(), g)
			require.NoError(t, c.opt.Step([]gorgonia.ValueGrad{p}), name)
			r(want, g, step+1)
			assert.InDeltaSlice(t, want, p.w.Float64s(), 1e-12, "%s step %d", name, step+1)
			assert.Equal(t, []float64{0, 0, 0}, p.g.Float64s(), "%s: the gradient is used and cleared", name)
		}
	}
}

// A checkpoint of a dense optimiser's state, loaded into a fresh one,
// steps on bit for bit as the original does.
func TestDenseStateResume(t *testing.T) {
	dir := t.TempDir()
	for name, mk := range map[string]func() Dense{
		"sgd":     func() Dense { return &SGD{LearnRate: 0.1, Momentum: 0.9} },
		"adam":    func() Dense { return NewAdam(0.01) },
		"adagrad": func() Dense { return NewAdagrad(0.1) },
	} {
		g := gorgonia.NewGraph()
		w := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(3), gorgonia.WithName("w"),
			gorgonia.WithValue(tensor.New(tensor.WithBacking([]float32{1, -2, 0.5}))))
		step := func(o Dense, node *gorgonia.Node, k int) {
			gr := make([]float32, 3)
			for i, v := range grads[k%len(grads)] {
				gr[i] = float32(v)
			}
			p := param{node.Name(), node.Value().(*tensor.Dense), tensor.New(tensor.WithBacking(gr))}
			require.NoError(t, o.Step([]gorgonia.ValueGrad{p}), name)
		}
		a := mk()
		for k := range 3 {
			step(a, w, k)
		}
		path := filepath.Join(dir, name+".safetensors")
		require.NoError(t, checkpoint.Save(path, nil, checkpoint.Nodes(w), DenseState("mlp", a, w)))
		for k := 3; k < 6; k++ {
			step(a, w, k)
		}

		g2 := gorgonia.NewGraph()
		w2 := gorgonia.NewVector(g2, tensor.Float32, gorgonia.WithShape(3), gorgonia.WithName("w"), gorgonia.WithInit(gorgonia.Zeroes()))
		b := mk()
		_, err := checkpoint.Load(path, checkpoint.Nodes(w2), DenseState("mlp", b, w2))
		require.NoError(t, err, name)
		for k := 3; k < 6; k++ {
			step(b, w2, k)
		}
		assert.Equal(t, w.Value().Data(), w2.Value().Data(), name)
	}
}

// Steps check everything first: a bad learnable, a non-finite gradient
// under CheckFinite or a bad hyper-parameter changes nothing.
func TestDenseRefuses(t *testing.T) {
	p, q := newParam("p", 1, 2, 3), newParam("q", 4, 5, 6)
	copy(p.g.Float64s(), []float64{1, 1, 1})
	copy(q.g.Float64s(), []float64{1, math.NaN(), 1})
	o := NewAdam(0.1)
	o.CheckFinite = true
	err := o.Step([]gorgonia.ValueGrad{p, q})
	require.ErrorIs(t, err, ErrNotFinite)
	assert.Contains(t, err.Error(), `"q"`)
	assert.Equal(t, []float64{1, 2, 3}, p.w.Float64s(), "p changed though q was refused")
	assert.Equal(t, []float64{1, 1, 1}, p.g.Float64s(), "a refused step clears no gradient")
	require.ErrorIs(t, o.Step([]gorgonia.ValueGrad{p, p}), gather.ErrOption, "one name twice")
	require.ErrorIs(t, (&SGD{LearnRate: 0.1, Nesterov: true}).Step([]gorgonia.ValueGrad{p}), gather.ErrOption)
	require.ErrorIs(t, (&Adam{LearnRate: 0.1, Beta1: 1}).Step([]gorgonia.ValueGrad{p}), gather.ErrOption)
	require.ErrorIs(t, (&Adagrad{LearnRate: -1}).Step([]gorgonia.ValueGrad{p}), gather.ErrOption)
	assert.Equal(t, []float64{1, 2, 3}, p.w.Float64s())
	// Once q's gradient is finite, the step goes ahead.
	q.g.Float64s()[1] = 0
	require.NoError(t, o.Step([]gorgonia.ValueGrad{p, q}))
	assert.NotEqual(t, []float64{1, 2, 3}, p.w.Float64s())
}

// The schedules give PyTorch's closed forms.
func TestSchedules(t *testing.T) {
	step, err := StepLR(2, 0.5)
	require.NoError(t, err)
	cos, err := CosineLR(10, 0.01)
	require.NoError(t, err)
	warm, err := WarmupLR(4, 0.25)
	require.NoError(t, err)
	both, err := Then(warm, 4, cos)
	require.NoError(t, err)
	for _, c := range []struct {
		s    Schedule
		e    int
		want float64
	}{
		{step, 0, 1}, {step, 1, 1}, {step, 2, 0.5}, {step, 5, 0.25},
		{cos, 0, 1}, {cos, 5, 0.505}, {cos, 10, 0.01},
		{warm, 0, 0.25}, {warm, 2, 0.625}, {warm, 4, 1}, {warm, 9, 1},
		{both, 1, 0.4375}, {both, 4, 1}, {both, 9, 0.505},
	} {
		assert.InDelta(t, c.want, c.s(1, c.e), 1e-12, "epoch %d", c.e)
	}
	for _, bad := range []error{
		func() error { _, err := StepLR(0, 0.5); return err }(),
		func() error { _, err := CosineLR(10, math.NaN()); return err }(),
		func() error { _, err := WarmupLR(4, 0); return err }(),
		func() error { _, err := Then(nil, 5, cos); return err }(),
		func() error { _, err := Then(warm, 5, nil); return err }(),
		func() error { _, err := Then(warm, -1, cos); return err }(),
	} {
		require.ErrorIs(t, bad, gather.ErrOption)
	}
	// A negative epoch is no epoch: NaN, which a step refuses.
	for _, s := range []Schedule{step, cos, warm, both} {
		lr := s(1, -1)
		require.True(t, math.IsNaN(lr), "epoch -1 gave %v", lr)
		require.ErrorIs(t, (&SparseSGD{LearnRate: lr}).StepRows(Rows{Weight: tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1, 2, 3, 4})), Step: 1},
			&RowGrad{Rows: []int64{0}, Values: tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float64{1, 1}))}), gather.ErrOption)
	}
}

// ClipGradNorm scales dense and row gradients by one factor, from their
// global norm, as clip_grad_norm_ does.
func TestClipGradNorm(t *testing.T) {
	p := newParam("p", 0, 0)
	copy(p.g.Float64s(), []float64{3, 0})
	rows := &RowGrad{Rows: []int64{2}, Values: tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float64{0, 4}))}
	norm, err := ClipGradNorm(1, []gorgonia.ValueGrad{p}, rows)
	require.NoError(t, err)
	assert.Equal(t, 5.0, norm)
	c := 1 / (5 + 1e-6)
	assert.InDeltaSlice(t, []float64{3 * c, 0}, p.g.Float64s(), 1e-15)
	assert.InDeltaSlice(t, []float64{0, 4 * c}, rows.Values.Float64s(), 1e-15)
	norm, err = ClipGradNorm(10, []gorgonia.ValueGrad{p}, rows)
	require.NoError(t, err)
	assert.InDelta(t, 1, norm, 1e-6)
	assert.InDeltaSlice(t, []float64{3 * c, 0}, p.g.Float64s(), 1e-15, "under the limit: unchanged")

	rows.Values.Float64s()[0] = math.Inf(1)
	_, err = ClipGradNorm(1, []gorgonia.ValueGrad{p}, rows)
	require.ErrorIs(t, err, ErrNotFinite)
	assert.InDeltaSlice(t, []float64{3 * c, 0}, p.g.Float64s(), 1e-15, "a refused clip scales nothing")
	_, err = ClipGradNorm(-1, nil)
	require.ErrorIs(t, err, gather.ErrOption)
}
