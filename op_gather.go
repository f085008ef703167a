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
func Gather(data, indices *gorgonia.Node, axis int, opts ...GatherOption) (*gorgonia.Node, error) {
	o, err := newOp(opGather, data, indices, axis, gatherConfig(opts))
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
	if add {
		f, _ := operand.PickAddable(data.Dtype(), operand.Pick(ix.Dtype, takeAdds[0], takeAdds[1], takeAdds[2]))
		f(out, data, ix, outer, s, inner)
		return -1
	}
	f := operand.PickWord(operand.WordOf(data.Dtype()), operand.Pick(ix.Dtype, takes[0], takes[1], takes[2]))
	return f(out, data, ix, outer, s, inner, fresh)
}

// takes and takeAdds hold Take's loops and its adding loops, for Int,
// Int32 and Int64 indices.
var (
	takes    = [3]operand.Words[takeFunc]{takeWords[int](), takeWords[int32](), takeWords[int64]()}
	takeAdds = [3][5]takeAddFunc{takeAddable[int](), takeAddable[int32](), takeAddable[int64]()}
)

type (
	takeFunc    func(out, data *tensor.Dense, ix operand.Indices, outer, s, inner int, fresh bool) int
	takeAddFunc func(out, data *tensor.Dense, ix operand.Indices, outer, s, inner int)
)

func takeWords[I kernel.Index]() operand.Words[takeFunc] {
	return operand.Words[takeFunc]{take[uint8, I], take[uint16, I], take[uint32, I], take[uint64, I],
		take[complex128, I], take[string, I], take[kernel.Pointer, I]}
}

func takeAddable[I kernel.Index]() [5]takeAddFunc {
	return [5]takeAddFunc{takeAdd[float32, I], takeAdd[float64, I], takeAdd[int, I], takeAdd[int32, I], takeAdd[int64, I]}
}

func take[T any, I kernel.Index](out, data *tensor.Dense, ix operand.Indices, outer, s, inner int, fresh bool) int {
	return kernel.Take(operand.Elems[T](out), operand.Elems[T](data), operand.Slice[I](ix), outer, s, inner, fresh)
}

func takeAdd[T kernel.Number, I kernel.Index](out, data *tensor.Dense, ix operand.Indices, outer, s, inner int) {
	kernel.TakeAdd(operand.Elems[T](out), operand.Elems[T](data), operand.Slice[I](ix), outer, s, inner)
}

var (
	_ gorgonia.Op              = (*gatherOp)(nil)
	_ gorgonia.UsePreallocDoer = (*gatherOp)(nil)
	_ gorgonia.SDOp            = (*gatherOp)(nil)
	_ gorgonia.ADOp            = (*gatherOp)(nil)
)

// IndexAdd adds src into dst at the positions that Take(dst, indices, axis)
// reads: it is the gradient of Gather with respect to data. For axis 0 and
// rows of n elements it is
//
//	for i, j := range indices { dst[j*n:(j+1)*n] += src[i*n:(i+1)*n] }
//
// and likewise for each block before axis. Repeated indices accumulate;
// negative ones add into the row they name. dst must be a row-major float32
// or float64 tensor (not a view); src must have dst's dtype and the shape
// Take would return. On error dst is unchanged. The sum into each element
// runs in index order whatever the number of threads, so the result does
// not depend on GOMAXPROCS. It is O(size of src).
func IndexAdd(dst *tensor.Dense, indices, src tensor.Tensor, axis int) error {
	return backward(opGather, dst, indices, src, axis, 1, -1, label{Op: opGather.String()}, false)
}

func (gatherer) add(a addPlan, c float64, pad int, zero bool) {
	outer, s, inner := split(a.dst.Shape(), a.axis)
	operand.PickFloatIndex(a.dst.Dtype(), a.ix.Dtype, indexAdds32, indexAdds64)(a.dst, a.src, a.ix, outer, s, inner, c, pad, zero)
}

// The instances of indexAdd for each data and index dtype.
var (
	indexAdds32 = [3]func(dst, src *tensor.Dense, ix operand.Indices, outer, s, inner int, c float64, pad int, zero bool){indexAdd[float32, int], indexAdd[float32, int32], indexAdd[float32, int64]}
	indexAdds64 = [3]func(dst, src *tensor.Dense, ix operand.Indices, outer, s, inner int, c float64, pad int, zero bool){indexAdd[float64, int], indexAdd[float64, int32], indexAdd[float64, int64]}
)

func indexAdd[T kernel.Float, I kernel.Index](dst, src *tensor.Dense, ix operand.Indices, outer, s, inner int, c float64, pad int, zero bool) {
	kernel.IndexAdd(operand.Floats[T](dst), operand.Floats[T](src), operand.Slice[I](ix), outer, s, inner, T(c), pad, zero)
}
