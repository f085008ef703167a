package gather

import (
	"fmt"
	"reflect"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// index is the set of Go types an index tensor may hold.
type index interface{ ~int | ~int32 | ~int64 }

// indexTensor is an index argument in row-major order, whatever form it
// came in. Exactly one of the slices is set, by dtype; each holds
// shape.TotalSize() values.
type indexTensor struct {
	shape tensor.Shape
	dtype tensor.Dtype
	ints  []int
	i32   []int32
	i64   []int64
}

// at returns the index at flat position p.
func (ix indexTensor) at(p int) int64 {
	switch ix.dtype {
	case tensor.Int:
		return int64(ix.ints[p])
	case tensor.Int32:
		return int64(ix.i32[p])
	}
	return ix.i64[p]
}

// asIndices reads an index argument: a *tensor.Dense of any layout, or one
// of Gorgonia's integer scalar values. It never copies a row-major tensor.
func asIndices(op string, v any) (indexTensor, error) {
	t, err := asDense(op, "indices", v)
	if err != nil {
		return indexTensor{}, err
	}
	if err := checkIndexDtype(op, t.Dtype()); err != nil {
		return indexTensor{}, err
	}
	n := t.Shape().TotalSize()
	ix := indexTensor{shape: t.Shape(), dtype: t.Dtype()}
	switch t.Dtype() {
	case tensor.Int:
		ix.ints = t.Ints()[:n]
	case tensor.Int32:
		ix.i32 = t.Int32s()[:n]
	case tensor.Int64:
		ix.i64 = t.Int64s()[:n]
	}
	return ix, nil
}

// asData reads a data argument as a row-major, contiguous *tensor.Dense:
// the argument itself when it already is one, else a copy.
func asData(op string, v any) (*tensor.Dense, error) {
	t, err := asDense(op, "data", v)
	if err != nil {
		return nil, err
	}
	if err := checkDataDtype(op, t.Dtype()); err != nil {
		return nil, err
	}
	return t, nil
}

// asDense checks that v is a *tensor.Dense held in Go memory, or one of
// Gorgonia's scalar values, and returns it as a row-major contiguous
// *tensor.Dense, copying only scalars, views, transposes and column-major tensors.
func asDense(op, what string, v any) (*tensor.Dense, error) {
	var t *tensor.Dense
	switch x := v.(type) {
	case *tensor.Dense:
		t = x
	case nil:
		return nil, fmt.Errorf("%s: %s is nil: %w", op, what, ErrShape)
	case tensor.Tensor:
		return nil, fmt.Errorf("%s: %s must be a *tensor.Dense, got a %v tensor of shape %v: %w", op, what, x.Dtype(), x.Shape(), ErrDtype)
	case gorgonia.Scalar:
		return tensor.New(tensor.FromScalar(x.Data())), nil
	default:
		return nil, fmt.Errorf("%s: %s must be a tensor, got a value of type %T: %w", op, what, v, ErrDtype)
	}
	if t == nil {
		return nil, fmt.Errorf("%s: %s is nil: %w", op, what, ErrShape)
	}
	if !t.IsNativelyAccessible() {
		return nil, fmt.Errorf("%s: %s of shape %v is not in Go memory: %w", op, what, t.Shape(), ErrDtype)
	}
	if _, err := size(op, what, t.Shape()); err != nil {
		return nil, err
	}
	if isRowMajor(t) {
		return t, nil
	}
	return rowMajorCopy(t)
}

// writable reports whether kernels can write t in place through its
// storage: row-major and contiguous, not a view of another tensor, and in
// Go memory.
func writable(t *tensor.Dense) bool {
	return isRowMajor(t) && !t.IsView() && t.IsNativelyAccessible()
}

// isRowMajor reports whether t's elements lie in row-major order from the
// start of its storage with no gaps.
func isRowMajor(t *tensor.Dense) bool {
	if t.Shape().TotalSize() <= 1 {
		return true
	}
	want := 1
	shape, strides := t.Shape(), t.Strides()
	if len(strides) != len(shape) {
		return false
	}
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] != 1 && strides[d] != want {
			return false
		}
		want *= shape[d]
	}
	return true
}

