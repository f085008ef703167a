package nn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gathergrad/gather/internal/vmtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/gradcheck"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/ref"
)

// refCrossEntropy is the loss and its gradient with respect to logits,
// written from the definition: row by row, softmax with the row maximum
// subtracted, -log of the target's probability, averaged over rows.
func refCrossEntropy(x []float64, t []int64, c int) (loss float64, grad []float64) {
	rows := len(t)
	grad = make([]float64, len(x))
	for r := range rows {
		row := x[r*c : (r+1)*c]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, v)
		}
		var s float64
		for _, v := range row {
			s += math.Exp(v - m)
		}
		k := int(t[r])
		if k < 0 {
			k += c
		}
		loss -= math.Log(math.Exp(row[k]-m) / s)
		for j, v := range row {
			p := math.Exp(v-m) / s
			if j == k {
				p--
			}
			grad[r*c+j] = p / float64(rows)
		}
	}
	return loss / float64(rows), grad
}

// runLoss builds loss = CrossEntropy(x, t) in a new graph, runs it with its
// gradient in the given machine and returns the loss and the gradient of x.
func runLoss(t *testing.T, x, targets *tensor.Dense, lisp bool) (float64, []float64) {
	t.Helper()
	g := gorgonia.NewGraph()
	xn := gorgonia.NodeFromAny(g, x, gorgonia.WithName("x"))
	tn := gorgonia.NodeFromAny(g, targets, gorgonia.WithName("t"))
	loss, err := CrossEntropy(xn, tn)
	require.NoError(t, err)
	var vm gorgonia.VM
	if lisp {
		vm = gorgonia.NewLispMachine(g)
	} else {
		_, err = gorgonia.Grad(loss, xn)
		require.NoError(t, err)
		vm = vmtest.New(t, g)
	}
	defer vm.Close()
	require.NoError(t, vm.RunAll())
	l, err := operand.Scalar("loss", loss.Value())
	require.NoError(t, err)
	gv, err := xn.Grad()
	require.NoError(t, err)
	return l, ref.Floats(gv.(*tensor.Dense))
}

func TestCrossEntropyMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, shape := range [][]int{{5}, {1, 3}, {4, 3}, {2, 3, 7}, {300, 2}} {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			for _, it := range []tensor.Dtype{tensor.Int, tensor.Int32, tensor.Int64} {
				for _, lisp := range []bool{false, true} {
					c := shape[len(shape)-1]
					x := make([]float64, tensor.Shape(shape).TotalSize())
					for i := range x {
						x[i] = 3 * r.NormFloat64()
					}
					ti := make([]int64, len(x)/c)
					for i := range ti {
						ti[i] = int64(r.IntN(c))
					}
					want, wantGrad := refCrossEntropy(x, ti, c)
					xt := ref.FloatTensor(x, shape, dt)
					tt := ref.CastIndices(ti, shape[:len(shape)-1], it)
					name := fmt.Sprintf("%v/%v/%v/lisp=%v", shape, dt, it, lisp)
					t.Run(name, func(t *testing.T) {
						before := ref.Floats(xt)
						got, grad := runLoss(t, xt, tt, lisp)
						tol := 1e-12
						if dt == tensor.Float32 {
							tol = 1e-5
						}
						assert.InDelta(t, want, got, tol*math.Max(1, math.Abs(want)))
						assert.InDeltaSlice(t, wantGrad, grad, tol)
						assert.Equal(t, before, ref.Floats(xt), "logits unchanged")
					})
				}
			}
		}
	}
}

