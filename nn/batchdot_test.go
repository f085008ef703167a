package nn

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gathergrad/gather/internal/vmtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/gradcheck"
	"github.com/gathergrad/gather/internal/ref"
)

// BatchDot matches the loop of its definition, float32 and float64, and
// its gradients pass gradcheck in both machines.
func TestBatchDot(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	const n, k, d = 3, 4, 5
	a, b := ref.RandFloats(r, n*d), ref.RandFloats(r, n*k*d)
	want := make([]float64, n*k)
	for i := range n {
		for j := range k {
			for s := range d {
				want[i*k+j] += a[i*d+s] * b[(i*k+j)*d+s]
			}
		}
	}
	for _, dt := range floatDtypes {
		g := gorgonia.NewGraph()
		an := gorgonia.NodeFromAny(g, ref.FloatTensor(a, []int{n, d}, dt), gorgonia.WithName("a"))
		bn := gorgonia.NodeFromAny(g, ref.FloatTensor(b, []int{n, k, d}, dt), gorgonia.WithName("b"))
		out, err := BatchDot(an, bn)
		require.NoError(t, err)
		vm := vmtest.New(t, g)
		require.NoError(t, vm.RunAll())
		vm.Close()
		assert.InEpsilonSlice(t, want, ref.Floats(out.Value().(*tensor.Dense)), 1e-5, "%v", dt)
	}
	build := func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) {
		s, err := BatchDot(in[0], in[1])
		if err != nil {
			return nil, err
		}
		w := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(n, k), tensor.WithBacking(ref.RandFloats(rand.New(rand.NewPCG(1, 1)), n*k))), gorgonia.WithName("w"))
		return gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(s, w)))
	}
	for _, lisp := range []bool{false, true} {
		t.Run(fmt.Sprintf("gradcheck/lisp=%v", lisp), func(t *testing.T) {
			var opts []gradcheck.Option
			if lisp {
				opts = append(opts, gradcheck.WithLispMachine())
			}
			inputs := []tensor.Tensor{
				tensor.New(tensor.WithShape(n, d), tensor.WithBacking(append([]float64{}, a...))),
				tensor.New(tensor.WithShape(n, k, d), tensor.WithBacking(append([]float64{}, b...))),
			}
			require.NoError(t, gradcheck.Check(build, inputs, opts...))
		})
	}
	g := gorgonia.NewGraph()
	an := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(3, 5), gorgonia.WithName("a"))
	bad := gorgonia.NewTensor(g, tensor.Float64, 3, gorgonia.WithShape(3, 4, 6), gorgonia.WithName("b"))
	_, err := BatchDot(an, bad)
	require.ErrorIs(t, err, gather.ErrShape)
	b32 := gorgonia.NewTensor(g, tensor.Float32, 3, gorgonia.WithShape(3, 4, 5), gorgonia.WithName("b32"))
	_, err = BatchDot(an, b32)
	require.ErrorIs(t, err, gather.ErrDtype)
}