// rowMajorCopy returns a new row-major tensor with t's values, reading t
// through its strides (a view, a transpose or a column-major tensor).
func rowMajorCopy(t *tensor.Dense) (*tensor.Dense, error) {
	shape := t.Shape().Clone()
	out := tensor.New(tensor.Of(t.Dtype()), tensor.WithShape(shape...))
	if shape.TotalSize() == 0 {
		return out, nil
	}
	strides := t.Strides()
	if len(strides) != len(shape) {
		return nil, fmt.Errorf("gather: tensor of shape %v has strides %v: %w", shape, strides, ErrShape)
	}
	switch wordOf(t.Dtype()) {
	case word8:
		walkStrided(out.Uint8s(), t.Uint8s(), shape, strides)
	case word16:
		walkStrided(out.Uint16s(), t.Uint16s(), shape, strides)
	case word32:
		walkStrided(out.Uint32s(), t.Uint32s(), shape, strides)
	case word64:
		walkStrided(out.Uint64s(), t.Uint64s(), shape, strides)
	case word128:
		walkStrided(out.Complex128s(), t.Complex128s(), shape, strides)
	case wordString:
		walkStrided(out.Strings(), t.Strings(), shape, strides)
	case wordPointer:
		walkStrided(out.UnsafePointers(), t.UnsafePointers(), shape, strides)
	default:
		return nil, fmt.Errorf("gather: dtype %v is not supported: %w", t.Dtype(), ErrDtype)
	}
	return out, nil
}

// walkStrided is
//
//	for each coordinate c of shape in row-major order { dst[k] = src[Σ c[d]*strides[d]]; k++ }
func walkStrided[T any](dst, src []T, shape, strides []int) {
	coord := make([]int, len(shape))
	off := 0
	for k := range dst {
		dst[k] = src[off]
		for d := len(shape) - 1; d >= 0; d-- {
			coord[d]++
			off += strides[d]
			if coord[d] < shape[d] {
				break
			}
			off -= coord[d] * strides[d]
			coord[d] = 0
		}
	}
}

// word is the unit in which kernels move a dtype's elements: an opaque
// machine word of the element's width, or the element's own type for dtypes
// that hold pointers.
type word int

const (
	wordNone word = iota
	word8
	word16
	word32
	word64
	word128
	wordString
	wordPointer
)

func wordOf(dt tensor.Dtype) word {
	switch dt {
	case tensor.String:
		return wordString
	case tensor.UnsafePointer:
		return wordPointer
	}
	if dt.Type == nil || dt.Kind() == reflect.Pointer || dt.Kind() == reflect.Interface {
		return wordNone
	}
	switch dt.Size() {
	case 1:
		return word8
	case 2:
		return word16
	case 4:
		return word32
	case 8:
		return word64
	case 16:
		return word128
	}
	return wordNone
}

// asValue returns t as the value Gorgonia expects of a node of t's rank:
// t itself, or for rank 0 one of Gorgonia's scalar values where it has one
// for t's dtype (its scalar ops do not accept a 0-d tensor).
func asValue(t *tensor.Dense) gorgonia.Value {
	if t.Dims() != 0 {
		return t
	}
	switch x := t.Data().(type) {
	case float64:
		return gorgonia.NewF64(x)
	case float32:
		return gorgonia.NewF32(x)
	case int:
		return gorgonia.NewI(x)
	case int64:
		return gorgonia.NewI64(x)
	case int32:
		return gorgonia.NewI32(x)
	case uint8:
		return gorgonia.NewU8(x)
	case bool:
		return gorgonia.NewB(x)
	}
	return t
}
