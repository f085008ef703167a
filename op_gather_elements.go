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
// WithPaddingIndex does not apply to it.
func GatherElements(data, indices *gorgonia.Node, axis int, opts ...Option) (*gorgonia.Node, error) {
	o, err := newOp(opGatherElements, data, indices, axis, newConfig(opts))
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
	return operand.Pick(ix.Dtype, takeAlong[int], takeAlong[int32], takeAlong[int64])(out, data, ix, g, add)
}

// takeAlong takes g by value: a pointer passed to a function Pick returns
// would move g to the heap.
func takeAlong[I kernel.Index](out, data *tensor.Dense, ix operand.Indices, g kernel.Along, add bool) int {
	idx := operand.Slice[I](ix)
	if add {
		switch data.Dtype() {
		case tensor.Float32:
			kernel.TakeAlongAdd(out.Float32s(), data.Float32s(), idx, &g)
		case tensor.Float64:
			kernel.TakeAlongAdd(out.Float64s(), data.Float64s(), idx, &g)
		case tensor.Int:
			kernel.TakeAlongAdd(out.Ints(), data.Ints(), idx, &g)
		case tensor.Int32:
			kernel.TakeAlongAdd(out.Int32s(), data.Int32s(), idx, &g)
		case tensor.Int64:
			kernel.TakeAlongAdd(out.Int64s(), data.Int64s(), idx, &g)
		}
		return -1
	}
	switch operand.WordOf(data.Dtype()) {
	case operand.Word8:
		return kernel.TakeAlong(out.Uint8s(), data.Uint8s(), idx, &g)
	case operand.Word16:
		return kernel.TakeAlong(out.Uint16s(), data.Uint16s(), idx, &g)
	case operand.Word32:
		return kernel.TakeAlong(out.Uint32s(), data.Uint32s(), idx, &g)
	case operand.Word64:
		return kernel.TakeAlong(out.Uint64s(), data.Uint64s(), idx, &g)
	case operand.Word128:
		return kernel.TakeAlong(out.Complex128s(), data.Complex128s(), idx, &g)
	case operand.WordString:
		return kernel.TakeAlong(out.Strings(), data.Strings(), idx, &g)
	case operand.WordPointer:
		return kernel.TakeAlong(out.UnsafePointers(), data.UnsafePointers(), idx, &g)
	}
	return -1
}
