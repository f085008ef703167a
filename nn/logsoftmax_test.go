package nn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gathergrad/gather/internal/vmtest"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/gradcheck"
)

// logSoftmaxRef is log_softmax of x (shape shape) over axis in float64.
func logSoftmaxRef(x []float64, shape []int, axis int) []float64 {
	outer, n, inner := 1, shape[axis], 1
	for _, d := range shape[:axis] {
		outer *= d
	}
	for _, d := range shape[axis+1:] {
		inner *= d
	}
	out := make([]float64, len(x))
	for o := range outer {
		for i := range inner {
			m := math.Inf(-1)
			for j := range n {
				m = max(m, x[(o*n+j)*inner+i])
			}
			s := 0.0
			for j := range n {
				s += math.Exp(x[(o*n+j)*inner+i] - m)
			}
			for j := range n {
				out[(o*n+j)*inner+i] = x[(o*n+j)*inner+i] - m - math.Log(s)
			}
		}
	}
	return out
}

// LogSoftmax over every axis of shapes of rank 1 to 3, float32 and
// float64, matches a float64 reference (float32 within 4e-6 absolute:
// the inputs' log-probabilities lie within [-20, 0]); its gradient
// passes gradcheck in both machines.
func TestLogSoftmax(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, shape := range [][]int{{7}, {5, 19}, {33, 3}, {3, 4, 5}, {2, 1, 9}} {
		for axis := -len(shape); axis < len(shape); axis++ {
			for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
				size := 1
				for _, d := range shape {
					size *= d
				}
				x64 := make([]float64, size)
				for i := range x64 {
					x64[i] = 4 * r.NormFloat64()
				}
				var x tensor.Tensor = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(x64))
				tol := 1e-12
				if dt == tensor.Float32 {
					x32 := make([]float32, size)
					for i, v := range x64 {
						x32[i] = float32(v)
						x64[i] = float64(x32[i])
					}
					x, tol = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(x32)), 4e-6
				}
				ax := axis
				if ax < 0 {
					ax += len(shape)
				}
				want := logSoftmaxRef(x64, shape, ax)
				g := gorgonia.NewGraph()
				xn := gorgonia.NodeFromAny(g, x, gorgonia.WithName("x"))
				out, err := LogSoftmax(xn, axis)
				require.NoError(t, err)
				vm := vmtest.New(t, g)
				require.NoError(t, vm.RunAll())
				got := out.Value().(*tensor.Dense)
				for i := range want {
					v, _ := got.At(unravel(i, shape)...)
					f := toFloat64(v)
					require.InDelta(t, want[i], f, tol, "shape %v axis %d %v element %d", shape, axis, dt, i)
				}
				vm.Close()
				if dt == tensor.Float64 {
					for _, lisp := range []bool{false, true} {
						opts := []gradcheck.Option{}
						if lisp {
							opts = append(opts, gradcheck.WithLispMachine())
						}
						w := make([]float64, size)
						for i := range w {
							w[i] = r.NormFloat64()
						}
						err := gradcheck.Check(func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) {
							ls, err := LogSoftmax(in[0], axis)
							if err != nil {
								return nil, err
							}
							return gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(ls, in[1])))
						}, []tensor.Tensor{x, tensor.New(tensor.WithShape(shape...), tensor.WithBacking(w))}, opts...)
						require.NoError(t, err, "gradcheck shape %v axis %d lisp %v", shape, axis, lisp)
					}
				}
			}
		}
	}
}

func unravel(i int, shape []int) []int {
	c := make([]int, len(shape))
	for k := len(shape) - 1; k >= 0; k-- {
		c[k] = i % shape[k]
		i /= shape[k]
	}
	return c
}

func toFloat64(v any) float64 {
	switch v := v.(type) {
	case float32:
		return float64(v)
	case float64:
		return v
	}
	panic(fmt.Sprintf("%T", v))
}

// LogSoftmax then NLLLoss is CrossEntropy: loss and gradient to the
// logits, float32, within a few units in the last place.
func TestLogSoftmaxNLLIsCrossEntropy(t *testing.T) {
	const rows, classes = 300, 16
	r := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, rows*classes)
	for i := range x {
		x[i] = float32(3 * r.NormFloat64())
	}
	y := make([]int, rows)
	for i := range y {
		y[i] = r.IntN(classes)
	}
	run := func(fused bool) (float32, []float32) {
		g := gorgonia.NewGraph()
		xn := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(rows, classes), tensor.WithBacking(append([]float32(nil), x...))), gorgonia.WithName("x"))
		yn := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(rows), tensor.WithBacking(y)), gorgonia.WithName("y"))
		var loss *gorgonia.Node
		var err error
		if fused {
			loss, err = CrossEntropy(xn, yn)
		} else {
			ls, err2 := LogSoftmax(xn, -1)
			require.NoError(t, err2)
			loss, err = NLLLoss(ls, yn)
		}
		require.NoError(t, err)
		_, err = gorgonia.Grad(loss, xn)
		require.NoError(t, err)
		vm := vmtest.New(t, g)
		defer vm.Close()
		require.NoError(t, vm.RunAll())
		gv, err := xn.Grad()
		require.NoError(t, err)
		return loss.Value().Data().(float32), append([]float32(nil), gv.(*tensor.Dense).Float32s()...)
	}
	l1, g1 := run(true)
	l2, g2 := run(false)
	require.InEpsilon(t, l1, l2, 1e-6)
	for i := range g1 {
		require.InDelta(t, g1[i], g2[i], 1e-8, "gradient %d", i)
	}
}

// Bad inputs are errors naming the problem.
func TestLogSoftmaxErrors(t *testing.T) {
	g := gorgonia.NewGraph()
	m := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(2, 3), gorgonia.WithName("m"))
	s := gorgonia.NewScalar(g, tensor.Float32, gorgonia.WithName("s"))
	i := gorgonia.NewMatrix(g, tensor.Int, gorgonia.WithShape(2, 3), gorgonia.WithName("i"))
	for _, c := range []struct {
		x    *gorgonia.Node
		axis int
		want error
	}{
		{m, 2, gather.ErrAxisOutOfRange}, {m, -3, gather.ErrAxisOutOfRange}, {s, 0, gather.ErrShape},
		{i, 0, gather.ErrDtype}, {nil, 0, gather.ErrShape},
	} {
		_, err := LogSoftmax(c.x, c.axis)
		require.True(t, errors.Is(err, c.want), "%v axis %d: %v", c.x, c.axis, err)
	}
}
