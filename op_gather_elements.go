package gather

import (
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
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
func GatherElements(data, indices *gorgonia.Node, axis int, opts ...Option) (*gorgonia.Node, error) {
	return apply(opGatherElements, data, indices, axis, opts)
}

// TakeAlongAxis is GatherElements on tensors: it returns a new tensor of the
// shape of indices holding the elements of data they pick along axis, under
// the rules given for GatherElements. Inputs are not modified.
// It is O(size of indices).
func TakeAlongAxis(data, indices tensor.Tensor, axis int) (*tensor.Dense, error) {
	return forward(opGatherElements, data, indices, axis, nil)
}

// newAlongGeom describes GatherElements of row-major data of shape dshape
// with indices of shape ishape along axis.
func newAlongGeom(dshape, ishape tensor.Shape, axis int) *alongGeom {
	strides := make([]int, len(dshape))
	st := 1
	for d := len(dshape) - 1; d >= 0; d-- {
		strides[d] = st
		st *= dshape[d]
	}
	return &alongGeom{ishape: ishape, dstrides: strides, axis: axis, s: dshape[axis], n: ishape[len(ishape)-1]}
}

// runTakeAlong is the GatherElements kernel: out = TakeAlongAxis(data, ix, axis), all checked.
func runTakeAlong(out, data *tensor.Dense, ix indexTensor, axis int) {
	if ix.shape.TotalSize() == 0 {
		return
	}
	g := newAlongGeom(data.Shape(), ix.shape, axis)
	switch v := ix.values.(type) {
	case []int:
		takeAlongTyped(out, data, v, g)
	case []int32:
		takeAlongTyped(out, data, v, g)
	case []int64:
		takeAlongTyped(out, data, v, g)
	}
}

func takeAlongTyped[I index](out, data *tensor.Dense, idx []I, g *alongGeom) {
	rows := len(idx) / g.n
	p := workers(len(idx), rows)
	switch wordOf(data.Dtype()) {
	case word8:
		takeAlongWords(out.Uint8s(), data.Uint8s(), idx, g, rows, p)
	case word16:
		takeAlongWords(out.Uint16s(), data.Uint16s(), idx, g, rows, p)
	case word32:
		takeAlongWords(out.Uint32s(), data.Uint32s(), idx, g, rows, p)
	case word64:
		takeAlongWords(out.Uint64s(), data.Uint64s(), idx, g, rows, p)
	case word128:
		takeAlongWords(out.Complex128s(), data.Complex128s(), idx, g, rows, p)
	case wordString:
		takeAlongWords(out.Strings(), data.Strings(), idx, g, rows, p)
	case wordPointer:
		takeAlongWords(out.UnsafePointers(), data.UnsafePointers(), idx, g, rows, p)
	}
}

func takeAlongWords[T any, I index](dst, src []T, idx []I, g *alongGeom, rows, p int) {
	if p <= 1 {
		takeAlong(dst, src, idx, g, 0, rows)
		return
	}
	parallelFor(rows, p, func(lo, hi int) { takeAlong(dst, src, idx, g, lo, hi) })
}
