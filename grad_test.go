package gather_test

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

var floatDtypes = []tensor.Dtype{tensor.Float64, tensor.Float32}

// weightedSum builds sum(op(data, indices) * w): w gives every output
// element its own upstream gradient.
func weightedSum(kind string, axis int, opts ...gather.Option) func(*gorgonia.ExprGraph, []*gorgonia.Node) (*gorgonia.Node, error) {
	return func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) {
		out, err := applyKind(kind, in[0], in[1], axis, opts)
		if err != nil {
			return nil, err
		}
		prod, err := gorgonia.HadamardProd(out, in[2])
		if err != nil {
			return nil, err
		}
		if prod.IsScalar() {
			return prod, nil
		}
		return gorgonia.Sum(prod)
	}
}

func checkOpts(machine string) []gradcheck.Option {
	if machine == "lisp" {
		return []gradcheck.Option{gradcheck.WithLispMachine()}
	}
	return nil
}

func TestGradCheckGather(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for rank := 1; rank <= 4; rank++ {
		for axis := -rank; axis < rank; axis++ {
			for _, ishape := range [][]int{{}, {5}, {2, 3}} {
				for _, dt := range floatDtypes {
					for _, machine := range []string{"tape", "lisp"} {
						ax := (axis + rank) % rank
						dshape := make([]int, rank)
						for d := range dshape {
							dshape[d] = 2 + r.IntN(2)
						}
						// Few distinct values on a short axis: many duplicates.
						idx := ref.RandIndices(r, tensor.Shape(ishape).TotalSize(), dshape[ax])
						_, oshape := ref.Take(make([]float64, tensor.Shape(dshape).TotalSize()), dshape, idx, ishape, ax)
						inputs := []tensor.Tensor{
							ref.FloatTensor(ref.RandFloats(r, tensor.Shape(dshape).TotalSize()), dshape, dt),
							ref.CastIndices(idx, ishape, tensor.Int64),
							weightTensor(r, oshape, dt),
						}
						name := fmt.Sprintf("data%v/axis%d/indices%v/%v/%s", dshape, axis, ishape, dt, machine)
						t.Run(name, func(t *testing.T) {
							require.NoError(t, gradcheck.Check(weightedSum(opGather, axis), inputs, checkOpts(machine)...))
						})
					}
				}
			}
		}
	}
}

func TestGradCheckGatherElements(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for rank := 1; rank <= 3; rank++ {
		for axis := -rank; axis < rank; axis++ {
			for _, dt := range floatDtypes {
				for _, machine := range []string{"tape", "lisp"} {
					ax := (axis + rank) % rank
					dshape, ishape := make([]int, rank), make([]int, rank)
					for d := range dshape {
						dshape[d] = 2 + r.IntN(2)
						ishape[d] = 1 + r.IntN(dshape[d])
					}
					ishape[ax] = 4 // longer than the axis: duplicates guaranteed
					idx := ref.RandIndices(r, tensor.Shape(ishape).TotalSize(), dshape[ax])
					inputs := []tensor.Tensor{
						ref.FloatTensor(ref.RandFloats(r, tensor.Shape(dshape).TotalSize()), dshape, dt),
						ref.CastIndices(idx, ishape, tensor.Int32),
						weightTensor(r, ishape, dt),
					}
					name := fmt.Sprintf("data%v/axis%d/indices%v/%v/%s", dshape, axis, ishape, dt, machine)
					t.Run(name, func(t *testing.T) {
						require.NoError(t, gradcheck.Check(weightedSum(opGatherElements, axis), inputs, checkOpts(machine)...))
					})
				}
			}
		}
	}
}

