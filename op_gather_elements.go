package gather

import (
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
)

// GatherElements adds ONNX GatherElements (opset 13) to data's graph: one
// element of data per index, picked along axis.
//
// indices have the rank r of data, dtype Int, Int32 or Int64, and on every
// axis other than axis a size no larger than data's (ONNX's equal shapes are
// the common case); the output has the shape of indices. For r = 3 and axis 1:
//
//	out[i][j][k] = data[i][indices[i][j][k]][k]
//
// For data [[1, 2], [3, 4]] and indices [[0, 0], [1, 0]] on axis 1, the
// output is [[1, 1], [4, 3]].
//
// Negative indices count from the end of the axis. A bad axis, index dtype,
// rank or shape is an error here; an index out of [-s, s-1] is an
// *IndexError when the graph runs. The gradient with respect to data is the
// upstream gradient added at the picked positions (see ScatterAdd).
// It takes the Options of both ops, not Gather's own GatherOptions.
func GatherElements(data, indices *gorgonia.Node, axis int, opts ...Option) (*gorgonia.Node, error) {
	o, err := newOp(opGatherElements, data, indices, axis, elementsConfig(opts))
	if err != nil {
		return nil, err
	}
	return o.apply(data, indices)
}

// TakeAlongAxis is GatherElements on tensors: it returns a tensor of the
// shape of indices holding the elements of data they pick along axis,
// under the rules given for GatherElements. Inputs are not modified. It is
// O(size of indices).
//
// tensor.WithReuse(out) and tensor.WithIncr(out) write the result into out
// or add it into out, under the rules given for Take.
func TakeAlongAxis(data, indices tensor.Tensor, axis int, opts ...tensor.FuncOpt) (*tensor.Dense, error) {
	dst, err := parseOut(opGatherElements, opts)
	if err != nil {
		return nil, err
	}
	return forward(opGatherElements, data, indices, axis, dst, label{Op: opGatherElements.String()})
}

// elementPicker is the operator of GatherElements: it picks one element
// per index.
type elementPicker struct{}

func (elementPicker) String() string { return "gather_elements" }
func (elementPicker) title() string  { return "GatherElements" }
func (elementPicker) slices() bool   { return false }

func (elementPicker) take(out, data *tensor.Dense, ix operand.Indices, axis int, _, add bool) int {
	if ix.Shape.TotalSize() == 0 {
		return -1
	}
	g := kernel.NewAlong(data.Shape(), ix.Shape, axis)
	if add {
		f, _ := operand.PickAddable(data.Dtype(), operand.Pick(ix.Dtype, alongAdds[0], alongAdds[1], alongAdds[2]))
		f(out, data, ix, g)
		return -1
	}
	return operand.PickWord(operand.WordOf(data.Dtype()), operand.Pick(ix.Dtype, alongs[0], alongs[1], alongs[2]))(out, data, ix, g)
}

// alongs and alongAdds hold TakeAlong's loops and its adding loops, for
// Int, Int32 and Int64 indices. They take g by value: a pointer passed to
// a function picked at run time would move g to the heap.
var (
	alongs    = [3]operand.Words[alongFunc]{alongWords[int](), alongWords[int32](), alongWords[int64]()}
	alongAdds = [3][5]alongAddFunc{alongAddable[int](), alongAddable[int32](), alongAddable[int64]()}
)

type (
	alongFunc    func(out, data *tensor.Dense, ix operand.Indices, g kernel.Along) int
	alongAddFunc func(out, data *tensor.Dense, ix operand.Indices, g kernel.Along)
)

func alongWords[I kernel.Index]() operand.Words[alongFunc] {
	return operand.Words[alongFunc]{takeAlong[uint8, I], takeAlong[uint16, I], takeAlong[uint32, I], takeAlong[uint64, I],
		takeAlong[complex128, I], takeAlong[string, I], takeAlong[kernel.Pointer, I]}
}

func alongAddable[I kernel.Index]() [5]alongAddFunc {
	return [5]alongAddFunc{takeAlongAdd[float32, I], takeAlongAdd[float64, I], takeAlongAdd[int, I], takeAlongAdd[int32, I], takeAlongAdd[int64, I]}
}

func takeAlong[T any, I kernel.Index](out, data *tensor.Dense, ix operand.Indices, g kernel.Along) int {
	return kernel.TakeAlong(operand.Elems[T](out), operand.Elems[T](data), operand.Slice[I](ix), &g)
}

func takeAlongAdd[T kernel.Number, I kernel.Index](out, data *tensor.Dense, ix operand.Indices, g kernel.Along) {
	kernel.TakeAlongAdd(operand.Elems[T](out), operand.Elems[T](data), operand.Slice[I](ix), &g)
}

// ScatterAdd adds src into dst at the positions that TakeAlongAxis(dst,
// indices, axis) reads: it is the gradient of GatherElements with respect to
// data (ONNX ScatterElements with reduction "add", PyTorch scatter_add_).
// For a matrix and axis 1 it is
//
//	for i, row := range indices { for j, k := range row { dst[i][k] += src[i][j] } }
//
// Repeated indices accumulate. dst must be a row-major float32 or float64
// tensor (not a view); src must have dst's dtype and the shape of indices.
// On error dst is unchanged. The result does not depend on GOMAXPROCS.
// It is O(size of src).
func ScatterAdd(dst *tensor.Dense, indices, src tensor.Tensor, axis int) error {
	return backward(opGatherElements, dst, indices, src, axis, 1, -1, label{Op: opGatherElements.String()}, false)
}

func (elementPicker) add(a addPlan, c float64, _ int, zero bool) {
	if a.src.Shape().TotalSize() == 0 {
		if zero {
			operand.PickFloat(a.dst.Dtype(), clearFloats[float32], clearFloats[float64])(a.dst)
		}
		return
	}
	g := kernel.NewAlong(a.dst.Shape(), a.ix.Shape, a.axis)
	operand.PickFloatIndex(a.dst.Dtype(), a.ix.Dtype, scatterAdds32, scatterAdds64)(a.dst, a.src, a.ix, g, c, zero)
}

// The instances of scatterAdd for each data and index dtype.
var (
	scatterAdds32 = [3]func(dst, src *tensor.Dense, ix operand.Indices, g kernel.Along, c float64, zero bool){scatterAdd[float32, int], scatterAdd[float32, int32], scatterAdd[float32, int64]}
	scatterAdds64 = [3]func(dst, src *tensor.Dense, ix operand.Indices, g kernel.Along, c float64, zero bool){scatterAdd[float64, int], scatterAdd[float64, int32], scatterAdd[float64, int64]}
)

// scatterAdd takes g by value, as takeAlong does.
func scatterAdd[T kernel.Float, I kernel.Index](dst, src *tensor.Dense, ix operand.Indices, g kernel.Along, c float64, zero bool) {
	kernel.ScatterAdd(operand.Floats[T](dst), operand.Floats[T](src), operand.Slice[I](ix), &g, T(c), zero)
}
