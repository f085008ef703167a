package gather

import (
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
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
	o, err := newOp(opGather, data, indices, axis, newConfig(opts))
	if err != nil {
		return nil, err
	}
	return o.apply(data, indices)
}

// Take is Gather on tensors: it returns the slices of data along axis
// picked by indices, under the rules given for Gather. data and indices
// may be views or column-major; they are not modified. It is O(size of the
// output).
//
// By default the result is a new tensor. With tensor.WithReuse(out) it is
// written into out, which is returned; with tensor.WithIncr(out) it is
// added into out (float32, float64, int, int32 and int64 data). out must
// be a row-major *tensor.Dense that is not a view, with exactly the
// output's shape (ErrShape otherwise) and data's dtype (ErrDtype), sharing
// no memory with data or indices (ErrShape). Every index is checked before
// the first write, so on error out is unchanged. These two calls allocate
// nothing once the options are made.
func Take(data, indices tensor.Tensor, axis int, opts ...tensor.FuncOpt) (*tensor.Dense, error) {
	dst, err := parseOut(opGather, opts)
	if err != nil {
		return nil, err
	}
	return forward(opGather, data, indices, axis, dst, label{Op: opGather.String()})
}

// gatherer is the operator of Gather: it picks whole slices.
type gatherer struct{}

func (gatherer) String() string { return "gather" }
func (gatherer) title() string  { return "Gather" }
func (gatherer) slices() bool   { return true }

func (gatherer) take(out, data *tensor.Dense, ix operand.Indices, axis int, fresh, add bool) int {
	outer, s, inner := split(data.Shape(), axis)
	return operand.Pick(ix.Dtype, take[int], take[int32], take[int64])(out, data, ix, outer, s, inner, fresh, add)
}

func take[I kernel.Index](out, data *tensor.Dense, ix operand.Indices, outer, s, inner int, fresh, add bool) int {
	idx := operand.Slice[I](ix)
	if add {
		switch data.Dtype() {
		case tensor.Float32:
			kernel.TakeAdd(out.Float32s(), data.Float32s(), idx, outer, s, inner)
		case tensor.Float64:
			kernel.TakeAdd(out.Float64s(), data.Float64s(), idx, outer, s, inner)
		case tensor.Int:
			kernel.TakeAdd(out.Ints(), data.Ints(), idx, outer, s, inner)
		case tensor.Int32:
			kernel.TakeAdd(out.Int32s(), data.Int32s(), idx, outer, s, inner)
		case tensor.Int64:
			kernel.TakeAdd(out.Int64s(), data.Int64s(), idx, outer, s, inner)
		}
		return -1
	}
	switch operand.WordOf(data.Dtype()) {
	case operand.Word8:
		return kernel.Take(out.Uint8s(), data.Uint8s(), idx, outer, s, inner, fresh)
	case operand.Word16:
		return kernel.Take(out.Uint16s(), data.Uint16s(), idx, outer, s, inner, fresh)
	case operand.Word32:
		return kernel.Take(out.Uint32s(), data.Uint32s(), idx, outer, s, inner, fresh)
	case operand.Word64:
		return kernel.Take(out.Uint64s(), data.Uint64s(), idx, outer, s, inner, fresh)
	case operand.Word128:
		return kernel.Take(out.Complex128s(), data.Complex128s(), idx, outer, s, inner, fresh)
	case operand.WordString:
		return kernel.Take(out.Strings(), data.Strings(), idx, outer, s, inner, fresh)
	case operand.WordPointer:
		return kernel.Take(out.UnsafePointers(), data.UnsafePointers(), idx, outer, s, inner, fresh)
	}
	return -1
}

var (
	_ gorgonia.Op              = (*gatherOp)(nil)
	_ gorgonia.UsePreallocDoer = (*gatherOp)(nil)
	_ gorgonia.SDOp            = (*gatherOp)(nil)
	_ gorgonia.ADOp            = (*gatherOp)(nil)
)