// weightTensor returns small distinct weights of the given shape.
func weightTensor(r *rand.Rand, shape []int, dt tensor.Dtype) *tensor.Dense {
	n := tensor.Shape(shape).TotalSize()
	w := make([]float64, n)
	for i := range w {
		w[i] = float64(1+r.IntN(9)) / 4
	}
	if len(shape) == 0 {
		if dt == tensor.Float32 {
			return tensor.New(tensor.FromScalar(float32(w[0])))
		}
		return tensor.New(tensor.FromScalar(w[0]))
	}
	return ref.FloatTensor(w, shape, dt)
}

// gather.Gather -> gather.GatherElements -> reduction, and a data node read by two gathers.
func TestGradCheckCompositions(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, dt := range floatDtypes {
		for _, machine := range []string{"tape", "lisp"} {
			t.Run(fmt.Sprintf("chain/%v/%s", dt, machine), func(t *testing.T) {
				// data [6, 4] -> gather.Gather rows [5] -> [5, 4] -> gather.GatherElements axis 1 [5, 2] -> weighted sum.
				inputs := []tensor.Tensor{
					ref.FloatTensor(ref.RandFloats(r, 24), []int{6, 4}, dt),
					ref.CastIndices([]int64{5, 0, -1, 2, 5}, []int{5}, tensor.Int),
					ref.CastIndices([]int64{3, 3, 0, -1, 2, 2, 1, 0, -4, 3}, []int{5, 2}, tensor.Int64),
					weightTensor(r, []int{5, 2}, dt),
				}
				build := func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) {
					rows, err := gather.Gather(in[0], in[1], 0)
					if err != nil {
						return nil, err
					}
					picked, err := gather.GatherElements(rows, in[2], 1)
					if err != nil {
						return nil, err
					}
					return gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(picked, in[3])))
				}
				require.NoError(t, gradcheck.Check(build, inputs, checkOpts(machine)...))
			})
			t.Run(fmt.Sprintf("shared data/%v/%s", dt, machine), func(t *testing.T) {
				inputs := []tensor.Tensor{
					ref.FloatTensor(ref.RandFloats(r, 12), []int{3, 4}, dt),
					ref.CastIndices([]int64{2, 2, 0}, []int{3}, tensor.Int64),
					ref.CastIndices([]int64{1, -1}, []int{2}, tensor.Int32),
					weightTensor(r, []int{3, 4}, dt),
					weightTensor(r, []int{3, 2}, dt),
				}
				build := func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) {
					a, err := gather.Gather(in[0], in[1], 0)
					if err != nil {
						return nil, err
					}
					b, err := gather.Gather(in[0], in[2], 1)
					if err != nil {
						return nil, err
					}
					sa := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(a, in[3]))))
					sb := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(b, in[4]))))
					return gorgonia.Add(sa, sb)
				}
				require.NoError(t, gradcheck.Check(build, inputs, checkOpts(machine)...))
			})
		}
	}
}

// gradcheck.Check must catch a wrong gradient: gather.WithGradScale(2) doubles it.
func TestGradCheckRejectsScaledGradient(t *testing.T) {
	for _, machine := range []string{"tape", "lisp"} {
		t.Run(machine, func(t *testing.T) {
			inputs := []tensor.Tensor{
				tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6})),
				tensor.New(tensor.WithShape(2), tensor.WithBacking([]int64{2, 0})),
				tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1, 1, 1, 1})),
			}
			require.NoError(t, gradcheck.Check(weightedSum(opGather, 0), inputs, checkOpts(machine)...))
			err := gradcheck.Check(weightedSum(opGather, 0, gather.WithGradScale(2)), inputs, checkOpts(machine)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "gradcheck: input 0 at [0 0]: analytic gradient 2, numeric 1 (|difference| 1 > tolerance 2.1e-05)")
			// The input itself is untouched by the check.
			assert.Equal(t, []float64{1, 2, 3, 4, 5, 6}, inputs[0].Data())
		})
	}
}