// lossGraph builds, in a new graph, the cross-entropy of targets y under
// logits x, fused (CrossEntropy) or as NLLLoss after gorgonia.LogSoftMax,
// with the gradient of x, and returns the loss and x's node.
func lossGraph(x, y *tensor.Dense, fused bool) (loss, xn *gorgonia.Node, err error) {
	g := gorgonia.NewGraph()
	xn = gorgonia.NodeFromAny(g, x, gorgonia.WithName("x"))
	yn := gorgonia.NodeFromAny(g, y, gorgonia.WithName("y"))
	if fused {
		loss, err = CrossEntropy(xn, yn)
	} else {
		var lp *gorgonia.Node
		if lp, err = gorgonia.LogSoftMax(xn); err == nil {
			loss, err = NLLLoss(lp, yn)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if _, err := gorgonia.Grad(loss, xn); err != nil {
		return nil, nil, err
	}
	return loss, xn, nil
}

// CrossEntropy equals NLLLoss after gorgonia.LogSoftMax in value and gradient.
func TestCrossEntropyEqualsLogSoftMaxNLL(t *testing.T) {
	x := tensor.New(tensor.WithShape(3, 4), tensor.WithBacking([]float64{0.1, -0.3, 0.7, 0.2, 1, 2, -1, 0, 0.5, 0.5, 0.1, -0.2}))
	y := tensor.New(tensor.WithShape(3), tensor.WithBacking([]int{2, 0, 3}))
	run := func(fused bool) (float64, []float64) {
		loss, xn, err := lossGraph(x.Clone().(*tensor.Dense), y, fused)
		require.NoError(t, err)
		vm := vmtest.New(t, loss.Graph())
		defer vm.Close()
		require.NoError(t, vm.RunAll())
		gv, err := xn.Grad()
		require.NoError(t, err)
		return loss.Value().Data().(float64), ref.Floats(gv.(*tensor.Dense))
	}
	l1, g1 := run(true)
	l2, g2 := run(false)
	assert.InDelta(t, l2, l1, 1e-12)
	assert.InDeltaSlice(t, g2, g1, 1e-12)
}

func TestCrossEntropyGradCheck(t *testing.T) {
	build := func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) {
		// A square after the loss makes the upstream gradient differ from 1.
		l, err := CrossEntropy(in[0], in[1])
		if err != nil {
			return nil, err
		}
		return gorgonia.Square(l)
	}
	cases := []struct {
		name   string
		shape  []int
		logits []float64
		y      []int
	}{
		{"vector", []int{4}, []float64{0.3, -1, 2, 0.5}, []int{2}},
		{"matrix", []int{3, 4}, []float64{0.1, -0.3, 0.7, 0.2, 1, 2, -1, 0, 0.5, 0.5, 0.1, -0.2}, []int{2, 0, 3}},
		{"rank 3", []int{2, 2, 3}, []float64{1, 0, -1, 0.5, 0.25, 2, -2, 1, 0, 0.3, 0.3, -0.3}, []int{0, 2, 1, 0}},
		{"large logits", []int{2, 3}, []float64{1000, 999, 998, -1000, -1002, -1001}, []int{1, 0}},
	}
	for _, c := range cases {
		for _, lisp := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/lisp=%v", c.name, lisp), func(t *testing.T) {
				inputs := []tensor.Tensor{
					tensor.New(tensor.WithShape(c.shape...), tensor.WithBacking(c.logits)),
					tensor.New(tensor.WithShape(c.shape[:len(c.shape)-1]...), tensor.WithBacking(c.y)),
				}
				var opts []gradcheck.Option
				if lisp {
					opts = append(opts, gradcheck.WithLispMachine())
				}
				require.NoError(t, gradcheck.Check(build, inputs, opts...))
			})
		}
	}
}

func TestCrossEntropyLargeLogitsAreFinite(t *testing.T) {
	x := []float64{1000, 999, 998, -1000, -1002, -1001}
	y := []int64{1, 0}
	want, wantGrad := refCrossEntropy(x, y, 3)
	got, grad := runLoss(t, ref.FloatTensor(x, []int{2, 3}, tensor.Float64), ref.CastIndices(y, []int{2}, tensor.Int64), false)
	require.False(t, math.IsNaN(got) || math.IsInf(got, 0))
	assert.InDelta(t, want, got, 1e-12)
	assert.InDeltaSlice(t, wantGrad, grad, 1e-12)
}

