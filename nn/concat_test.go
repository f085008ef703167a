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

// Concat equals gorgonia.Concat, value and gradients, on every axis of
// inputs of rank 1 to 3, float32 and float64; its gradient passes
// gradcheck in both machines.
func TestConcat(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	cases := []struct {
		shapes [][]int
		axis   int
	}{
		{[][]int{{3}, {5}, {1}}, 0},
		{[][]int{{4, 2}, {4, 3}, {4, 1}}, 1},
		{[][]int{{2, 3}, {5, 3}}, 0},
		{[][]int{{2, 3}, {1, 3}}, -2},
		{[][]int{{2, 3, 4}, {2, 1, 4}, {2, 2, 4}}, 1},
		{[][]int{{2, 3, 4}, {2, 3, 2}}, 2},
	}
	for _, c := range cases {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			var inputs []tensor.Tensor
			for _, s := range c.shapes {
				n := tensor.Shape(s).TotalSize()
				if dt == tensor.Float32 {
					v := make([]float32, n)
					for i := range v {
						v[i] = float32(r.NormFloat64())
					}
					inputs = append(inputs, tensor.New(tensor.WithShape(s...), tensor.WithBacking(v)))
				} else {
					v := make([]float64, n)
					for i := range v {
						v[i] = r.NormFloat64()
					}
					inputs = append(inputs, tensor.New(tensor.WithShape(s...), tensor.WithBacking(v)))
				}
			}
			// The same weighted sum of the concatenation, through each op.
			run := func(ours bool) (tensor.Tensor, []tensor.Tensor) {
				g := gorgonia.NewGraph()
				var xs []*gorgonia.Node
				for i, in := range inputs {
					xs = append(xs, gorgonia.NodeFromAny(g, in.Clone().(tensor.Tensor), gorgonia.WithName(string(rune('a'+i)))))
				}
				var out *gorgonia.Node
				var err error
				if ours {
					out, err = Concat(c.axis, xs...)
				} else {
					ax := c.axis
					if ax < 0 {
						ax += len(c.shapes[0])
					}
					out, err = gorgonia.Concat(ax, xs...)
				}
				require.NoError(t, err)
				w := gorgonia.NewTensor(g, dt, out.Dims(), gorgonia.WithShape(out.Shape()...), gorgonia.WithName("w"), gorgonia.WithInit(gorgonia.RangedFrom(1)))
				cost := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(out, w))))
				_, err = gorgonia.Grad(cost, xs...)
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
				return out.Value().(tensor.Tensor).Clone().(tensor.Tensor), grads
			}
			v1, g1 := run(true)
			v2, g2 := run(false)
			require.Equal(t, v2.Shape(), v1.Shape())
			require.Equal(t, v2.Data(), v1.Data(), "%v axis %d %v", c.shapes, c.axis, dt)
			for i := range g1 {
				require.Equal(t, g2[i].Data(), g1[i].Data(), "gradient %d, %v axis %d %v", i, c.shapes, c.axis, dt)
			}
			if dt == tensor.Float64 {
				for _, lisp := range []bool{false, true} {
					var opts []gradcheck.Option
					if lisp {
						opts = append(opts, gradcheck.WithLispMachine())
					}
					err := gradcheck.Check(func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) {
						out, err := Concat(c.axis, in...)
						if err != nil {
							return nil, err
						}
						return gorgonia.Sum(gorgonia.Must(gorgonia.Square(out)))
					}, inputs, opts...)
					require.NoError(t, err, "%v axis %d lisp %v", c.shapes, c.axis, lisp)
				}
			}
		}
	}
}

// Bad inputs are errors naming the problem.
func TestConcatErrors(t *testing.T) {
	g := gorgonia.NewGraph()
	a := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(2, 3), gorgonia.WithName("a"))
	b := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(3, 3), gorgonia.WithName("b"))
	c := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(2, 3), gorgonia.WithName("c"))
	i := gorgonia.NewMatrix(g, tensor.Int, gorgonia.WithShape(2, 3), gorgonia.WithName("i"))
	v := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(3), gorgonia.WithName("v"))
	for _, tc := range []struct {
		axis int
		xs   []*gorgonia.Node
		want error
	}{
		{1, []*gorgonia.Node{a, b}, gather.ErrShape}, {0, []*gorgonia.Node{a, c}, gather.ErrDtype},
		{0, []*gorgonia.Node{i, i}, gather.ErrDtype}, {2, []*gorgonia.Node{a, a}, gather.ErrAxisOutOfRange},
		{0, []*gorgonia.Node{a, v}, gather.ErrShape}, {0, nil, gather.ErrShape},
	} {
		_, err := Concat(tc.axis, tc.xs...)
		require.True(t, errors.Is(err, tc.want), "axis %d %v: %v", tc.axis, tc.xs, err)
	}
}