// gradsOf builds sum(op(data, indices) * w) and returns the gradient of data
// from the chosen machine, on a first and a second run.
func gradsOf(t *testing.T, machine, kind string, data, indices, w *tensor.Dense, axis int, opts ...gather.Option) (first, second []float64) {
	t.Helper()
	g := gorgonia.NewGraph()
	d := gorgonia.NodeFromAny(g, data.Clone(), gorgonia.WithName("data"))
	i := gorgonia.NodeFromAny(g, indices, gorgonia.WithName("indices"))
	wn := gorgonia.NodeFromAny(g, w, gorgonia.WithName("w"))
	out, err := applyKind(kind, d, i, axis, opts)
	require.NoError(t, err)
	cost := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(out, wn))))
	run := func() []float64 {
		switch machine {
		case "tape":
			vm := vmtest.New(t, g)
			defer vm.Close()
			require.NoError(t, vm.RunAll())
		default:
			// LispMachine adds into the gradients already held by the
			// graph; start each run from zero as a training loop does.
			if dv, err := d.Grad(); err == nil {
				dv.(*tensor.Dense).Zero()
			}
			vm := gorgonia.NewLispMachine(g)
			defer vm.Close()
			require.NoError(t, vm.RunAll())
		}
		gv, err := d.Grad()
		require.NoError(t, err)
		return ref.Floats(gv.(*tensor.Dense))
	}
	if machine == "tape" {
		_, err := gorgonia.Grad(cost, d)
		require.NoError(t, err)
	}
	return run(), run()
}

// The ONNX spec examples, with gradients worked by hand.
func TestSpecExampleGradients(t *testing.T) {
	ones := func(shape ...int) *tensor.Dense {
		v := make([]float64, tensor.Shape(shape).TotalSize())
		for i := range v {
			v[i] = 1
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
	}
	cases := []struct {
		name    string
		kind    string
		data    *tensor.Dense
		indices *tensor.Dense
		axis    int
		w       *tensor.Dense
		want    []float64
	}{
		{
			// Rows 0, 1, 1, 2: row 1 is read twice.
			name: "gather axis 0", kind: opGather, axis: 0,
			data:    tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{1, 1.2, 2.3, 3.4, 4.5, 5.7})),
			indices: tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]int64{0, 1, 1, 2})),
			w:       ones(2, 2, 2),
			want:    []float64{1, 1, 2, 2, 1, 1},
		},
		{
			// Columns 0 and 2 of each row.
			name: "gather axis 1", kind: opGather, axis: 1,
			data:    tensor.New(tensor.WithShape(3, 3), tensor.WithBacking([]float64{1, 1.2, 1.9, 2.3, 3.4, 3.9, 4.5, 5.7, 5.9})),
			indices: tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]int64{0, 2})),
			w:       tensor.New(tensor.WithShape(3, 1, 2), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6})),
			want:    []float64{1, 0, 2, 3, 0, 4, 5, 0, 6},
		},
		{
			// out = [[d00, d00], [d11, d10]]: d00 is read twice.
			name: "gather_elements axis 1", kind: opGatherElements, axis: 1,
			data:    tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1, 2, 3, 4})),
			indices: tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]int64{0, 0, 1, 0})),
			w:       ones(2, 2),
			want:    []float64{2, 0, 1, 1},
		},
		{
			// out = [[d10, d21, d02], [d20, d01, d02]]: d02 twice.
			name: "gather_elements axis 0", kind: opGatherElements, axis: 0,
			data:    tensor.New(tensor.WithShape(3, 3), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9})),
			indices: tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]int64{1, 2, 0, 2, 0, 0})),
			w:       ones(2, 3),
			want:    []float64{0, 1, 2, 1, 0, 0, 1, 1, 0},
		},
		{
			// The same with negative indices: -1 is row 2, -2 row 1.
			name: "gather_elements negative", kind: opGatherElements, axis: 0,
			data:    tensor.New(tensor.WithShape(3, 3), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9})),
			indices: tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]int64{-1, -2, 0, -2, 0, 0})),
			w:       ones(2, 3),
			want:    []float64{0, 1, 2, 1, 1, 0, 1, 0, 0},
		},
	}
	for _, c := range cases {
		for _, machine := range []string{"tape", "lisp"} {
			t.Run(c.name+"/"+machine, func(t *testing.T) {
				first, second := gradsOf(t, machine, c.kind, c.data, c.indices, c.w, c.axis)
				assert.Equal(t, c.want, first)
				assert.Equal(t, c.want, second, "second run")
			})
		}
	}
}