func TestCrossEntropyErrors(t *testing.T) {
	g := gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(2, 3), gorgonia.WithName("x"))
	y := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(2), gorgonia.WithName("y"))
	_, err := CrossEntropy(nil, y)
	assert.ErrorIs(t, err, gather.ErrShape)
	_, err = CrossEntropy(x, gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(3), gorgonia.WithName("y3")))
	assert.ErrorIs(t, err, gather.ErrShape)
	assert.ErrorContains(t, err, "cross_entropy: targets of shape (3) do not match logits of shape (2, 3) (want (2))")
	_, err = CrossEntropy(x, gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(2), gorgonia.WithName("yf")))
	assert.ErrorIs(t, err, gather.ErrDtype)
	_, err = CrossEntropy(gorgonia.NewMatrix(g, tensor.Int, gorgonia.WithShape(2, 3), gorgonia.WithName("xi")), y)
	assert.ErrorIs(t, err, gather.ErrDtype)
	_, err = CrossEntropy(gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(2, 0), gorgonia.WithName("x0")), y)
	assert.ErrorIs(t, err, gather.ErrIndexOutOfRange)

	// A target out of [-3, 2] is an *gather.IndexError when the graph runs, in
	// both machines, and nothing is computed from it.
	for _, lisp := range []bool{false, true} {
		for _, bad := range []int{3, -4} {
			g := gorgonia.NewGraph()
			xv := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}))
			xn := gorgonia.NodeFromAny(g, xv, gorgonia.WithName("x"))
			yn := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(2), tensor.WithBacking([]int{0, bad})), gorgonia.WithName("y"))
			loss, err := CrossEntropy(xn, yn)
			require.NoError(t, err)
			var vm gorgonia.VM
			if lisp {
				// Forward only: with backward on, Gorgonia's LispMachine
				// returns from a failed RunAll while its worker goroutine
				// still reads the machine (a data race in Gorgonia).
				vm = gorgonia.NewLispMachine(g, gorgonia.ExecuteFwdOnly())
			} else {
				vm = vmtest.New(t, g)
			}
			err = vm.RunAll()
			vm.Close()
			var ie *gather.IndexError
			require.True(t, errors.As(gather.Cause(err), &ie), "lisp=%v: %v", lisp, err)
			assert.Equal(t, []int{1}, ie.Pos)
			assert.Equal(t, int64(bad), ie.Value)
			assert.Equal(t, 1, ie.Axis)
			assert.Equal(t, 3, ie.Size)
			assert.ErrorContains(t, err, fmt.Sprintf("cross_entropy: targets[1] = %d is out of range [0, 2] for axis 1 of size 3", bad))
			_ = loss
		}
	}
}

// An empty batch has a NaN loss, as a mean over nothing, and a zero-size gradient.
func TestCrossEntropyEmpty(t *testing.T) {
	x := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(0, 3))
	y := tensor.New(tensor.Of(tensor.Int), tensor.WithShape(0))
	got, grad := runLoss(t, x, y, false)
	assert.True(t, math.IsNaN(got))
	assert.Empty(t, grad)
}

// The gradient op overwrites a stale buffer (UsePreallocDo), adds into an
// existing gradient (IncrDo) and leaves the buffer untouched on error.
func TestCrossEntropyGradBuffers(t *testing.T) {
	x := []float64{0.1, -0.3, 0.7, 1, 2, -1}
	y := []int64{2, 0}
	_, want := refCrossEntropy(x, y, 3)
	o := newCrossEntropyOp(opCrossEntropy, tensor.Float64, tensor.Int64, tensor.Shape{2, 3}, ReduceMean, kernel.ClassLoss{Entropy: true})
	d := o.Grads[0]
	xt := ref.FloatTensor(x, []int{2, 3}, tensor.Float64)
	yt := ref.CastIndices(y, []int{2}, tensor.Int64)

	buf := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{9, 9, 9, 9, 9, 9}))
	v, err := d.UsePreallocDo(buf, xt, yt, gorgonia.NewF64(1))
	require.NoError(t, err)
	assert.Same(t, buf, v)
	assert.InDeltaSlice(t, want, ref.Floats(buf), 1e-12)

	acc := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{1, 1, 1, 1, 1, 1}))
	require.NoError(t, d.IncrDo(acc, xt, yt, gorgonia.NewF64(2)))
	for i, g := range ref.Floats(acc) {
		assert.InDelta(t, 1+2*want[i], g, 1e-12)
	}

	before := ref.Floats(acc)
	badY := ref.CastIndices([]int64{2, 7}, []int{2}, tensor.Int64)
	err = d.IncrDo(acc, xt, badY, gorgonia.NewF64(1))
	assert.ErrorIs(t, err, gather.ErrIndexOutOfRange)
	assert.Equal(t, before, ref.Floats(acc))
	_, err = d.UsePreallocDo(acc, xt, yt)
	assert.ErrorIs(t, err, gather.ErrShape, "two inputs instead of three")
}

