package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/ref"
)

// Every gradient op writes every element of its destination (Do's new
// tensor is not cleared): for each loss with its
// options and reductions, and BatchDot with respect to each input, the
// gradient written over a buffer of NaNs (UsePreallocDo) is Do's result,
// bit for bit, and holds no NaN.
func TestGradOpsWriteEveryElement(t *testing.T) {
	const rows, classes = 7, 5
	r := rand.New(rand.NewPCG(21, 22))
	x := ref.RandFloats(r, rows*classes)
	soft := make([]float64, rows*classes)
	for i := range soft {
		soft[i] = r.Float64()
	}
	y := make([]int64, rows)
	for i := range y {
		y[i] = int64(r.IntN(classes))
	}
	y[2] = -100 // ignored with WithIgnoreIndex(-100)
	yKept := append([]int64{}, y...)
	yKept[2] = 1
	weights := []float64{0.5, 1, 2, 0.25, 1.5}
	pos := []float64{2, 1, 0.5, 3, 1}

	type gradCase struct {
		name string
		d    interface {
			Do(...gorgonia.Value) (gorgonia.Value, error)
			UsePreallocDo(gorgonia.Value, ...gorgonia.Value) (gorgonia.Value, error)
		}
		in    []gorgonia.Value
		shape []int
	}
	var cases []gradCase
	for _, dt := range floatDtypes {
		w := func() tensor.Tensor { return ref.FloatTensor(weights, []int{classes}, dt) }
		// upFor returns the upstream gradient of a loss whose unreduced
		// output has the given shape.
		upFor := func(red Reduction, shape ...int) gorgonia.Value {
			if red == ReduceNone {
				return ref.FloatTensor(ref.RandFloats(r, tensor.Shape(shape).TotalSize()), shape, dt)
			}
			if dt == tensor.Float32 {
				return gorgonia.NewF32(0.75)
			}
			return gorgonia.NewF64(0.75)
		}
		for _, red := range []Reduction{ReduceMean, ReduceSum, ReduceNone} {
			for _, lc := range []struct {
				name string
				nll  bool
				y    []int64
				opts []any
			}{
				{"CrossEntropy", false, yKept, nil},
				{"CrossEntropy/ignore", false, y, []any{WithIgnoreIndex(-100)}},
				{"CrossEntropy/weights+smoothing", false, yKept, []any{WithClassWeights(w()), WithLabelSmoothing(0.1)}},
				{"NLLLoss/ignore+weights", true, y, []any{WithIgnoreIndex(-100), WithClassWeights(w())}},
			} {
				g := gorgonia.NewGraph()
				opts := append(append([]any{}, lc.opts...), WithReduction(red))
				xv := ref.FloatTensor(x, []int{rows, classes}, dt)
				yv := ref.CastIndices(lc.y, []int{rows}, tensor.Int64)
				xn := gorgonia.NodeFromAny(g, xv, gorgonia.WithName("x"))
				yn := gorgonia.NodeFromAny(g, yv, gorgonia.WithName("y"))
				var loss *gorgonia.Node
				var err error
				if lc.nll {
					loss, err = NLLLoss(xn, yn, optionsOf[NLLLossOption](opts)...)
				} else {
					loss, err = CrossEntropy(xn, yn, optionsOf[CrossEntropyOption](opts)...)
				}
				require.NoError(t, err, "%s %v %v", lc.name, red, dt)
				cases = append(cases, gradCase{fmt.Sprintf("%s/%v/%v", lc.name, red, dt),
					loss.Op().(*crossEntropyOp).Grads[0],
					[]gorgonia.Value{xv, yv, upFor(red, rows)}, []int{rows, classes}})
			}
			g := gorgonia.NewGraph()
			xv := ref.FloatTensor(x, []int{rows, classes}, dt)
			sv := ref.FloatTensor(soft, []int{rows, classes}, dt)
			pw := ref.FloatTensor(pos, []int{classes}, dt)
			loss, err := BCEWithLogits(gorgonia.NodeFromAny(g, xv, gorgonia.WithName("x")),
				gorgonia.NodeFromAny(g, sv, gorgonia.WithName("t")), WithPosWeight(pw), WithReduction(red))
			require.NoError(t, err)
			cases = append(cases, gradCase{fmt.Sprintf("BCEWithLogits/%v/%v", red, dt),
				loss.Op().(*bceOp).Grads[0], []gorgonia.Value{xv, sv, upFor(red, rows, classes)}, []int{rows, classes}})
		}
		const n, k, d = 3, 4, 6
		g := gorgonia.NewGraph()
		av := ref.FloatTensor(ref.RandFloats(r, n*d), []int{n, d}, dt)
		bv := ref.FloatTensor(ref.RandFloats(r, n*k*d), []int{n, k, d}, dt)
		s, err := BatchDot(gorgonia.NodeFromAny(g, av, gorgonia.WithName("a")), gorgonia.NodeFromAny(g, bv, gorgonia.WithName("b")))
		require.NoError(t, err)
		gv := ref.FloatTensor(ref.RandFloats(r, n*k), []int{n, k}, dt)
		for wrt, shape := range [][]int{{n, d}, {n, k, d}} {
			cases = append(cases, gradCase{fmt.Sprintf("BatchDot/wrt=%d/%v", wrt, dt),
				s.Op().(*pairOp).Grads[wrt], []gorgonia.Value{av, bv, gv}, shape})
		}
		const f = 3
		sv := ref.FloatTensor(ref.RandFloats(r, n*f*d), []int{n, f * d}, dt)
		di, err := DotInteraction(gorgonia.NodeFromAny(g, av, gorgonia.WithName("x")), gorgonia.NodeFromAny(g, sv, gorgonia.WithName("s")))
		require.NoError(t, err)
		gi := ref.FloatTensor(ref.RandFloats(r, n*(d+(f+1)*f/2)), []int{n, d + (f+1)*f/2}, dt)
		for wrt, shape := range [][]int{{n, d}, {n, f * d}} {
			cases = append(cases, gradCase{fmt.Sprintf("DotInteraction/wrt=%d/%v", wrt, dt),
				di.Op().(*pairOp).Grads[wrt], []gorgonia.Value{av, sv, gi}, shape})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fresh, err := c.d.Do(c.in...)
			require.NoError(t, err)
			dt := fresh.Dtype()
			size := tensor.Shape(c.shape).TotalSize()
			nans := make([]float64, size)
			for i := range nans {
				nans[i] = math.NaN()
			}
			buf := ref.FloatTensor(nans, c.shape, dt)
			got, err := c.d.UsePreallocDo(buf, c.in...)
			require.NoError(t, err)
			require.Same(t, buf, got)
			want := ref.Floats(fresh.(*tensor.Dense))
			for i, v := range ref.Floats(buf) {
				require.False(t, math.IsNaN(v), "element %d left unwritten", i)
				require.Equal(t, math.Float64bits(want[i]), math.Float64bits(v), "element %d", i)
			}
		})
	}
}