// Both machines agree with the naive reference on random cases, and the
// tensor-level kernels do too.
func TestGradientsMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, kind := range []string{opGather, opGatherElements} {
		for rank := 1; rank <= 3; rank++ {
			for axis := 0; axis < rank; axis++ {
				dshape := make([]int, rank)
				for d := range dshape {
					dshape[d] = 2 + r.IntN(3)
				}
				ishape := []int{7}
				if kind == opGatherElements {
					ishape = append([]int{}, dshape...)
					ishape[axis] = 7
				}
				idx := ref.RandIndices(r, tensor.Shape(ishape).TotalSize(), dshape[axis])
				var oshape []int
				if kind == opGather {
					_, oshape = ref.Take(make([]float64, tensor.Shape(dshape).TotalSize()), dshape, idx, ishape, axis)
				} else {
					oshape = ishape
				}
				up := ref.RandFloats(r, tensor.Shape(oshape).TotalSize())
				var want []float64
				if kind == opGather {
					want = ref.IndexAdd(dshape, idx, ishape, axis, up)
				} else {
					want = ref.ScatterAdd(dshape, idx, ishape, axis, up)
				}
				data := ref.FloatTensor(ref.RandFloats(r, tensor.Shape(dshape).TotalSize()), dshape, tensor.Float64)
				indices := ref.CastIndices(idx, ishape, tensor.Int64)
				w := ref.FloatTensor(up, oshape, tensor.Float64)
				t.Run(fmt.Sprintf("%s/data%v/axis%d", kind, dshape, axis), func(t *testing.T) {
					for _, machine := range []string{"tape", "lisp"} {
						first, second := gradsOf(t, machine, kind, data, indices, w, axis)
						assert.InDeltaSlice(t, want, first, 1e-9, machine)
						assert.InDeltaSlice(t, want, second, 1e-9, machine+" second run")
					}
					dst := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(dshape...))
					var err error
					if kind == opGather {
						err = gather.IndexAdd(dst, indices, w, axis)
					} else {
						err = gather.ScatterAdd(dst, indices, w, axis)
					}
					require.NoError(t, err)
					assert.InDeltaSlice(t, want, ref.Floats(dst), 1e-9)
				})
			}
		}
	}
}