// The loss and its gradient are bit-identical for any GOMAXPROCS.
func TestCrossEntropyDeterministicAcrossGOMAXPROCS(t *testing.T) {
	const rows, c = 5000, 17
	r := rand.New(rand.NewPCG(7, 8))
	x := make([]float64, rows*c)
	for i := range x {
		x[i] = 4 * r.NormFloat64()
	}
	y := make([]int64, rows)
	for i := range y {
		y[i] = int64(r.IntN(c))
	}
	xt := ref.FloatTensor(x, []int{rows, c}, tensor.Float32)
	yt := ref.CastIndices(y, []int{rows}, tensor.Int64)
	o := newCrossEntropyOp(opCrossEntropy, tensor.Float32, tensor.Int64, tensor.Shape{rows, c}, ReduceMean, kernel.ClassLoss{Entropy: true})
	run := func(procs int) (gorgonia.Value, []float64) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		l, err := o.Do(xt, yt)
		require.NoError(t, err)
		g, err := o.Grads[0].Do(xt, yt, gorgonia.NewF32(1))
		require.NoError(t, err)
		return l, ref.Floats(g.(*tensor.Dense))
	}
	l1, g1 := run(1)
	for _, p := range []int{2, 3, 4, 7} {
		l, g := run(p)
		assert.Equal(t, l1.Data(), l.Data(), "GOMAXPROCS=%d", p)
		assert.Equal(t, g1, g, "GOMAXPROCS=%d", p)
	}
}

// float32 logits with -Inf, +Inf or NaN in a row give what float64 logits
// give (float32 rows take kernel.Exp32 only when their maximum is finite):
// a -Inf logit has probability 0 and gradient 0; rows whose maximum is not
// finite follow IEEE arithmetic.
func TestCrossEntropyFloat32NonFinite(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for _, row := range [][]float64{{2, -inf, 1, 0.5}, {-inf, -inf, -inf, -inf}, {nan, 1, 2, 3}, {inf, 1, 2, 3}, {1, inf, 2, 3}} {
		yt := ref.CastIndices([]int64{0}, []int{1}, tensor.Int64)
		var losses []float64
		var grads [][]float64
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			xt := ref.FloatTensor(row, []int{1, 4}, dt)
			o := newCrossEntropyOp(opCrossEntropy, dt, tensor.Int64, tensor.Shape{1, 4}, ReduceMean, kernel.ClassLoss{Entropy: true})
			l, err := o.Do(xt, yt)
			require.NoError(t, err)
			one := gorgonia.Value(gorgonia.NewF64(1))
			if dt == tensor.Float32 {
				one = gorgonia.NewF32(1)
			}
			g, err := o.Grads[0].Do(xt, yt, one)
			require.NoError(t, err)
			lv, err := operand.Scalar("loss", l)
			require.NoError(t, err)
			losses, grads = append(losses, lv), append(grads, ref.Floats(g.(*tensor.Dense)))
		}
		same := func(a, b float64) bool { return math.IsNaN(a) && math.IsNaN(b) || math.Abs(a-b) <= 1e-6 || a == b }
		assert.True(t, same(losses[0], losses[1]), "row %v: loss %g in float64, %g in float32", row, losses[0], losses[1])
		for j := range row {
			assert.True(t, same(grads[0][j], grads[1][j]), "row %v: gradient %d is %g in float64, %g in float32", row, j, grads[0][j], grads[1][j])
		}
		if !math.IsInf(row[1], -1) || math.IsInf(row[0], -1) {
			continue
		}
		want, wantGrad := refCrossEntropy(row, []int64{0}, 4)
		assert.InDelta(t, want, losses[1], 1e-6, "row %v", row)
		assert.InDeltaSlice(t, wantGrad, grads[1], 1e-6, "row %v", row)
		assert.Zero(t, grads[1][1], "a -Inf logit gets no gradient")
	}
}
