package nn

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/gathergrad/gather/internal/vmtest"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/gradcheck"
)

func randTensor(r *rand.Rand, dt tensor.Dtype, shape ...int) tensor.Tensor {
	n := tensor.Shape(shape).TotalSize()
	if dt == tensor.Float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = r.NormFloat64()
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
}

// Linear equals x·Wᵀ + b built from Gorgonia's Mul, Transpose and
// BroadcastAdd, value and gradients of x, w and b, with and without a
// bias, float32 and float64; gradcheck passes in both machines.
func TestLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		for _, bias := range []bool{true, false} {
			const n, in, out = 7, 5, 3
			inputs := []tensor.Tensor{randTensor(r, dt, n, in), randTensor(r, dt, out, in)}
			if bias {
				inputs = append(inputs, randTensor(r, dt, out))
			}
			run := func(ours bool) (tensor.Tensor, []tensor.Tensor) {
				g := gorgonia.NewGraph()
				var xs []*gorgonia.Node
				for i, v := range inputs {
					xs = append(xs, gorgonia.NodeFromAny(g, v.Clone().(tensor.Tensor), gorgonia.WithName(string(rune('a'+i)))))
				}
				var y *gorgonia.Node
				if ours {
					var b *gorgonia.Node
					if bias {
						b = xs[2]
					}
					var err error
					y, err = Linear(xs[0], xs[1], b)
					require.NoError(t, err)
				} else {
					y = gorgonia.Must(gorgonia.Mul(xs[0], gorgonia.Must(gorgonia.Transpose(xs[1]))))
					if bias {
						y = gorgonia.Must(gorgonia.BroadcastAdd(y, xs[2], nil, []byte{0}))
					}
				}
				var yv gorgonia.Value
				gorgonia.Read(y, &yv)
				wt := gorgonia.NewMatrix(g, dt, gorgonia.WithShape(n, out), gorgonia.WithName("wt"), gorgonia.WithInit(gorgonia.RangedFrom(1)))
				_, err := gorgonia.Grad(gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(y, wt)))), xs...)
				require.NoError(t, err)
				vm := vmtest.New(t, g)
				defer vm.Close()
				require.NoError(t, vm.RunAll())
				var grads []tensor.Tensor
				for _, x := range xs {
					gv, err := x.Grad()
					require.NoError(t, err)
					grads = append(grads, gv.(tensor.Tensor).Clone().(tensor.Tensor))
				}
				return yv.(tensor.Tensor).Clone().(tensor.Tensor), grads
			}
			y1, g1 := run(true)
			y2, g2 := run(false)
			tol := 1e-12
			if dt == tensor.Float32 {
				tol = 1e-4
			}
			near := func(a, b tensor.Tensor, what string) {
				av, bv := a.Data(), b.Data()
				switch av := av.(type) {
				case []float32:
					for i := range av {
						require.InDelta(t, bv.([]float32)[i], av[i], tol, "%s %d", what, i)
					}
				case []float64:
					for i := range av {
						require.InDelta(t, bv.([]float64)[i], av[i], tol, "%s %d", what, i)
					}
				}
			}
			near(y1, y2, "output")
			for i := range g1 {
				require.Equal(t, g2[i].Shape(), g1[i].Shape())
				near(g1[i], g2[i], "gradient "+string(rune('a'+i)))
			}
			if dt == tensor.Float64 {
				for _, lisp := range []bool{false, true} {
					var opts []gradcheck.Option
					if lisp {
						opts = append(opts, gradcheck.WithLispMachine())
					}
					err := gradcheck.Check(func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) {
						var b *gorgonia.Node
						if bias {
							b = in[2]
						}
						y, err := Linear(in[0], in[1], b)
						if err != nil {
							return nil, err
						}
						return gorgonia.Sum(gorgonia.Must(gorgonia.Square(y)))
					}, inputs, opts...)
					require.NoError(t, err, "bias %v lisp %v", bias, lisp)
				}
			}
		}
	}
}

// Bad inputs are errors naming the problem.
func TestLinearErrors(t *testing.T) {
	g := gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(4, 3), gorgonia.WithName("x"))
	w := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(2, 3), gorgonia.WithName("w"))
	wBad := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(3, 2), gorgonia.WithName("wBad"))
	b := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(3), gorgonia.WithName("b"))
	w64 := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(2, 3), gorgonia.WithName("w64"))
	b64 := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(2), gorgonia.WithName("b64"))
	for _, c := range []struct {
		x, w, b *gorgonia.Node
		want    error
	}{
		{x, wBad, nil, gather.ErrShape}, {x, w, b, gather.ErrShape}, {x, w64, nil, gather.ErrDtype}, {nil, w, nil, gather.ErrShape},
		{x, w, b64, gather.ErrDtype},
	} {
		_, err := Linear(c.x, c.w, c.b)
		require.True(t, errors.Is(err, c.want), "%v", err)
	}
}
