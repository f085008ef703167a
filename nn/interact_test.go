package nn

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/gradcheck"
	"github.com/gathergrad/gather/internal/ref"
	"github.com/gathergrad/gather/internal/vmtest"
)

// DotInteraction matches the definition (x, then the strict upper
// triangle of the products of the f+1 vectors, row by row), float32 and
// float64, and its gradients pass gradcheck in both machines.
func TestDotInteraction(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 19))
	const n, d, f = 3, 4, 3
	x, s := ref.RandFloats(r, n*d), ref.RandFloats(r, n*f*d)
	w := d + (f+1)*f/2
	want := make([]float64, 0, n*w)
	for b := range n {
		vec := func(i int) []float64 {
			if i == 0 {
				return x[b*d : (b+1)*d]
			}
			return s[b*f*d+(i-1)*d : b*f*d+i*d]
		}
		want = append(want, vec(0)...)
		for i := range f + 1 {
			for j := i + 1; j <= f; j++ {
				var sum float64
				for t := range d {
					sum += vec(i)[t] * vec(j)[t]
				}
				want = append(want, sum)
			}
		}
	}
	for _, dt := range floatDtypes {
		g := gorgonia.NewGraph()
		xn := gorgonia.NodeFromAny(g, ref.FloatTensor(x, []int{n, d}, dt), gorgonia.WithName("x"))
		sn := gorgonia.NodeFromAny(g, ref.FloatTensor(s, []int{n, f * d}, dt), gorgonia.WithName("s"))
		out, err := DotInteraction(xn, sn)
		require.NoError(t, err)
		require.Equal(t, tensor.Shape{n, w}, out.Shape())
		vm := vmtest.New(t, g)
		require.NoError(t, vm.RunAll())
		vm.Close()
		assert.InEpsilonSlice(t, want, ref.Floats(out.Value().(*tensor.Dense)), 1e-5, "%v", dt)
	}
	build := func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) {
		o, err := DotInteraction(in[0], in[1])
		if err != nil {
			return nil, err
		}
		c := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(n, w), tensor.WithBacking(ref.RandFloats(rand.New(rand.NewPCG(1, 1)), n*w))), gorgonia.WithName("c"))
		return gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(o, c)))
	}
	for _, lisp := range []bool{false, true} {
		t.Run(fmt.Sprintf("gradcheck/lisp=%v", lisp), func(t *testing.T) {
			var opts []gradcheck.Option
			if lisp {
				opts = append(opts, gradcheck.WithLispMachine())
			}
			inputs := []tensor.Tensor{
				tensor.New(tensor.WithShape(n, d), tensor.WithBacking(append([]float64{}, x...))),
				tensor.New(tensor.WithShape(n, f*d), tensor.WithBacking(append([]float64{}, s...))),
			}
			require.NoError(t, gradcheck.Check(build, inputs, opts...))
		})
	}
	g := gorgonia.NewGraph()
	xn := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(3, 4), gorgonia.WithName("x"))
	bad := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(3, 10), gorgonia.WithName("s"))
	_, err := DotInteraction(xn, bad)
	require.ErrorIs(t, err, gather.ErrShape)
	s32 := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(3, 8), gorgonia.WithName("s32"))
	_, err = DotInteraction(xn, s32)
	require.ErrorIs(t, err, gather.ErrDtype)
}
