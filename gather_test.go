package gather

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/gathergrad/gather/internal/vmtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/ref"
	"github.com/gathergrad/gather/machine"
)

var indexDtypes = []tensor.Dtype{tensor.Int, tensor.Int32, tensor.Int64}

// machines runs a graph's forward pass in each of Gorgonia's machines.
var machines = []struct {
	name string
	new  func(g *gorgonia.ExprGraph) gorgonia.VM
}{
	{"tape", func(g *gorgonia.ExprGraph) gorgonia.VM { return gorgonia.NewTapeMachine(g) }},
	{"lisp", func(g *gorgonia.ExprGraph) gorgonia.VM { return gorgonia.NewLispMachine(g, gorgonia.ExecuteFwdOnly()) }},
	{"machine", func(g *gorgonia.ExprGraph) gorgonia.VM { return must(machine.New(g)) }},
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// graphForward builds op(data, indices, axis) on a new graph, runs it in
// every machine and checks each gives the same tensor as want.
//
// LispMachine pairs every value with a derivative and supports only float
// and bool data, so other dtypes run in the TapeMachine alone.
func graphForward(t *testing.T, kind operator, data, indices *tensor.Dense, axis int, want *tensor.Dense) {
	t.Helper()
	for _, m := range machines {
		if dt := data.Dtype(); m.name == "lisp" && dt != tensor.Float64 && dt != tensor.Float32 && dt != tensor.Bool {
			continue
		}
		g := gorgonia.NewGraph()
		d := gorgonia.NodeFromAny(g, data, gorgonia.WithName("data"))
		i := gorgonia.NodeFromAny(g, indices, gorgonia.WithName("indices"))
		out, err := applyKind(kind, d, i, axis, nil)
		require.NoError(t, err, m.name)
		require.True(t, want.Shape().Eq(out.Shape()), "%s: node shape %v, want %v", m.name, out.Shape(), want.Shape())
		vm := m.new(g)
		require.NoError(t, vm.RunAll(), m.name)
		got, err := operand.Read("test", "output", out.Value())
		require.NoError(t, err, m.name)
		requireSameTensor(t, want, got)
		vm.Close()
	}
}

func TestTakeMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for rank := 1; rank <= 4; rank++ {
		for axis := -rank; axis < rank; axis++ {
			for q := 0; q <= 2; q++ {
				for _, dt := range indexDtypes {
					dshape := make([]int, rank)
					for d := range dshape {
						dshape[d] = 1 + r.IntN(4)
					}
					ax := (axis + rank) % rank
					ishape := make([]int, q)
					for d := range ishape {
						ishape[d] = 1 + r.IntN(3)
					}
					data := ref.RandFloats(r, tensor.Shape(dshape).TotalSize())
					idx := ref.RandIndices(r, tensor.Shape(ishape).TotalSize(), dshape[ax])
					name := fmt.Sprintf("data%v/axis%d/indices%v/%v", dshape, axis, ishape, dt)
					t.Run(name, func(t *testing.T) {
						want, oshape := ref.Take(data, dshape, idx, ishape, ax)
						dataT := ref.FloatTensor(data, dshape, tensor.Float64)
						idxT := ref.CastIndices(idx, ishape, dt)
						dataBefore, idxBefore := dataT.Clone().(*tensor.Dense), idxT.Clone().(*tensor.Dense)

						got, err := Take(dataT, idxT, axis)
						require.NoError(t, err)
						wantT := ref.FloatTensor(want, oshape, tensor.Float64)
						requireSameTensor(t, wantT, got)
						requireSameTensor(t, dataBefore, dataT)
						requireSameTensor(t, idxBefore, idxT)

						graphForward(t, opGather, dataT, idxT, axis, wantT)
					})
				}
			}
		}
	}
}

func TestTakeAlongAxisMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for rank := 1; rank <= 4; rank++ {
		for axis := -rank; axis < rank; axis++ {
			for _, dt := range indexDtypes {
				for _, smaller := range []bool{false, true} {
					ax := (axis + rank) % rank
					dshape, ishape := make([]int, rank), make([]int, rank)
					for d := range dshape {
						dshape[d] = 1 + r.IntN(4)
						ishape[d] = dshape[d]
						if smaller && d != ax {
							ishape[d] = 1 + r.IntN(dshape[d])
						}
					}
					ishape[ax] = 1 + r.IntN(5) // any length along the axis
					data := ref.RandFloats(r, tensor.Shape(dshape).TotalSize())
					idx := ref.RandIndices(r, tensor.Shape(ishape).TotalSize(), dshape[ax])
					name := fmt.Sprintf("data%v/axis%d/indices%v/%v", dshape, axis, ishape, dt)
					t.Run(name, func(t *testing.T) {
						want := ref.FloatTensor(ref.TakeAlong(data, dshape, idx, ishape, ax), ishape, tensor.Float32)
						dataT := ref.FloatTensor(data, dshape, tensor.Float32)
						idxT := ref.CastIndices(idx, ishape, dt)
						dataBefore, idxBefore := dataT.Clone().(*tensor.Dense), idxT.Clone().(*tensor.Dense)

						got, err := TakeAlongAxis(dataT, idxT, axis)
						require.NoError(t, err)
						requireSameTensor(t, want, got)
						requireSameTensor(t, dataBefore, dataT)
						requireSameTensor(t, idxBefore, idxT)

						graphForward(t, opGatherElements, dataT, idxT, axis, want)
					})
				}
			}
		}
	}
}

// The ONNX operator documents' examples.
func TestSpecExamples(t *testing.T) {
	data := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float32{1, 1.2, 2.3, 3.4, 4.5, 5.7}))
	got, err := Take(data, tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]int64{0, 1, 1, 2})), 0)
	require.NoError(t, err)
	assert.Equal(t, tensor.Shape{2, 2, 2}, got.Shape())
	assert.Equal(t, []float32{1, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7}, got.Data())

	data = tensor.New(tensor.WithShape(3, 3), tensor.WithBacking([]float32{1, 1.2, 1.9, 2.3, 3.4, 3.9, 4.5, 5.7, 5.9}))
	got, err = Take(data, tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]int64{0, 2})), 1)
	require.NoError(t, err)
	assert.Equal(t, tensor.Shape{3, 1, 2}, got.Shape())
	assert.Equal(t, []float32{1, 1.9, 2.3, 3.9, 4.5, 5.9}, got.Data())

	data = tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]int32{1, 2, 3, 4}))
	got, err = TakeAlongAxis(data, tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]int64{0, 0, 1, 0})), 1)
	require.NoError(t, err)
	assert.Equal(t, []int32{1, 1, 4, 3}, got.Data())

	data = tensor.New(tensor.WithShape(3, 3), tensor.WithBacking([]int32{1, 2, 3, 4, 5, 6, 7, 8, 9}))
	got, err = TakeAlongAxis(data, tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]int32{1, 2, 0, 2, 0, 0})), 0)
	require.NoError(t, err)
	assert.Equal(t, []int32{4, 8, 3, 7, 2, 3}, got.Data())

	got, err = TakeAlongAxis(data, tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]int{-1, -2, 0, -2, 0, 0})), 0)
	require.NoError(t, err)
	assert.Equal(t, []int32{7, 5, 3, 4, 2, 3}, got.Data())
}

