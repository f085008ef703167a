package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gathergrad/gather/internal/vmtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/gradcheck"
)

// Weights of the wrong shape or dtype and a smoothing outside [0, 1] are
// errors when the graph is built (an option that does not apply does
// not compile: TestOptionTypes).
func TestLossOptionErrors(t *testing.T) {
	g := gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(4, 3), gorgonia.WithName("x"))
	y := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(4), gorgonia.WithName("y"))
	yf := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(4, 3), gorgonia.WithName("yf"))
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"smoothing above 1", func() error { _, err := CrossEntropy(x, y, WithLabelSmoothing(1.5)); return err }, gather.ErrOption},
		{"smoothing negative", func() error { _, err := CrossEntropy(x, y, WithLabelSmoothing(-0.1)); return err }, gather.ErrOption},
		{"smoothing NaN", func() error { _, err := CrossEntropy(x, y, WithLabelSmoothing(math.NaN())); return err }, gather.ErrOption},
		{"unknown reduction", func() error { _, err := CrossEntropy(x, y, WithReduction(7)); return err }, gather.ErrOption},
		{"weights too short", func() error {
			_, err := CrossEntropy(x, y, WithClassWeights(tensor.New(tensor.WithBacking([]float64{1, 2}))))
			return err
		}, gather.ErrShape},
		{"weights of another dtype", func() error {
			_, err := NLLLoss(x, y, WithClassWeights(tensor.New(tensor.WithBacking([]float32{1, 2, 3}))))
			return err
		}, gather.ErrDtype},
		{"weights nil", func() error { _, err := CrossEntropy(x, y, WithClassWeights(nil)); return err }, gather.ErrShape},
		{"pos weight of another shape", func() error {
			_, err := BCEWithLogits(x, yf, WithPosWeight(tensor.New(tensor.WithBacking([]float64{1, 2, 3, 4}))))
			return err
		}, gather.ErrShape},
		{"BCE targets of another shape", func() error {
			_, err := BCEWithLogits(x, gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(12), gorgonia.WithName("v")), nil...)
			return err
		}, gather.ErrShape},
		{"BCE integer targets", func() error {
			_, err := BCEWithLogits(x, gorgonia.NewMatrix(g, tensor.Int, gorgonia.WithShape(4, 3), gorgonia.WithName("yi")))
			return err
		}, gather.ErrDtype},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			require.ErrorIs(t, err, c.want)
		})
	}
}

// Targets out of range with WithIgnoreIndex are still errors, unless they
// equal the ignored index.
func TestIgnoreIndexChecksOtherTargets(t *testing.T) {
	x := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}))
	for _, c := range []struct {
		targets []int
		ok      bool
	}{{[]int{0, -100, 1}, true}, {[]int{0, -1, 1}, false}, {[]int{2, -100, 1}, false}} {
		g := gorgonia.NewGraph()
		xn := gorgonia.NodeFromAny(g, x.Clone(), gorgonia.WithName("x"))
		yn := gorgonia.NodeFromAny(g, tensor.New(tensor.WithBacking(c.targets)), gorgonia.WithName("y"))
		loss, err := CrossEntropy(xn, yn, WithIgnoreIndex(-100))
		require.NoError(t, err)
		vm := vmtest.New(t, g)
		err = vm.RunAll()
		vm.Close()
		if c.ok {
			require.NoError(t, err)
			assert.False(t, math.IsNaN(loss.Value().Data().(float64)))
		} else {
			require.ErrorIs(t, gather.Cause(err), gather.ErrIndexOutOfRange, "%v", c.targets)
		}
	}
}

