package gather

import (
	"math"

	"gorgonia.org/tensor"
)

// newOutput returns a row-major tensor of dtype dt and the given shape for a
// kernel that writes every element of it before it is returned. For the
// dtypes the kernels are fast on, its memory is not cleared first (see
// uninit): a cleared 8 MB output costs Go more time than gathering into it,
// because the runtime clears a large allocation on one thread, while the
// kernels write it on all of them. The tensor is cleared for other dtypes
// and for empty or rank-0 shapes.
func newOutput(dt tensor.Dtype, shape tensor.Shape) *tensor.Dense {
	n := shape.TotalSize()
	if n == 0 || len(shape) == 0 {
		return tensor.New(tensor.Of(dt), tensor.WithShape(shape.Clone()...))
	}
	var backing any
	switch dt {
	case tensor.Float32:
		backing = fresh[float32](n)
	case tensor.Float64:
		backing = fresh[float64](n)
	case tensor.Int:
		backing = fresh[int](n)
	case tensor.Int32:
		backing = fresh[int32](n)
	case tensor.Int64:
		backing = fresh[int64](n)
	default:
		return tensor.New(tensor.Of(dt), tensor.WithShape(shape.Clone()...))
	}
	return tensor.New(tensor.WithShape(shape.Clone()...), tensor.WithBacking(backing))
}

// plain is the set of element types uninit may return: none holds a pointer,
// so memory that the garbage collector does not scan can hold them.
type plain interface {
	~float32 | ~float64 | ~int | ~int32 | ~int64
}

// fresh returns n elements from uninit, poisoned if poisonOutputs is set.
func fresh[T plain](n int) []T {
	s := uninit[T](n)
	if poisonOutputs {
		poison(s)
	}
	return s
}

// poisonOutputs makes fresh fill what it returns with NaN (floats) or -1
// (integers), so that a test can tell an element a kernel failed to write
// from one it wrote. Tests set it; nothing else does.
var poisonOutputs bool

func poison[T plain](s []T) {
	switch f := any(s).(type) {
	case []float32:
		for i := range f {
			f[i] = float32(math.NaN())
		}
	case []float64:
		for i := range f {
			f[i] = math.NaN()
		}
	default:
		for i := range s {
			s[i] = -1
		}
	}
}