// Gather and GatherElements move elements of every dtype unchanged.
func TestDataDtypes(t *testing.T) {
	cases := []struct {
		name string
		data any
		want []any // Take on axis 0 with [2, 0, -1], TakeAlongAxis with [[1, 0, 1]]
	}{
		{"bool", []bool{true, false, false}, []any{[]bool{false, true, false}, []bool{false, true, false}}},
		{"int8", []int8{-1, 2, -3}, []any{[]int8{-3, -1, -3}, []int8{2, -1, 2}}},
		{"uint16", []uint16{10, 20, 30}, []any{[]uint16{30, 10, 30}, []uint16{20, 10, 20}}},
		{"int", []int{7, 8, 9}, []any{[]int{9, 7, 9}, []int{8, 7, 8}}},
		{"uint64", []uint64{1 << 63, 2, 3}, []any{[]uint64{3, 1 << 63, 3}, []uint64{2, 1 << 63, 2}}},
		{"complex64", []complex64{1i, 2, 3 + 1i}, []any{[]complex64{3 + 1i, 1i, 3 + 1i}, []complex64{2, 1i, 2}}},
		{"complex128", []complex128{1i, 2, 3 + 1i}, []any{[]complex128{3 + 1i, 1i, 3 + 1i}, []complex128{2, 1i, 2}}},
		{"string", []string{"a", "bb", "ccc"}, []any{[]string{"ccc", "a", "ccc"}, []string{"bb", "a", "bb"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := tensor.New(tensor.WithShape(3), tensor.WithBacking(c.data))
			got, err := Take(data, tensor.New(tensor.WithBacking([]int64{2, 0, -1})), 0)
			require.NoError(t, err)
			assert.Equal(t, c.want[0], got.Data())

			data2 := tensor.New(tensor.WithShape(1, 3), tensor.WithBacking(c.data))
			got, err = TakeAlongAxis(data2, tensor.New(tensor.WithShape(1, 3), tensor.WithBacking([]int32{1, 0, 1})), 1)
			require.NoError(t, err)
			assert.Equal(t, c.want[1], got.Data())

			graphForward(t, opGather, data, tensor.New(tensor.WithBacking([]int64{2, 0, -1})), 0,
				tensor.New(tensor.WithShape(3), tensor.WithBacking(c.want[0])))
		})
	}
}

func TestScalarIndices(t *testing.T) {
	data := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{0, 1, 10, 11, 20, 21}))

	// A 0-d tensor of indices.
	got, err := Take(data, tensor.New(tensor.FromScalar(int32(-1))), 0)
	require.NoError(t, err)
	assert.Equal(t, tensor.Shape{2}, got.Shape())
	assert.Equal(t, []float64{20, 21}, got.Data())
	got, err = Take(data, tensor.New(tensor.FromScalar(1)), 1)
	require.NoError(t, err)
	assert.Equal(t, []float64{1, 11, 21}, got.Data())

	// Scalar nodes of each index dtype, in both machines.
	scalars := []any{int(2), int32(2), int64(-1)}
	for _, v := range scalars {
		for _, m := range machines {
			t.Run(fmt.Sprintf("%T/%s", v, m.name), func(t *testing.T) {
				g := gorgonia.NewGraph()
				d := gorgonia.NodeFromAny(g, data, gorgonia.WithName("data"))
				i := gorgonia.NewScalar(g, tensor.Dtype{Type: reflect.TypeOf(v)}, gorgonia.WithValue(v), gorgonia.WithName("i"))
				out, err := Gather(d, i, 0)
				require.NoError(t, err)
				assert.Equal(t, tensor.Shape{2}, out.Shape())
				vm := m.new(g)
				defer vm.Close()
				require.NoError(t, vm.RunAll())
				assert.Equal(t, []float64{20, 21}, out.Value().Data())
			})
		}
	}

	// Vector data and a scalar index give a scalar.
	vec := tensor.New(tensor.WithBacking([]float64{5, 6, 7}))
	got, err = Take(vec, tensor.New(tensor.FromScalar(int64(1))), 0)
	require.NoError(t, err)
	assert.True(t, got.Shape().IsScalar())
	assert.Equal(t, 6.0, got.Data())
	g := gorgonia.NewGraph()
	d := gorgonia.NodeFromAny(g, vec, gorgonia.WithName("vec"))
	i := gorgonia.NewScalar(g, tensor.Int, gorgonia.WithValue(-3), gorgonia.WithName("i"))
	out, err := Gather(d, i, 0)
	require.NoError(t, err)
	assert.True(t, out.IsScalar())
	vm := vmtest.New(t, g)
	defer vm.Close()
	require.NoError(t, vm.RunAll())
	assert.Equal(t, 5.0, out.Value().Data())
}

func TestEmpty(t *testing.T) {
	data := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6}))
	empty := tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(0))
	got, err := Take(data, empty, 0)
	require.NoError(t, err)
	assert.Equal(t, tensor.Shape{0, 2}, got.Shape())
	got, err = Take(data, tensor.New(tensor.Of(tensor.Int), tensor.WithShape(2, 0)), 1)
	require.NoError(t, err)
	assert.Equal(t, tensor.Shape{3, 2, 0}, got.Shape())
	got, err = TakeAlongAxis(data, tensor.New(tensor.Of(tensor.Int32), tensor.WithShape(0, 2)), 0)
	require.NoError(t, err)
	assert.Equal(t, tensor.Shape{0, 2}, got.Shape())

	// Empty data with empty indices is fine; with any index it is out of range.
	noRows := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(0, 2))
	got, err = Take(noRows, empty, 0)
	require.NoError(t, err)
	assert.Equal(t, tensor.Shape{0, 2}, got.Shape())
	_, err = Take(noRows, tensor.New(tensor.WithShape(1), tensor.WithBacking([]int64{0})), 0)
	var ie *IndexError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, 0, ie.Size)
	assert.EqualError(t, err, "gather: indices[0] = 0 is out of range: axis 0 has size 0")

	// Data with a zero-size axis other than the gathered one.
	wide := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(3, 0))
	got, err = Take(wide, tensor.New(tensor.WithBacking([]int64{2, 0})), 0)
	require.NoError(t, err)
	assert.Equal(t, tensor.Shape{2, 0}, got.Shape())

	graphForward(t, opGather, data, empty, 0, tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(0, 2)))
}

