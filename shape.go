package gather

import (
	"fmt"
	"math"
	"strconv"
	"unsafe"

	"gorgonia.org/tensor"
)

// Names of the two operations, as they appear in error messages.
const (
	opGather         = "gather"
	opGatherElements = "gather_elements"
)

// normAxis maps axis in [-rank, rank-1] to [0, rank-1].
func normAxis(op string, axis, rank int) (int, error) {
	if rank == 0 {
		return 0, fmt.Errorf("%s: data must have rank >= 1, got a scalar: %w", op, ErrShape)
	}
	if axis < -rank || axis >= rank {
		return 0, fmt.Errorf("%s: axis %d is out of range [%d, %d] for data of rank %d: %w",
			op, axis, -rank, rank-1, rank, ErrAxisOutOfRange)
	}
	if axis < 0 {
		axis += rank
	}
	return axis, nil
}

// checkArity reports an error unless the op named kind (with role "" for
// the op itself, " gradient" for its gradient op) got the want inputs it
// takes. The name is assembled only on error, so the check allocates nothing.
func checkArity(kind, role string, n, want int) error {
	if n != want {
		return fmt.Errorf("%s%s: want %d inputs, got %d: %w", kind, role, want, n, ErrShape)
	}
	return nil
}

// checkIndexDtype accepts the three integer dtypes an index tensor may have.
func checkIndexDtype(op string, dt tensor.Dtype) error {
	switch dt {
	case tensor.Int, tensor.Int32, tensor.Int64:
		return nil
	}
	return fmt.Errorf("%s: indices must be int, int32 or int64, got %v: %w", op, dt, ErrDtype)
}

// checkDataDtype accepts every dtype gorgonia.org/tensor can hold in Go memory.
func checkDataDtype(op string, dt tensor.Dtype) error {
	if wordOf(dt) == wordNone {
		return fmt.Errorf("%s: data dtype %v is not supported: %w", op, dt, ErrDtype)
	}
	return nil
}

// size returns the number of elements of shape, or an error if it overflows int.
func size(op, what string, shape tensor.Shape) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("%s: %s shape %s has a negative dimension: %w", op, what, shapeString(shape), ErrShape)
		}
		if d != 0 && n > math.MaxInt/d {
			return 0, fmt.Errorf("%s: %s shape %s has more than %d elements: %w", op, what, shapeString(shape), math.MaxInt, ErrShape)
		}
		n *= d
	}
	return n, nil
}

// shapeString formats a shape as tensor.Shape does, "(2, 3)", without
// letting the slice escape: shapes built in stack buffers are formatted
// with it.
func shapeString(shape []int) string {
	b := []byte{'('}
	for i, d := range shape {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, int64(d), 10)
	}
	return string(append(b, ')'))
}

// gatherShape returns the output shape of Gather,
//
//	data.shape[:axis] + indices.shape + data.shape[axis+1:]
//
// e.g. data [2, 5, 3], indices [4, 2], axis 1 gives [2, 4, 2, 3], appended
// to buf[:0]. axis must already be normalised.
func gatherShape(buf, data, indices tensor.Shape, axis int) (tensor.Shape, error) {
	out := buf[:0]
	out = append(out, data[:axis]...)
	out = append(out, indices...)
	out = append(out, data[axis+1:]...)
	if _, err := size(opGather, "output", out); err != nil {
		return nil, err
	}
	return out, nil
}

// elementsShape checks the shapes of GatherElements and returns the output
// shape, which is indices itself. indices must have the rank of data
// and, on every axis but axis, a size no larger than data's. axis must
// already be normalised.
func elementsShape(data, indices tensor.Shape, axis int) (tensor.Shape, error) {
	if len(indices) != len(data) {
		return nil, fmt.Errorf("%s: indices of shape %v have rank %d, data of shape %v has rank %d; they must be equal: %w",
			opGatherElements, indices, len(indices), data, len(data), ErrShape)
	}
	for d := range data {
		if d != axis && indices[d] > data[d] {
			return nil, fmt.Errorf("%s: indices of shape %v are larger than data of shape %v on axis %d (%d > %d): %w",
				opGatherElements, indices, data, d, indices[d], data[d], ErrShape)
		}
	}
	if _, err := size(opGatherElements, "indices", indices); err != nil {
		return nil, err
	}
	return indices, nil
}

