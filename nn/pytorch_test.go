package nn

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/gathergrad/gather/internal/vmtest"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/ref"
)

// lossCase is one case of testdata/losses.json, written by
// testdata/losses.py from PyTorch 1.13.
type lossCase struct {
	Kind      string   `json:"kind"` // ce, nll, bce
	Name      string   `json:"name"`
	Dtype     string   `json:"dtype"`
	Shape     []int    `json:"shape"`
	X         []string `json:"x"`
	Y         []string `json:"y"`       // bce
	Targets   []int    `json:"targets"` // ce, nll
	Up        []string `json:"up"`
	Loss      []string `json:"loss"`
	Grad      []string `json:"grad"`
	Reduction string   `json:"reduction"`
	Ignore    *int     `json:"ignore"`
	Weights   []string `json:"weights"`
	Smoothing float64  `json:"smoothing"`
	PosWeight []string `json:"pos_weight"`
}

func parseFloats(t *testing.T, s []string) []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		f, err := strconv.ParseFloat(v, 64)
		require.NoError(t, err)
		out[i] = f
	}
	return out
}

// The losses match PyTorch 1.13's values and gradients, float32 and
// float64, every option alone and together, every reduction, logits up to
// 1e4, in both of Gorgonia's machines. The upstream gradient is PyTorch's
// (1.7 for a scalar loss, random for ReduceNone).
func TestLossesMatchPyTorch(t *testing.T) {
	raw, err := os.ReadFile("testdata/losses.json")
	require.NoError(t, err)
	var file struct {
		Cases []lossCase `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(raw, &file))
	require.NotEmpty(t, file.Cases)
	for _, c := range file.Cases {
		for _, lisp := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/%s/%s/lisp=%v", c.Kind, c.Name, c.Dtype, lisp), func(t *testing.T) {
				loss, grad := runPyTorchCase(t, c, lisp)
				dt := tensor.Float64
				tol := 1e-10
				if c.Dtype == "float32" {
					dt, tol = tensor.Float32, 3e-5
				}
				_ = dt
				closeOrBothNaN(t, "loss", parseFloats(t, c.Loss), loss, tol)
				closeOrBothNaN(t, "gradient", parseFloats(t, c.Grad), grad, tol)
			})
		}
	}
}

// closeOrBothNaN fails t unless got[i] is within tol × max(1, |want[i]|)
// of want[i], or both are NaN, or both the same infinity.
func closeOrBothNaN(t *testing.T, what string, want, got []float64, tol float64) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		w, g := want[i], got[i]
		if math.IsNaN(w) || math.IsNaN(g) || math.IsInf(w, 0) {
			if !(math.IsNaN(w) && math.IsNaN(g)) && w != g {
				t.Fatalf("%s[%d] = %v, want %v", what, i, g, w)
			}
			continue
		}
		if math.Abs(w-g) > tol*math.Max(1, math.Abs(w)) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, g, w)
		}
	}
}

// runPyTorchCase builds the case's loss, runs it with its upstream
// gradient and returns the loss's values and the gradient of x.
func runPyTorchCase(t *testing.T, c lossCase, lisp bool) (loss, grad []float64) {
	dt := tensor.Float64
	if c.Dtype == "float32" {
		dt = tensor.Float32
	}
	g := gorgonia.NewGraph()
	xn := gorgonia.NodeFromAny(g, ref.FloatTensor(parseFloats(t, c.X), c.Shape, dt), gorgonia.WithName("x"))
	var opts []any
	switch c.Reduction {
	case "sum":
		opts = append(opts, WithReduction(ReduceSum))
	case "none":
		opts = append(opts, WithReduction(ReduceNone))
	}
	var out *gorgonia.Node
	var err error
	if c.Kind == "bce" {
		yn := gorgonia.NodeFromAny(g, ref.FloatTensor(parseFloats(t, c.Y), c.Shape, dt), gorgonia.WithName("y"))
		if c.PosWeight != nil {
			opts = append(opts, WithPosWeight(ref.FloatTensor(parseFloats(t, c.PosWeight), []int{len(c.PosWeight)}, dt)))
		}
		out, err = BCEWithLogits(xn, yn, optionsOf[BCEOption](opts)...)
	} else {
		ys := make([]int64, len(c.Targets))
		for i, v := range c.Targets {
			ys[i] = int64(v)
		}
		yn := gorgonia.NodeFromAny(g, ref.CastIndices(ys, c.Shape[:len(c.Shape)-1], tensor.Int64), gorgonia.WithName("y"))
		if c.Ignore != nil {
			opts = append(opts, WithIgnoreIndex(*c.Ignore))
		}
		if c.Weights != nil {
			opts = append(opts, WithClassWeights(ref.FloatTensor(parseFloats(t, c.Weights), []int{len(c.Weights)}, dt)))
		}
		if c.Smoothing != 0 {
			opts = append(opts, WithLabelSmoothing(c.Smoothing))
		}
		if c.Kind == "ce" {
			out, err = CrossEntropy(xn, yn, optionsOf[CrossEntropyOption](opts)...)
		} else {
			out, err = NLLLoss(xn, yn, optionsOf[NLLLossOption](opts)...)
		}
	}
	require.NoError(t, err)
	up := parseFloats(t, c.Up)
	var cost *gorgonia.Node
	if out.IsScalar() {
		upn := gorgonia.NodeFromAny(g, scalarOf(dt, up[0]), gorgonia.WithName("up"))
		cost = gorgonia.Must(gorgonia.Mul(out, upn))
	} else {
		upn := gorgonia.NodeFromAny(g, ref.FloatTensor(up, out.Shape(), dt), gorgonia.WithName("up"))
		cost = gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(out, upn))))
	}
	var vm gorgonia.VM
	if lisp {
		vm = gorgonia.NewLispMachine(g)
	} else {
		_, err = gorgonia.Grad(cost, xn)
		require.NoError(t, err)
		vm = vmtest.New(t, g)
	}
	defer vm.Close()
	require.NoError(t, vm.RunAll())
	gv, err := xn.Grad()
	require.NoError(t, err)
	return valuesOf(out.Value()), ref.Floats(gv.(*tensor.Dense))
}

// scalarOf returns v as a Gorgonia scalar value of dtype dt.
func scalarOf(dt tensor.Dtype, v float64) gorgonia.Value {
	if dt == tensor.Float32 {
		return gorgonia.NewF32(float32(v))
	}
	return gorgonia.NewF64(v)
}

// valuesOf returns a scalar or tensor value's elements as float64.
func valuesOf(v gorgonia.Value) []float64 {
	switch x := v.(type) {
	case *tensor.Dense:
		return ref.Floats(x)
	case *gorgonia.F32:
		return []float64{float64(*x)}
	case *gorgonia.F64:
		return []float64{float64(*x)}
	}
	panic(fmt.Sprintf("valuesOf: %T", v))
}