func TestErrors(t *testing.T) {
	f := func(shape ...int) *tensor.Dense {
		return tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(shape...))
	}
	i64 := func(shape []int, v ...int64) *tensor.Dense {
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
	}
	cases := []struct {
		name    string
		kind    operator
		data    tensor.Tensor
		indices tensor.Tensor
		axis    int
		is      error
		msg     string
	}{
		{"index too large", opGather, f(5, 2), i64([]int{2, 2}, 0, 1, 7, 2), 0, ErrIndexOutOfRange,
			"gather: indices[1,0] = 7 is out of range [-5, 4] for axis 0 of size 5"},
		{"index too small", opGather, f(5, 2), i64([]int{3}, 0, -6, 1), 0, ErrIndexOutOfRange,
			"gather: indices[1] = -6 is out of range [-5, 4] for axis 0 of size 5"},
		{"index on axis 1", opGather, f(5, 2), i64([]int{1}, 2), -1, ErrIndexOutOfRange,
			"gather: indices[0] = 2 is out of range [-2, 1] for axis 1 of size 2"},
		{"extreme index", opGather, f(5, 2), i64([]int{1}, -1<<63), 0, ErrIndexOutOfRange,
			"gather: indices[0] = -9223372036854775808 is out of range [-5, 4] for axis 0 of size 5"},
		{"elements index", opGatherElements, f(2, 3), i64([]int{2, 2}, 0, 1, 2, 3), 1, ErrIndexOutOfRange,
			"gather_elements: indices[1,1] = 3 is out of range [-3, 2] for axis 1 of size 3"},
		{"elements index on axis 0", opGatherElements, f(3, 2), i64([]int{2, 2}, 0, 1, 2, -4), 0, ErrIndexOutOfRange,
			"gather_elements: indices[1,1] = -4 is out of range [-3, 2] for axis 0 of size 3"},
		{"elements index on a middle axis", opGatherElements, f(2, 3, 2), i64([]int{2, 2, 2}, 0, 1, 2, 0, 1, 1, 2, 3), 1, ErrIndexOutOfRange,
			"gather_elements: indices[1,1,1] = 3 is out of range [-3, 2] for axis 1 of size 3"},
		{"axis too large", opGather, f(5, 2), i64([]int{1}, 0), 2, ErrAxisOutOfRange,
			"gather: axis 2 is out of range [-2, 1] for data of rank 2"},
		{"axis too small", opGatherElements, f(5, 2), i64([]int{1, 1}, 0), -3, ErrAxisOutOfRange,
			"gather_elements: axis -3 is out of range [-2, 1] for data of rank 2"},
		{"float indices", opGather, f(5, 2), f(2), 0, ErrDtype,
			"gather: indices must be int, int32 or int64, got float64"},
		{"uint8 indices", opGatherElements, f(5, 2), tensor.New(tensor.WithShape(1, 1), tensor.WithBacking([]uint8{1})), 0, ErrDtype,
			"gather_elements: indices must be int, int32 or int64, got uint8"},
		{"scalar data", opGather, tensor.New(tensor.FromScalar(1.0)), i64([]int{1}, 0), 0, ErrShape,
			"gather: data must have rank >= 1, got a scalar"},
		{"rank mismatch", opGatherElements, f(5, 2), i64([]int{2}, 0, 1), 0, ErrShape,
			"gather_elements: indices of shape (2) have rank 1, data of shape (5, 2) has rank 2; they must be equal"},
		{"indices wider than data", opGatherElements, f(5, 2), i64([]int{1, 3}, 0, 1, 0), 0, ErrShape,
			"gather_elements: indices of shape (1, 3) are larger than data of shape (5, 2) on axis 1 (3 > 2)"},
		{"nil data", opGather, nil, i64([]int{1}, 0), 0, ErrShape, "gather: data is nil"},
		{"nil indices", opGatherElements, f(1), nil, 0, ErrShape, "gather_elements: indices is nil"},
		{"sparse data", opGather, tensor.CSRFromCoord(tensor.Shape{2, 2}, []int{0}, []int{1}, []float64{3}), i64([]int{1}, 0), 0, ErrDtype,
			"gather: data must be a *tensor.Dense"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.kind == opGather {
				_, err = Take(c.data, c.indices, c.axis)
			} else {
				_, err = TakeAlongAxis(c.data, c.indices, c.axis)
			}
			require.ErrorIs(t, err, c.is)
			assert.Contains(t, err.Error(), c.msg)
			if c.is == ErrIndexOutOfRange {
				var ie *IndexError
				require.ErrorAs(t, err, &ie)
				assert.Equal(t, c.msg, ie.Error())
			}
		})
	}
}

