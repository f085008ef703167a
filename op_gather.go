package gather

import (
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Gather adds ONNX Gather (opset 13) to data's graph: the slices of data
// along axis picked by indices.
//
// data has rank r >= 1; indices may have any rank q >= 0 (a scalar node
// included) and dtype Int, Int32 or Int64; axis lies in [-r, r-1]. The
// output has rank r-1+q and shape
//
//	data.shape[:axis] + indices.shape + data.shape[axis+1:]
//
// For data of shape [5, 3] (five rows of three) and indices [[0, 4], [2, 2]]
// on axis 0, the output has shape [2, 2, 3] and holds rows 0, 4, 2, 2. On
// axis 1, the same indices give shape [5, 2, 2].
//
// Negative indices count from the end of the axis. A bad axis, index dtype or
// shape is an error here; an index out of [-s, s-1] is an *IndexError when
// the graph runs. The gradient with respect to data is the upstream gradient
// added at the gathered positions (see IndexAdd); indices get none.
func Gather(data, indices *gorgonia.Node, axis int, opts ...Option) (*gorgonia.Node, error) {
	return apply(opGather, data, indices, axis, opts)
}

// Take is Gather on tensors: it returns a new tensor holding the slices of
// data along axis picked by indices, under the rules given for Gather. data
// and indices may be views or column-major; they are not modified.
// It is O(size of the output).
func Take(data, indices tensor.Tensor, axis int) (*tensor.Dense, error) {
	return forward(opGather, data, indices, axis, nil)
}

// op is the Gorgonia op of both Gather and GatherElements. Its fields are
// fixed when the node is built; an op value may be shared by goroutines.
type op struct {
	kind       string       // opGather or opGatherElements
	axis       int          // normalised to [0, rank-1]
	dataType   tensor.Dtype // dtype of data and of the output
	indexType  tensor.Dtype
	dataShape  tensor.Shape
	indexShape tensor.Shape
	outShape   tensor.Shape
	cfg        config
}

// apply checks the arguments of Gather or GatherElements and adds the op to the graph.
func apply(kind string, data, indices *gorgonia.Node, axis int, opts []Option) (*gorgonia.Node, error) {
	o, err := newOp(kind, data, indices, axis, newConfig(opts))
	if err != nil {
		return nil, err
	}
	var n *gorgonia.Node
	if o.cfg.name != "" {
		n, err = gorgonia.ApplyOpWithName(o, o.cfg.name, data, indices)
	} else {
		n, err = gorgonia.ApplyOp(o, data, indices)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	return n, nil
}

func newOp(kind string, data, indices *gorgonia.Node, axis int, cfg config) (*op, error) {
	if data == nil || indices == nil {
		return nil, fmt.Errorf("%s: data and indices must be nodes, got data=%v, indices=%v: %w", kind, data, indices, ErrShape)
	}
	if err := checkDataDtype(kind, data.Dtype()); err != nil {
		return nil, err
	}
	if err := checkIndexDtype(kind, indices.Dtype()); err != nil {
		return nil, err
	}
	ds, is := data.Shape().Clone(), indices.Shape().Clone()
	ax, err := normAxis(kind, axis, len(ds))
	if err != nil {
		return nil, err
	}
	if _, err := size(kind, "data", ds); err != nil {
		return nil, err
	}
	out, err := outputShape(nil, kind, ds, is, ax)
	if err != nil {
		return nil, err
	}
	out = out.Clone()
	if n := ds[ax]; n == 0 && is.TotalSize() > 0 {
		return nil, fmt.Errorf("%s: axis %d of data of shape %v has size 0, so no index into it is valid: %w", kind, ax, ds, ErrIndexOutOfRange)
	}
	if cfg.hasPad {
		if kind != opGather {
			return nil, fmt.Errorf("%s: a padding index applies to Gather only: %w", kind, ErrShape)
		}
		if s := ds[ax]; cfg.pad < -s || cfg.pad >= s {
			return nil, fmt.Errorf("%s: padding index %d is out of range [%d, %d] for axis %d of size %d: %w",
				kind, cfg.pad, -s, s-1, ax, s, ErrIndexOutOfRange)
		}
		if cfg.pad < 0 {
			cfg.pad += ds[ax]
		}
	}
	return &op{kind: kind, axis: ax, dataType: data.Dtype(), indexType: indices.Dtype(),
		dataShape: ds, indexShape: is, outShape: out, cfg: cfg}, nil
}

// outputShape returns the output shape of the op named kind, built in buf
// for Gather and aliasing indices for GatherElements: clone it to keep it.
func outputShape(buf tensor.Shape, kind string, data, indices tensor.Shape, axis int) (tensor.Shape, error) {
	if kind == opGather {
		return gatherShape(buf, data, indices, axis)
	}
	return elementsShape(data, indices, axis)
}

// forward computes the op named kind into out, or into a new tensor if out
// is nil or cannot hold the result. On error nothing the caller can see has
// been written: out is written only after every index is checked, and a new
// tensor that the kernels abandon at a bad index is dropped.
func forward(kind string, data, indices any, axis int, out *tensor.Dense) (*tensor.Dense, error) {
	d, err := asData(kind, data)
	if err != nil {
		return nil, err
	}
	ix, err := asIndices(kind, indices)
	if err != nil {
		return nil, err
	}
	ax, err := normAxis(kind, axis, d.Dims())
	if err != nil {
		return nil, err
	}
	var buf [8]int
	shape, err := outputShape(buf[:0], kind, d.Shape(), ix.shape, ax)
	if err != nil {
		return nil, err
	}
	s := d.Shape()[ax]
	fresh := false
	if out != nil && fits(out, shape, d.Dtype(), data, indices) {
		// A buffer the caller can see: nothing is written unless all is well.
		if err := checkIndices(kind, ix, ax, s); err != nil {
			return nil, err
		}
	} else {
		// A new tensor: the kernels check as they go, and on error the
		// tensor is dropped, so no partial result escapes.
		out, fresh = newOutput(d.Dtype(), shape), true
	}
	var bad int
	if kind == opGather {
		bad = runTake(out, d, ix, ax, fresh)
	} else {
		bad = runTakeAlong(out, d, ix, ax)
	}
	if bad >= 0 {
		return nil, &IndexError{Op: kind, Pos: unravel(bad, ix.shape), Value: ix.at(bad), Axis: ax, Size: s}
	}
	return out, nil
}

// runTake is the Gather kernel, out = Take(data, ix, axis). It returns the
// flat position in ix of the first index out of range, or -1. fresh says
// that out was allocated for this call (see minStream).
func runTake(out, data *tensor.Dense, ix indexTensor, axis int, fresh bool) int {
	outer, s, inner := split(data.Shape(), axis)
	switch ix.dtype {
	case tensor.Int:
		return take(out, data, ix.ints, outer, s, inner, fresh)
	case tensor.Int32:
		return take(out, data, ix.i32, outer, s, inner, fresh)
	case tensor.Int64:
		return take(out, data, ix.i64, outer, s, inner, fresh)
	}
	return -1
}

func take[I index](out, data *tensor.Dense, idx []I, outer, s, inner int, fresh bool) int {
	rows := outer * len(idx)
	if rows == 0 || inner == 0 {
		// Nothing to move, but the indices must still be valid.
		return firstBad(idx, s)
	}
	p := workers(rows*inner, rows)
	switch wordOf(data.Dtype()) {
	case word8:
		return takeWords(out.Uint8s(), data.Uint8s(), idx, s, inner, rows, p, fresh)
	case word16:
		return takeWords(out.Uint16s(), data.Uint16s(), idx, s, inner, rows, p, fresh)
	case word32:
		return takeWords(out.Uint32s(), data.Uint32s(), idx, s, inner, rows, p, fresh)
	case word64:
		return takeWords(out.Uint64s(), data.Uint64s(), idx, s, inner, rows, p, fresh)
	case word128:
		return takeWords(out.Complex128s(), data.Complex128s(), idx, s, inner, rows, p, fresh)
	case wordString:
		return takeWords(out.Strings(), data.Strings(), idx, s, inner, rows, p, fresh)
	case wordPointer:
		return takeWords(out.UnsafePointers(), data.UnsafePointers(), idx, s, inner, rows, p, fresh)
	}
	return -1
}

func takeWords[T any, I index](dst, src []T, idx []I, s, inner, rows, p int, fresh bool) int {
	stream := fresh && streams(dst, src, inner)
	mv := rowMoves{ahead: prefetches(src, inner), stream: stream, batch: batches(dst, inner, stream)}
	w := takeTask[T, I]{dst: dst, src: src, idx: idx, s: s, inner: inner, mv: mv}
	if p <= 1 {
		return w.run(0, rows)
	}
	t := newTask[takeTask[T, I]]()
	defer freeTask(t)
	*t = w
	return parallelRun(rows, p, t)
}

// takeTask is takeWords' work for parallelRun.
type takeTask[T any, I index] struct {
	dst, src []T
	idx      []I
	s, inner int
	mv       rowMoves
}

func (t *takeTask[T, I]) run(lo, hi int) int {
	if t.inner == 1 {
		return takeElems(t.dst, t.src, t.idx, t.s, lo, hi)
	}
	return takeRows(t.dst, t.src, t.idx, t.s, t.inner, lo, hi, t.mv)
}

// fits reports whether out can receive a result of the given shape and dtype
// in place: row-major, of that shape and dtype, and sharing no memory with
// the inputs.
func fits(out *tensor.Dense, shape tensor.Shape, dt tensor.Dtype, inputs ...any) bool {
	if out.Dtype() != dt || !out.Shape().Eq(shape) || !writable(out) {
		return false
	}
	for _, in := range inputs {
		if t, ok := in.(*tensor.Dense); ok && overlaps(out, t) {
			return false
		}
	}
	return true
}

// overlaps reports whether a and b share any memory.
func overlaps(a, b *tensor.Dense) bool {
	if a.MemSize() == 0 || b.MemSize() == 0 {
		return false
	}
	a0, b0 := a.Uintptr(), b.Uintptr()
	return a0 < b0+b.MemSize() && b0 < a0+a.MemSize()
}

// Arity returns 2: data and indices.
func (o *op) Arity() int { return 2 }

// Type returns data, indices -> output, with the ranks fixed when the node was built.
func (o *op) Type() hm.Type {
	return hm.NewFnType(
		tensorType(len(o.dataShape), o.dataType),
		tensorType(len(o.indexShape), o.indexType),
		tensorType(len(o.outShape), o.dataType))
}

func tensorType(dims int, dt tensor.Dtype) hm.Type {
	if dims == 0 {
		return dt
	}
	return gorgonia.TensorType{Dims: dims, Of: dt}
}

// InferShape returns the output shape for the given data and indices shapes.
func (o *op) InferShape(in ...gorgonia.DimSizer) (tensor.Shape, error) {
	if err := checkArity(o.kind, "", len(in), 2); err != nil {
		return nil, err
	}
	ds, ok1 := in[0].(tensor.Shape)
	is, ok2 := in[1].(tensor.Shape)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%s: input shapes must be known, got %v and %v: %w", o.kind, in[0], in[1], ErrShape)
	}
	out, err := outputShape(nil, o.kind, ds, is, o.axis)
	if err != nil {
		return nil, err
	}
	return out.Clone(), nil
}

// Do computes the op into a new tensor.
func (o *op) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := checkArity(o.kind, "", len(in), 2); err != nil {
		return nil, err
	}
	out, err := forward(o.kind, in[0], in[1], o.axis, nil)
	if err != nil {
		return nil, err
	}
	return asValue(out), nil
}

