package nn

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/gradcheck"
)

// MSELoss equals (x - y)² summed, averaged or per element, float32 and
// float64, as F.mse_loss computes it; its gradients with respect to
// input and target pass gradcheck on both machines, for each reduction.
func TestMSELoss(t *testing.T) {
	x := []float64{1.5, -2, 0.25, 3, 4, -1}
	y := []float64{1, 0, 0.5, 2.5, 4, 1}
	var sq []float64
	var sum float64
	for i := range x {
		d := x[i] - y[i]
		sq = append(sq, d*d)
		sum += d * d
	}
	for _, c := range []struct {
		red  Reduction
		want []float64
	}{{ReduceMean, []float64{sum / 6}}, {ReduceSum, []float64{sum}}, {ReduceNone, sq}} {
		for _, dt := range floatDtypes {
			t.Run(fmt.Sprintf("%v/%v", c.red, dt), func(t *testing.T) {
				g := gorgonia.NewGraph()
				xn := gorgonia.NewMatrix(g, dt, gorgonia.WithShape(2, 3), gorgonia.WithName("x"), gorgonia.WithValue(denseOf(dt, []int{2, 3}, x)))
				yn := gorgonia.NewMatrix(g, dt, gorgonia.WithShape(2, 3), gorgonia.WithName("y"), gorgonia.WithValue(denseOf(dt, []int{2, 3}, y)))
				l, err := MSELoss(xn, yn, WithReduction(c.red))
				require.NoError(t, err)
				vm := gorgonia.NewTapeMachine(g)
				require.NoError(t, vm.RunAll())
				vm.Close()
				got := floats64(l.Value())
				require.Len(t, got, len(c.want))
				for i := range got {
					require.InDelta(t, c.want[i], got[i], 1e-6*(1+math.Abs(c.want[i])))
				}
			})
		}
		build := func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) {
			l, err := MSELoss(in[0], in[1], WithReduction(c.red))
			if err != nil || c.red != ReduceNone {
				return l, err
			}
			w := gorgonia.NewMatrix(g, in[0].Dtype(), gorgonia.WithShape(2, 3), gorgonia.WithName("w"), gorgonia.WithInit(gorgonia.RangedFrom(1)))
			return Sum(gorgonia.Must(gorgonia.HadamardProd(l, w)), false)
		}
		for _, lisp := range []bool{false, true} {
			var opts []gradcheck.Option
			if lisp {
				opts = append(opts, gradcheck.WithLispMachine())
			}
			inputs := []tensor.Tensor{denseOf(tensor.Float64, []int{2, 3}, x), denseOf(tensor.Float64, []int{2, 3}, y)}
			require.NoError(t, gradcheck.Check(build, inputs, opts...), "%v lisp=%v", c.red, lisp)
		}
	}
	g := gorgonia.NewGraph()
	a := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(2, 3), gorgonia.WithName("a"))
	b := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(3, 2), gorgonia.WithName("b"))
	_, err := MSELoss(a, b)
	require.ErrorIs(t, err, gather.ErrShape)
	_, err = MSELoss(a, a, nil)
	require.ErrorIs(t, err, gather.ErrOption)
}

// RowDot is Σ_t a[i][t]·b[i][t] for each row, float32 and float64, and
// its gradients pass gradcheck on both machines; shapes that differ are
// refused.
func TestRowDot(t *testing.T) {
	a := []float64{1, 2, 3, -1, 0.5, 2}
	b := []float64{0.5, -1, 2, 3, 4, -0.25}
	want := []float64{1*0.5 - 2 + 6, -3 + 2 - 0.5}
	for _, dt := range floatDtypes {
		g := gorgonia.NewGraph()
		an := gorgonia.NewMatrix(g, dt, gorgonia.WithShape(2, 3), gorgonia.WithName("a"), gorgonia.WithValue(denseOf(dt, []int{2, 3}, a)))
		bn := gorgonia.NewMatrix(g, dt, gorgonia.WithShape(2, 3), gorgonia.WithName("b"), gorgonia.WithValue(denseOf(dt, []int{2, 3}, b)))
		out, err := RowDot(an, bn)
		require.NoError(t, err)
		require.Equal(t, tensor.Shape{2}, out.Shape())
		vm := gorgonia.NewTapeMachine(g)
		require.NoError(t, vm.RunAll())
		vm.Close()
		got := floats64(out.Value())
		for i := range want {
			require.InDelta(t, want[i], got[i], 1e-6)
		}
	}
	build := func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) {
		out, err := RowDot(in[0], in[1])
		if err != nil {
			return nil, err
		}
		w := gorgonia.NewVector(g, in[0].Dtype(), gorgonia.WithShape(2), gorgonia.WithName("w"), gorgonia.WithInit(gorgonia.RangedFrom(2)))
		return Sum(gorgonia.Must(gorgonia.HadamardProd(out, w)), false)
	}
	for _, lisp := range []bool{false, true} {
		var opts []gradcheck.Option
		if lisp {
			opts = append(opts, gradcheck.WithLispMachine())
		}
		require.NoError(t, gradcheck.Check(build, []tensor.Tensor{denseOf(tensor.Float64, []int{2, 3}, a), denseOf(tensor.Float64, []int{2, 3}, b)}, opts...))
	}
	g := gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(2, 3), gorgonia.WithName("x"))
	y := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(2, 4), gorgonia.WithName("y"))
	_, err := RowDot(x, y)
	require.ErrorIs(t, err, gather.ErrShape)
}

// Grad's errors for the two calls Gorgonia answers misleadingly on a
// sparse table (its empty Learnables, its Table node) name GradNodes; the
// call with GradNodes works.
func TestGradNamesGradNodes(t *testing.T) {
	g := gorgonia.NewGraph()
	emb, err := NewEmbedding(g, "emb", 5, 2, tensor.Float32, WithSparse())
	require.NoError(t, err)
	ids := gorgonia.NewVector(g, tensor.Int64, gorgonia.WithShape(3), gorgonia.WithName("ids"), gorgonia.WithValue(tensor.New(tensor.WithBacking([]int64{0, 2, 2}))))
	out, err := emb.Lookup(ids)
	require.NoError(t, err)
	loss, err := Sum(out, false)
	require.NoError(t, err)
	_, err = Grad(loss, emb.Learnables()...)
	require.ErrorIs(t, err, gather.ErrGraph)
	require.Contains(t, err.Error(), "GradNodes")
	_, err = Grad(loss, emb.Table)
	require.ErrorIs(t, err, gather.ErrGraph)
	require.Contains(t, err.Error(), "GradNodes")
	_, err = Grad(loss, emb.GradNodes()...)
	require.NoError(t, err)
}