func TestWithGradScaleAndWithoutGrad(t *testing.T) {
	data := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}))
	indices := tensor.New(tensor.WithShape(3), tensor.WithBacking([]int64{2, 2, 0}))
	w := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{1, 1, 1, 1, 1, 1}))
	for _, machine := range []string{"tape", "lisp"} {
		first, _ := gradsOf(t, machine, opGather, data, indices, w, 0, gather.WithGradScale(0.5))
		assert.Equal(t, []float64{0.5, 0.5, 0, 0, 1, 1}, first, machine)
	}
	// gather.GatherElements on the last axis and on the first: both backward loops.
	pick := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]int64{1, 1, 0, -1, 0, 2}))
	for _, machine := range []string{"tape", "lisp"} {
		first, _ := gradsOf(t, machine, opGatherElements, data, pick.Clone().(*tensor.Dense), w, 0, gather.WithGradScale(0.25))
		assert.Equal(t, []float64{0.5, 0, 0.25, 0.25, 0, 0.5}, first, machine+" axis 0")
		last := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]int64{1, 1, 0, -1, 0, 0}))
		first, _ = gradsOf(t, machine, opGatherElements, data, last, w, 1, gather.WithGradScale(0.25))
		assert.Equal(t, []float64{0, 0.5, 0.25, 0.25, 0.5, 0}, first, machine+" axis 1")
	}

	// A frozen table: the gather passes no gradient to it, while another
	// consumer of the same table still does.
	for _, machine := range []string{"tape", "lisp"} {
		t.Run("frozen/"+machine, func(t *testing.T) {
			g := gorgonia.NewGraph()
			d := gorgonia.NodeFromAny(g, data.Clone(), gorgonia.WithName("table"))
			i := gorgonia.NodeFromAny(g, indices, gorgonia.WithName("i"))
			out, err := gather.Gather(d, i, 0, gather.WithoutGrad())
			require.NoError(t, err)
			cost := gorgonia.Must(gorgonia.Add(gorgonia.Must(gorgonia.Sum(out)), gorgonia.Must(gorgonia.Sum(d))))
			var vm gorgonia.VM
			if machine == "tape" {
				_, err = gorgonia.Grad(cost, d)
				require.NoError(t, err)
				vm = vmtest.New(t, g)
			} else {
				vm = gorgonia.NewLispMachine(g)
			}
			defer vm.Close()
			require.NoError(t, vm.RunAll())
			gv, err := d.Grad()
			require.NoError(t, err)
			assert.Equal(t, []float64{1, 1, 1, 1, 1, 1}, gv.Data())
		})
	}

	// Only through the frozen gather: gorgonia.Grad finds no path.
	g := gorgonia.NewGraph()
	d := gorgonia.NodeFromAny(g, data.Clone(), gorgonia.WithName("table"))
	i := gorgonia.NodeFromAny(g, indices, gorgonia.WithName("i"))
	out, err := gather.Gather(d, i, 0, gather.WithoutGrad())
	require.NoError(t, err)
	_, err = gorgonia.Grad(gorgonia.Must(gorgonia.Sum(out)), d)
	require.Error(t, err)
}

// Non-float data has no gradient: a clear error when the gradient is built.
func TestNonFloatGradient(t *testing.T) {
	g := gorgonia.NewGraph()
	d := gorgonia.NewMatrix(g, tensor.Int64, gorgonia.WithShape(3, 2), gorgonia.WithName("d"))
	i := gorgonia.NewVector(g, tensor.Int64, gorgonia.WithShape(2), gorgonia.WithName("i"))
	out, err := gather.Gather(d, i, 0)
	require.NoError(t, err)
	_, err = out.Op().(gorgonia.SDOp).SymDiff(gorgonia.Nodes{d, i}, out, out)
	require.ErrorIs(t, err, gather.ErrDtype)
	assert.Contains(t, err.Error(), "gather: no gradient for int64 data")

	dst := tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(3, 2))
	err = gather.IndexAdd(dst, tensor.New(tensor.WithShape(1), tensor.WithBacking([]int64{0})), tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(1, 2)), 0)
	require.ErrorIs(t, err, gather.ErrDtype)
}

