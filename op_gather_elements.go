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
func newAlongGeom(dshape, ishape tensor.Shape, axis int) alongGeom {
	g := alongGeom{ishape: ishape, axis: axis, s: dshape[axis], n: ishape[len(ishape)-1]}
	if len(dshape) > len(g.small) {
		g.big = make([]int, len(dshape))
	}
	st := 1
	for d := len(dshape) - 1; d >= 0; d-- {
		g.setStride(d, st)
		st *= dshape[d]
	}
	return g
}

// runTakeAlong is the GatherElements kernel, out = TakeAlongAxis(data, ix,
// axis). It returns the flat position in ix of the first index out of
// range, or -1.
func runTakeAlong(out, data *tensor.Dense, ix indexTensor, axis int) int {
	if ix.shape.TotalSize() == 0 {
		return -1
	}
	g := newAlongGeom(data.Shape(), ix.shape, axis)
	switch ix.dtype {
	case tensor.Int:
		return takeAlongTyped(out, data, ix.ints, &g)
	case tensor.Int32:
		return takeAlongTyped(out, data, ix.i32, &g)
	case tensor.Int64:
		return takeAlongTyped(out, data, ix.i64, &g)
	}
	return -1
}

func takeAlongTyped[I index](out, data *tensor.Dense, idx []I, g *alongGeom) int {
	rows := len(idx) / g.n
	p := workers(len(idx), rows)
	switch wordOf(data.Dtype()) {
	case word8:
		return takeAlongWords(out.Uint8s(), data.Uint8s(), idx, g, rows, p)
	case word16:
		return takeAlongWords(out.Uint16s(), data.Uint16s(), idx, g, rows, p)
	case word32:
		return takeAlongWords(out.Uint32s(), data.Uint32s(), idx, g, rows, p)
	case word64:
		return takeAlongWords(out.Uint64s(), data.Uint64s(), idx, g, rows, p)
	case word128:
		return takeAlongWords(out.Complex128s(), data.Complex128s(), idx, g, rows, p)
	case wordString:
		return takeAlongWords(out.Strings(), data.Strings(), idx, g, rows, p)
	case wordPointer:
		return takeAlongWords(out.UnsafePointers(), data.UnsafePointers(), idx, g, rows, p)
	}
	return -1
}

func takeAlongWords[T any, I index](dst, src []T, idx []I, g *alongGeom, rows, p int) int {
	if p <= 1 {
		return takeAlong(dst, src, idx, g, 0, rows)
	}
	t := newTask[alongTask[T, I]]()
	defer freeTask(t)
	*t = alongTask[T, I]{dst: dst, src: src, idx: idx, g: *g} // a copy, so that g itself stays on the caller's stack
	return parallelRun(rows, p, t)
}

// alongTask is takeAlongWords' work for parallelRun.
type alongTask[T any, I index] struct {
	dst, src []T
	idx      []I
	g        alongGeom
}

func (t *alongTask[T, I]) run(lo, hi int) int { return takeAlong(t.dst, t.src, t.idx, &t.g, lo, hi) }
