package nn

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/vmtest"
	"github.com/gathergrad/gather/machine"
)

// refReduce is Sum (mean false) or Mean of x, of shape shape, over the
// axes k with reduced[k], by a loop over x's multi-indices: the output's
// values in row-major order, and for each element of x the index of the
// output element it is summed into.
func refReduce(x []float64, shape []int, reduced []bool, mean bool) (out []float64, into []int) {
	n, count := 1, 1
	var outShape []int
	for k, s := range shape {
		if reduced[k] {
			count *= s
		} else {
			outShape = append(outShape, s)
			n *= s
		}
	}
	out = make([]float64, n)
	into = make([]int, len(x))
	idx := make([]int, len(shape))
	for i := range x {
		o := 0
		for k, s := range shape {
			if !reduced[k] {
				o = o*s + idx[k]
			}
		}
		out[o] += x[i]
		into[i] = o
		for k := len(shape) - 1; k >= 0; k-- {
			if idx[k]++; idx[k] < shape[k] {
				break
			}
			idx[k] = 0
		}
	}
	if mean {
		for i := range out {
			out[i] /= float64(count)
		}
	}
	return out, into
}

// Sum and Mean equal a loop over the multi-indices, value and gradient,
// for every rank 1 to 5, every set of axes (none: all of them), with and
// without keepDims, float32 and float64, on Gorgonia's TapeMachine and
// machine.Machine (vmtest); shapes with axes of size 1 among them, where
// gorgonia.Sum panics or sums wrongly.
func TestReduce(t *testing.T) {
	shapes := [][]int{{3}, {2, 3}, {2, 3, 4}, {2, 3, 4, 5}, {1, 2, 1, 1}, {2, 1, 3, 1, 2}, {2, 3, 1, 2, 2}}
	for _, shape := range shapes {
		r := len(shape)
		size := tensor.Shape(shape).TotalSize()
		x := make([]float64, size)
		for i := range x {
			x[i] = float64(i%7) - 2.5 + float64(i)/16
		}
		for mask := range 1 << r {
			var axes []int
			reduced := make([]bool, r)
			for k := range r {
				if mask&(1<<k) != 0 {
					axes = append(axes, k)
					reduced[k] = true
				}
			}
			if mask == 0 {
				for k := range reduced {
					reduced[k] = true
				}
			}
			for _, mean := range []bool{false, true} {
				want, into := refReduce(x, shape, reduced, mean)
				for _, keep := range []bool{false, true} {
					for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
						name := fmt.Sprintf("%v/axes%v/mean=%v/keep=%v/%v", shape, axes, mean, keep, dt)
						t.Run(name, func(t *testing.T) {
							checkReduce(t, x, shape, axes, reduced, mean, keep, dt, want, into)
						})
					}
				}
			}
		}
	}
}

func checkReduce(t *testing.T, x []float64, shape, axes []int, reduced []bool, mean, keep bool, dt tensor.Dtype, want []float64, into []int) {
	g := gorgonia.NewGraph()
	xn := gorgonia.NewTensor(g, dt, len(shape), gorgonia.WithShape(shape...), gorgonia.WithName("x"), gorgonia.WithValue(denseOf(dt, shape, x)))
	// Negative axes where they exist, to test counting from the back.
	given := make([]int, len(axes))
	for i, a := range axes {
		given[i] = a
		if i%2 == 1 {
			given[i] = a - len(shape)
		}
	}
	f := Sum
	if mean {
		f = Mean
	}
	y, err := f(xn, keep, given...)
	require.NoError(t, err)
	var wantShape tensor.Shape
	for k, s := range shape {
		switch {
		case !reduced[k]:
			wantShape = append(wantShape, s)
		case keep:
			wantShape = append(wantShape, 1)
		}
	}
	if wantShape == nil {
		require.True(t, y.IsScalar(), "shape %v", y.Shape())
	} else {
		require.Equal(t, wantShape, y.Shape())
	}
	// cost = Σ w ⊙ y with w_o = o+1, so that x_i's gradient is w at the
	// output it is summed into (divided by the count for Mean).
	cost := y
	if !y.IsScalar() {
		w := gorgonia.NewTensor(g, dt, y.Dims(), gorgonia.WithShape(y.Shape()...), gorgonia.WithName("w"), gorgonia.WithInit(gorgonia.RangedFrom(1)))
		cost, err = Sum(gorgonia.Must(gorgonia.HadamardProd(y, w)), false)
		require.NoError(t, err)
	}
	_, err = gorgonia.Grad(cost, xn)
	require.NoError(t, err)
	vm := vmtest.New(t, g)
	defer vm.Close()
	require.NoError(t, vm.RunAll())
	tol := 1e-12
	if dt == tensor.Float32 {
		tol = 1e-5
	}
	got := floats64(y.Value())
	require.Len(t, got, len(want))
	for i := range want {
		require.InDelta(t, want[i], got[i], tol*(1+math.Abs(want[i])), "output %d", i)
	}
	gv, err := xn.Grad()
	require.NoError(t, err)
	gx := floats64(gv)
	count := len(x) / max(len(want), 1)
	for i := range x {
		w := float64(into[i] + 1)
		if y.IsScalar() {
			w = 1
		}
		if mean {
			w /= float64(count)
		}
		require.InDelta(t, w, gx[i], tol*(1+math.Abs(w)), "gradient %d", i)
	}
}