// gradcheck of every loss with every combination of its options, in both
// machines. ReduceNone losses are weighed by fixed values before the sum,
// so that each example's gradient is checked on its own.
func TestLossOptionsGradCheck(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const rows, classes = 5, 4
	x := make([]float64, rows*classes)
	for i := range x {
		x[i] = 2 * r.NormFloat64()
	}
	targets := []int{0, 3, -100, 2, 1}
	soft := make([]float64, rows*classes)
	for i := range soft {
		soft[i] = r.Float64()
	}
	w := tensor.New(tensor.WithBacking([]float64{0.5, 2, 1, 1.5}))
	reductions := []Reduction{ReduceMean, ReduceSum, ReduceNone}
	type variant struct {
		name string
		opts []any // each the option type of kind's loss
		kind string
	}
	var vs []variant
	for _, red := range reductions {
		for mask := range 8 {
			opts := []any{WithReduction(red), WithIgnoreIndex(-100)}
			name := fmt.Sprintf("%v/ignore", red)
			if mask&1 != 0 {
				opts, name = append(opts, WithClassWeights(w)), name+"+weights"
			}
			if mask&2 != 0 {
				opts, name = append(opts, WithLabelSmoothing(0.3)), name+"+smoothing"
			}
			vs = append(vs, variant{"ce/" + name, opts, "ce"})
			if mask&2 == 0 && mask&4 == 0 {
				vs = append(vs, variant{"nll/" + name, opts, "nll"})
			}
		}
		vs = append(vs, variant{fmt.Sprintf("bce/%v", red), []any{WithReduction(red)}, "bce"},
			variant{fmt.Sprintf("bce/%v/pos", red), []any{WithReduction(red), WithPosWeight(tensor.New(tensor.WithBacking([]float64{0.5, 3, 1, 2})))}, "bce"})
	}
	for _, v := range vs {
		build := func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) {
			var loss *gorgonia.Node
			var err error
			switch v.kind {
			case "ce":
				loss, err = CrossEntropy(in[0], in[1], optionsOf[CrossEntropyOption](v.opts)...)
			case "nll":
				loss, err = NLLLoss(in[0], in[1], optionsOf[NLLLossOption](v.opts)...)
			default:
				// The targets are a constant of the graph: gradcheck
				// differentiates every float input, and BCE's targets get
				// no gradient.
				yn := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(rows, classes), tensor.WithBacking(append([]float64{}, soft...))), gorgonia.WithName("y"))
				loss, err = BCEWithLogits(in[0], yn, optionsOf[BCEOption](v.opts)...)
			}
			if err != nil || loss.IsScalar() {
				return loss, err
			}
			weigh := make([]float64, loss.Shape().TotalSize())
			for i := range weigh {
				weigh[i] = float64(i%3) + 0.5
			}
			wn := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(loss.Shape().Clone()...), tensor.WithBacking(weigh)), gorgonia.WithName("weigh"))
			return gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(loss, wn)))
		}
		for _, lisp := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/lisp=%v", v.name, lisp), func(t *testing.T) {
				inputs := []tensor.Tensor{tensor.New(tensor.WithShape(rows, classes), tensor.WithBacking(append([]float64{}, x...)))}
				if v.kind != "bce" {
					inputs = append(inputs, tensor.New(tensor.WithBacking(append([]int{}, targets...))))
				}
				var opts []gradcheck.Option
				if lisp {
					opts = append(opts, gradcheck.WithLispMachine())
				}
				require.NoError(t, gradcheck.Check(build, inputs, opts...))
			})
		}
	}
}

// optionsOf returns opts as options of type O (each must be one).
func optionsOf[O any](opts []any) []O {
	out := make([]O, len(opts))
	for k, o := range opts {
		out[k] = o.(O)
	}
	return out
}

// Each With function's option is of the functions it applies to, and of
// no other: an option given to a function it does not apply to does not
// compile, and no assertion makes it one.
func TestOptionTypes(t *testing.T) {
	w := tensor.New(tensor.WithBacking([]float64{1}))
	type kinds struct{ newEmb, open, bag, bagMethod, ce, nll, bce, mse bool }
	of := func(o any) kinds {
		_, a := o.(NewEmbeddingOption)
		_, b := o.(OpenOption)
		_, c := o.(EmbeddingBagOption)
		_, d := o.(BagOption)
		_, e := o.(CrossEntropyOption)
		_, f := o.(NLLLossOption)
		_, g := o.(BCEOption)
		_, h := o.(MSEOption)
		return kinds{a, b, c, d, e, f, g, h}
	}
	for name, c := range map[string]struct {
		o    any
		want kinds
	}{
		"WithInit":              {WithInit(nil), kinds{newEmb: true}},
		"WithWeights":           {WithWeights(w), kinds{newEmb: true}},
		"WithSeed":              {WithSeed(1), kinds{newEmb: true}},
		"WithSparse":            {WithSparse(), kinds{newEmb: true, open: true}},
		"WithMaxNorm":           {WithMaxNorm(1), kinds{newEmb: true, open: true}},
		"WithPadding":           {WithPadding(0), kinds{newEmb: true, open: true, bag: true}},
		"WithFrozen":            {WithFrozen(), kinds{newEmb: true, open: true, bag: true}},
		"WithScaleGradByFreq":   {WithScaleGradByFreq(), kinds{newEmb: true, open: true, bag: true}},
		"WithIncludeLastOffset": {WithIncludeLastOffset(), kinds{bag: true, bagMethod: true}},
		"WithLabelSmoothing":    {WithLabelSmoothing(0), kinds{ce: true}},
		"WithIgnoreIndex":       {WithIgnoreIndex(0), kinds{ce: true, nll: true}},
		"WithClassWeights":      {WithClassWeights(w), kinds{ce: true, nll: true}},
		"WithPosWeight":         {WithPosWeight(w), kinds{bce: true}},
		"WithReduction":         {WithReduction(ReduceSum), kinds{ce: true, nll: true, bce: true, mse: true}},
	} {
		if got := of(c.o); got != c.want {
			t.Errorf("%s applies to %+v, want %+v", name, got, c.want)
		}
	}
}