// Graph construction rejects what it can see: axis, dtypes, ranks, shapes.
func TestGraphConstructionErrors(t *testing.T) {
	g := gorgonia.NewGraph()
	m := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(5, 2), gorgonia.WithName("m"))
	v := gorgonia.NewVector(g, tensor.Int64, gorgonia.WithShape(3), gorgonia.WithName("v"))
	fv := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(3), gorgonia.WithName("fv"))
	im := gorgonia.NewMatrix(g, tensor.Int32, gorgonia.WithShape(2, 3), gorgonia.WithName("im"))
	noRows := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(0, 2), gorgonia.WithName("noRows"))

	_, err := Gather(m, v, 2)
	assert.ErrorIs(t, err, ErrAxisOutOfRange)
	_, err = Gather(m, fv, 0)
	assert.ErrorIs(t, err, ErrDtype)
	_, err = GatherElements(m, v, 0)
	assert.ErrorIs(t, err, ErrShape)
	_, err = GatherElements(m, im, 0)
	assert.ErrorIs(t, err, ErrShape)
	assert.Contains(t, err.Error(), "(3 > 2)")
	_, err = Gather(noRows, v, 0)
	assert.ErrorIs(t, err, ErrIndexOutOfRange)
	_, err = Gather(nil, v, 0)
	assert.ErrorIs(t, err, ErrShape)
}

// Errors from the op's Do, and from a machine's RunAll through Cause.
func TestRunTimeErrors(t *testing.T) {
	data := tensor.New(tensor.WithShape(5, 2), tensor.WithBacking(make([]float64, 10)))
	bad := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]int64{0, 1, 7, 2}))
	const msg = "gather: indices[1,0] = 7 is out of range [-5, 4] for axis 0 of size 5"

	for _, m := range machines {
		t.Run(m.name, func(t *testing.T) {
			g := gorgonia.NewGraph()
			d := gorgonia.NodeFromAny(g, data, gorgonia.WithName("data"))
			i := gorgonia.NodeFromAny(g, bad, gorgonia.WithName("indices"))
			out, err := Gather(d, i, 0)
			require.NoError(t, err)

			_, err = out.Op().Do(data, bad)
			var ie *IndexError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, []int{1, 0}, ie.Pos)
			assert.Equal(t, int64(7), ie.Value)

			vm := m.new(g)
			defer vm.Close()
			err = vm.RunAll()
			require.Error(t, err)
			assert.Contains(t, err.Error(), msg)
			cause := Cause(err)
			require.ErrorIs(t, cause, ErrIndexOutOfRange)
			ie = nil
			require.ErrorAs(t, cause, &ie)
			assert.Equal(t, IndexError{Op: "gather", Pos: []int{1, 0}, Value: 7, Axis: 0, Size: 5}, *ie)
		})
	}
	assert.Nil(t, Cause(nil))
	other := errors.New("other")
	assert.Equal(t, other, Cause(other))
}

