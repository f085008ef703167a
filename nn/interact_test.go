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

// interactRef is the dot interaction as the peers build it: Z = T·Tᵀ of
// the f+1 vectors (x first), then x and Z[b, li[k], lj[k]] for their
// index lists li, lj.
func interactRef(x, s []float64, n, d, f int, li, lj []int) []float64 {
	var out []float64
	for b := range n {
		vec := func(i int) []float64 {
			if i == 0 {
				return x[b*d : (b+1)*d]
			}
			return s[b*f*d+(i-1)*d : b*f*d+i*d]
		}
		out = append(out, vec(0)...)
		for k := range li {
			var sum float64
			for t := range d {
				sum += vec(li[k])[t] * vec(lj[k])[t]
			}
			out = append(out, sum)
		}
	}
	return out
}

// The index lists of facebookresearch/dlrm's interact_features (li = [i
// for i in range(ni) for j in range(i)], lj = [j for i in range(nj) for j
// in range(i)]) and of TorchRec's InteractionArch
// (torch.triu_indices(f+1, f+1, offset=1)) for f+1 vectors.
func dlrmIndices(f int) (li, lj []int) {
	for i := range f + 1 {
		for j := range i {
			li, lj = append(li, i), append(lj, j)
		}
	}
	return li, lj
}

func torchRecIndices(f int) (li, lj []int) {
	for i := range f + 1 {
		for j := i + 1; j <= f; j++ {
			li, lj = append(li, i), append(lj, j)
		}
	}
	return li, lj
}

// DotInteraction gives facebookresearch/dlrm's order by default and
// TorchRec's with WithTorchRecOrder, each against the peer's own index
// lists, with 5 features (where the orders differ), float32 and float64;
// its gradients pass gradcheck in both orders and both machines.
func TestDotInteraction(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 19))
	const n, d, f = 3, 4, 5
	x, s := ref.RandFloats(r, n*d), ref.RandFloats(r, n*f*d)
	w := d + (f+1)*f/2
	dl, dj := dlrmIndices(f)
	tl, tj := torchRecIndices(f)
	orders := []struct {
		name string
		opts []InteractionOption
		want []float64
	}{
		{"dlrm", nil, interactRef(x, s, n, d, f, dl, dj)},
		{"torchrec", []InteractionOption{WithTorchRecOrder()}, interactRef(x, s, n, d, f, tl, tj)},
	}
	for _, o := range orders {
		for _, dt := range floatDtypes {
			g := gorgonia.NewGraph()
			xn := gorgonia.NodeFromAny(g, ref.FloatTensor(x, []int{n, d}, dt), gorgonia.WithName("x"))
			sn := gorgonia.NodeFromAny(g, ref.FloatTensor(s, []int{n, f * d}, dt), gorgonia.WithName("s"))
			out, err := DotInteraction(xn, sn, o.opts...)
			require.NoError(t, err)
			require.Equal(t, tensor.Shape{n, w}, out.Shape())
			vm := vmtest.New(t, g)
			require.NoError(t, vm.RunAll())
			vm.Close()
			assert.InEpsilonSlice(t, o.want, ref.Floats(out.Value().(*tensor.Dense)), 1e-5, "%s %v", o.name, dt)
		}
	}
	for _, o := range orders {
		build := func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) {
			out, err := DotInteraction(in[0], in[1], o.opts...)
			if err != nil {
				return nil, err
			}
			c := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(n, w), tensor.WithBacking(ref.RandFloats(rand.New(rand.NewPCG(1, 1)), n*w))), gorgonia.WithName("c"))
			return gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(out, c)))
		}
		for _, lisp := range []bool{false, true} {
			t.Run(fmt.Sprintf("gradcheck/%s/lisp=%v", o.name, lisp), func(t *testing.T) {
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