// UsePreallocDo computes the op into prealloc when it can hold the result,
// else into a new tensor.
func (o *op) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := checkArity(o.kind, "", len(in), 2); err != nil {
		return nil, err
	}
	buf, _ := prealloc.(*tensor.Dense)
	out, err := forward(o.kind, in[0], in[1], o.axis, buf)
	if err != nil {
		return nil, err
	}
	return asValue(out), nil
}

func (o *op) ReturnsPtr() bool     { return false }
func (o *op) CallsExtern() bool    { return false }
func (o *op) OverwritesInput() int { return -1 }

// WriteHash writes everything that sets the op's behaviour: kind, axis and options.
func (o *op) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v %v->%v", o, o.indexType, o.dataType) }

func (o *op) Hashcode() uint32 {
	h := fnv.New32a()
	o.WriteHash(h)
	return h.Sum32()
}

// String names the op, e.g. "Gather{axis=1}" or "GatherElements{axis=0, noGrad}".
func (o *op) String() string {
	name := "Gather"
	if o.kind == opGatherElements {
		name = "GatherElements"
	}
	return fmt.Sprintf("%s{axis=%d%v}", name, o.axis, o.cfg)
}

var (
	_ gorgonia.Op              = (*op)(nil)
	_ gorgonia.UsePreallocDoer = (*op)(nil)
)