// split returns the products of the dimensions before, at and after axis:
// a row-major tensor of this shape is an [outer, mid, inner] block.
func split(shape tensor.Shape, axis int) (outer, mid, inner int) {
	outer, inner = 1, 1
	for _, d := range shape[:axis] {
		outer *= d
	}
	for _, d := range shape[axis+1:] {
		inner *= d
	}
	return outer, shape[axis], inner
}

// unravel returns the coordinates of flat position p in a row-major tensor of shape.
func unravel(p int, shape tensor.Shape) []int {
	pos := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] > 0 {
			pos[d] = p % shape[d]
			p /= shape[d]
		}
	}
	return pos
}

// firstBad returns the flat position of the first index outside [-s, s-1],
// or -1 if there is none. It is
//
//	for p, v := range idx { if v < -s || v >= s { return p } }
//
// with the two comparisons folded into one: v is in range exactly when
// v+s, computed in int64 and read as unsigned, is below 2s (an overflow
// lands far above it). s is the size of an axis of real data, far below
// 2^62, so 2s does not overflow. Where there is assembly for it, the
// leading blocks of 16 indices are checked four to an instruction
// (checkedPrefix), and the loop runs from the first block that holds a bad
// index.
func firstBad[I index](idx []I, s int) int {
	k := checkedPrefix(idx, s)
	off, span := int64(s), uint64(2*int64(s))
	for p, v := range idx[k:] {
		if uint64(int64(v)+off) >= span {
			return k + p
		}
	}
	return -1
}

// checkedPrefix returns how many leading indices of idx, a multiple of
// 16, it found in [-s, s-1] with inRange64 or inRange32: those come before
// the first block of 16 that holds a bad index. It returns 0 where there
// is no assembly, for s outside the range the assembly handles, and for
// fewer than 16 indices.
func checkedPrefix[I index](idx []I, s int) int {
	n := len(idx) &^ 15
	if !checkAssembly || n == 0 || s < 1 || int64(s) > 1<<62 {
		return 0
	}
	switch unsafe.Sizeof(idx[0]) {
	case 8:
		return inRange64((*int64)(unsafe.Pointer(&idx[0])), n, s)
	case 4:
		return inRange32((*int32)(unsafe.Pointer(&idx[0])), n, s)
	}
	return 0
}

// firstBadParallel is firstBad, split across workers for long index lists.
func firstBadParallel[I index](idx []I, s int) int {
	p := workers(len(idx), len(idx))
	if p <= 1 {
		return firstBad(idx, s)
	}
	t := newTask[checkTask[I]]()
	defer freeTask(t)
	*t = checkTask[I]{idx: idx, s: s}
	return parallelRun(len(idx), p, t)
}

// checkTask is firstBadParallel's work for parallelRun.
type checkTask[I index] struct {
	idx []I
	s   int
}

func (t *checkTask[I]) run(lo, hi int) int {
	if q := firstBad(t.idx[lo:hi], t.s); q >= 0 {
		return lo + q
	}
	return -1
}

// checkIndices returns an *IndexError for the first index of ix outside the
// range of an axis of size s, or nil.
func checkIndices(op string, ix indexTensor, axis, s int) error {
	var p int
	switch ix.dtype {
	case tensor.Int:
		p = firstBadParallel(ix.ints, s)
	case tensor.Int32:
		p = firstBadParallel(ix.i32, s)
	case tensor.Int64:
		p = firstBadParallel(ix.i64, s)
	}
	if p < 0 {
		return nil
	}
	return &IndexError{Op: op, Pos: unravel(p, ix.shape), Value: ix.at(p), Axis: axis, Size: s}
}