// The gradient op clears a reused buffer, adds into an IncrDo target, and
// leaves both untouched on error.
func TestGradOpPreallocAndIncr(t *testing.T) {
	g := gorgonia.NewGraph()
	d := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(3, 2), gorgonia.WithName("d"))
	i := gorgonia.NewVector(g, tensor.Int64, gorgonia.WithShape(3), gorgonia.WithName("i"))
	out, err := gather.Gather(d, i, 0, gather.WithGradScale(2))
	require.NoError(t, err)
	grads, err := out.Op().(gorgonia.SDOp).SymDiff(gorgonia.Nodes{d, i}, out, out)
	require.NoError(t, err)
	diff := grads[0].Op()

	idx := tensor.New(tensor.WithShape(3), tensor.WithBacking([]int64{1, 1, -1}))
	up := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}))
	want := []float64{0, 0, 8, 12, 10, 12}

	stale := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{9, 9, 9, 9, 9, 9}))
	v, err := diff.(gorgonia.UsePreallocDoer).UsePreallocDo(stale, nil, idx, up)
	require.NoError(t, err)
	assert.Same(t, stale, v)
	assert.Equal(t, want, stale.Float64s())

	acc := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{1, 1, 1, 1, 1, 1}))
	require.NoError(t, diff.(gorgonia.IncrDoer).IncrDo(acc, nil, idx, up))
	assert.Equal(t, []float64{1, 1, 9, 13, 11, 13}, acc.Float64s())

	bad := tensor.New(tensor.WithShape(3), tensor.WithBacking([]int64{1, 3, 0}))
	_, err = diff.(gorgonia.UsePreallocDoer).UsePreallocDo(stale, nil, bad, up)
	require.ErrorIs(t, err, gather.ErrIndexOutOfRange)
	assert.Equal(t, want, stale.Float64s(), "a failed call changed the buffer")
	require.ErrorIs(t, diff.(gorgonia.IncrDoer).IncrDo(acc, nil, bad, up), gather.ErrIndexOutOfRange)
	assert.Equal(t, []float64{1, 1, 9, 13, 11, 13}, acc.Float64s(), "a failed call changed the target")

	v, err = diff.Do(nil, idx, up)
	require.NoError(t, err)
	assert.Equal(t, want, v.Data())
}

// The gradient of an empty Gather is zeros: with an upstream gradient the
// caller gives (which Gorgonia does not allocate), Backpropagate builds
// it and the TapeMachine runs it, and the gradient op itself writes zeros
// over a stale buffer. Only a zero-sized gradient Gorgonia would allocate,
// which would crash its TapeMachine, is refused.
func TestEmptyGatherGradient(t *testing.T) {
	for _, ishape := range [][]int{{0}, {0, 3}} {
		g := gorgonia.NewGraph()
		d := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(5), gorgonia.WithName("d"),
			gorgonia.WithValue(tensor.New(tensor.WithBacking([]float64{1, 2, 3, 4, 5}))))
		i := gorgonia.NodeFromAny(g, tensor.New(tensor.Of(tensor.Int), tensor.WithShape(ishape...)), gorgonia.WithName("i"))
		out, err := gather.Gather(d, i, 0)
		require.NoError(t, err)
		upv := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(ishape...))
		up := gorgonia.NodeFromAny(g, upv, gorgonia.WithName("up"))
		grads, err := gorgonia.Backpropagate(gorgonia.Nodes{out}, gorgonia.Nodes{up}, gorgonia.Nodes{d})
		require.NoError(t, err, "shape %v", ishape)
		vm := vmtest.Bound(t, g, d)
		require.NoError(t, vm.RunAll(), "shape %v", ishape)
		vm.Close()
		gd, err := d.Grad()
		require.NoError(t, err)
		assert.Equal(t, []float64{0, 0, 0, 0, 0}, gd.Data(), "shape %v", ishape)

		stale := tensor.New(tensor.WithBacking([]float64{9, 9, 9, 9, 9}))
		v, err := grads[0].Op().(gorgonia.UsePreallocDoer).UsePreallocDo(stale, d.Value(), i.Value(), upv)
		require.NoError(t, err)
		assert.Equal(t, []float64{0, 0, 0, 0, 0}, v.Data(), "shape %v", ishape)
	}
	// A cost over the empty output: the TapeMachine would allocate its
	// zero-sized gradient and crash, so Grad refuses it.
	g := gorgonia.NewGraph()
	d := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(5), gorgonia.WithName("d"))
	i := gorgonia.NodeFromAny(g, tensor.New(tensor.Of(tensor.Int), tensor.WithShape(0)), gorgonia.WithName("i"))
	out, err := gather.Gather(d, i, 0)
	require.NoError(t, err)
	_, err = gorgonia.Grad(gorgonia.Must(gorgonia.Sum(out)), d)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "empty batch")
}