// Nodes that differ in axis or any option must stay distinct under
// Gorgonia's hash-consing; identical ones are merged.
func TestHashConsing(t *testing.T) {
	g := gorgonia.NewGraph()
	d := gorgonia.NewTensor(g, tensor.Float64, 3, gorgonia.WithShape(4, 4, 4), gorgonia.WithName("d"))
	i := gorgonia.NewMatrix(g, tensor.Int64, gorgonia.WithShape(4, 4), gorgonia.WithName("i"))
	i3 := gorgonia.NewTensor(g, tensor.Int64, 3, gorgonia.WithShape(4, 4, 4), gorgonia.WithName("i3"))

	build := []func() (*gorgonia.Node, error){
		func() (*gorgonia.Node, error) { return Gather(d, i, 0) },
		func() (*gorgonia.Node, error) { return Gather(d, i, 1) },
		func() (*gorgonia.Node, error) { return Gather(d, i, 2) },
		func() (*gorgonia.Node, error) { return Gather(d, i, 0, WithGradScale(2)) },
		func() (*gorgonia.Node, error) { return Gather(d, i, 0, WithoutGrad()) },
		func() (*gorgonia.Node, error) { return Gather(d, i, 0, WithName("named")) },
		func() (*gorgonia.Node, error) { return GatherElements(d, i3, 0) },
		func() (*gorgonia.Node, error) { return GatherElements(d, i3, 1) },
		func() (*gorgonia.Node, error) { return GatherElements(d, i3, 1, WithGradScale(0.5)) },
	}
	seen := map[*gorgonia.Node]int{}
	for k, b := range build {
		n, err := b()
		require.NoError(t, err)
		if prev, dup := seen[n]; dup {
			t.Fatalf("node %d (%v) was merged into node %d", k, n.Op(), prev)
		}
		seen[n] = k
	}
	// The same gather twice is one node; -1 is the same axis as 2.
	a, err := Gather(d, i, 2)
	require.NoError(t, err)
	b, err := Gather(d, i, -1)
	require.NoError(t, err)
	assert.Same(t, a, b)
	n, err := Gather(d, i, 0, WithName("named"))
	require.NoError(t, err)
	assert.Equal(t, "named", n.Name())
}

// UsePreallocDo writes into the buffer it is given when the result fits and
// into a new tensor otherwise; a second run on the same graph sees new inputs.
//
// Gorgonia v0.9.18's machines rarely pass a buffer: TapeMachine.Reset drops
// the registers, so it calls UsePreallocDo only when it reuses a register
// within a run, and LispMachine wraps ops in an ExternalOp without one.
func TestPreallocReuse(t *testing.T) {
	for _, kind := range []operator{opGather, opGatherElements} {
		t.Run(kind.String(), func(t *testing.T) {
			g := gorgonia.NewGraph()
			data := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}))
			idx := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]int64{0, 1, 1, 0}))
			d := gorgonia.NodeFromAny(g, data, gorgonia.WithName("data"))
			i := gorgonia.NodeFromAny(g, idx, gorgonia.WithName("i"))
			out, err := applyKind(kind, d, i, 1, nil)
			require.NoError(t, err)
			cost := gorgonia.Must(gorgonia.Sum(out))
			vm := gorgonia.NewLispMachine(g)
			defer vm.Close()
			require.NoError(t, vm.RunAll())
			firstCost := cost.Value().Data()

			require.NoError(t, gorgonia.Let(i, tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]int64{2, 2, 0, 2}))))
			vm2 := gorgonia.NewLispMachine(g)
			defer vm2.Close()
			require.NoError(t, vm2.RunAll())
			second := out.Value().(*tensor.Dense)
			assert.NotEqual(t, firstCost, cost.Value().Data())
			want := []float64{3, 3, 4, 6}
			if kind == opGather {
				want = []float64{3, 3, 1, 3, 6, 6, 4, 6}
			}
			assert.Equal(t, want, second.Float64s())

			// Directly: a fitting buffer is used, a misfit one is not.
			o := out.Op().(gorgonia.UsePreallocDoer)
			buf := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(out.Shape()...))
			v, err := o.UsePreallocDo(buf, data, idx)
			require.NoError(t, err)
			assert.Same(t, buf, v)
			first := []float64{1, 2, 2, 1, 4, 5, 5, 4}
			if kind == opGatherElements {
				first = []float64{1, 2, 5, 4}
			}
			assert.Equal(t, first, buf.Float64s())
			misfit := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(7))
			v, err = o.UsePreallocDo(misfit, data, idx)
			require.NoError(t, err)
			assert.NotSame(t, misfit, v)
			assert.Equal(t, make([]float64, 7), misfit.Float64s(), "a misfit buffer was written")
			aliased := data.Clone().(*tensor.Dense)
			v, err = o.UsePreallocDo(aliased, aliased, idx)
			require.NoError(t, err)
			assert.NotSame(t, aliased, v, "an output aliasing the data was written in place")
		})
	}
}