func denseOf(dt tensor.Dtype, shape []int, x []float64) *tensor.Dense {
	if dt == tensor.Float32 {
		v := make([]float32, len(x))
		for i := range x {
			v[i] = float32(x[i])
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float64(nil), x...)))
}

func floats64(v gorgonia.Value) []float64 {
	switch d := v.Data().(type) {
	case float32:
		return []float64{float64(d)}
	case float64:
		return []float64{d}
	case []float32:
		out := make([]float64, len(d))
		for i := range d {
			out[i] = float64(d[i])
		}
		return out
	case []float64:
		return append([]float64(nil), d...)
	}
	panic(fmt.Sprintf("not floats: %T", v.Data()))
}

// Sum and Mean refuse an axis out of range, an axis named twice, an axis
// of a scalar and an integer x, naming the value.
func TestReduceErrors(t *testing.T) {
	g := gorgonia.NewGraph()
	x := gorgonia.NewTensor(g, tensor.Float32, 3, gorgonia.WithShape(2, 3, 4), gorgonia.WithName("x"))
	s := gorgonia.NewScalar(g, tensor.Float32, gorgonia.WithName("s"))
	i := gorgonia.NewMatrix(g, tensor.Int64, gorgonia.WithShape(2, 2), gorgonia.WithName("i"))
	for _, c := range []struct {
		x    *gorgonia.Node
		axes []int
		want error
		text string
	}{
		{x, []int{3}, gather.ErrAxisOutOfRange, "axis 3"},
		{x, []int{-4}, gather.ErrAxisOutOfRange, "axis -4"},
		{x, []int{1, -2}, gather.ErrAxisOutOfRange, "axis -2 is named twice"},
		{s, []int{0}, gather.ErrAxisOutOfRange, "axis 0 of a scalar"},
		{i, nil, gather.ErrDtype, "int64"},
	} {
		for _, f := range []func(*gorgonia.Node, bool, ...int) (*gorgonia.Node, error){Sum, Mean} {
			_, err := f(c.x, false, c.axes...)
			require.Error(t, err)
			require.True(t, errors.Is(err, c.want), "%v", err)
			require.Contains(t, err.Error(), c.text)
		}
	}
}

// A run of Sum and Mean over middle axes, and of their gradients, on
// machine.Machine allocates nothing.
func TestReduceAllocs(t *testing.T) {
	if raceOn {
		t.Skip("the race detector allocates")
	}
	g := gorgonia.NewGraph()
	x := gorgonia.NewTensor(g, tensor.Float32, 4, gorgonia.WithShape(2, 3, 4, 5), gorgonia.WithName("x"), gorgonia.WithInit(gorgonia.RangedFrom(0)))
	m1 := gorgonia.Must(Mean(x, true, 2, 3))
	s := gorgonia.Must(Sum(m1, false))
	_, err := gorgonia.Grad(s, x)
	require.NoError(t, err)
	m, err := machine.New(g)
	require.NoError(t, err)
	defer m.Close()
	run := func() { require.NoError(t, m.RunAll()) }
	run()
	require.Equal(t, 0.0, testing.AllocsPerRun(10, run))
}
