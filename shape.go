package gather

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/operand"
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

// gatherShape returns the output shape of Gather,
//
//	data.shape[:axis] + indices.shape + data.shape[axis+1:]
//
// e.g. data [2, 5, 3], indices [4, 2], axis 1 gives [2, 4, 2, 3], appended
// to buf[:0]. axis must already be normalised.
func gatherShape(op string, buf, data, indices tensor.Shape, axis int) (tensor.Shape, error) {
	out := buf[:0]
	out = append(out, data[:axis]...)
	out = append(out, indices...)
	out = append(out, data[axis+1:]...)
	if _, err := operand.Size(op, "output", out); err != nil {
		return nil, err
	}
	return out, nil
}

// elementsShape checks the shapes of GatherElements and returns the output
// shape, which is indices itself. indices must have the rank of data
// and, on every axis but axis, a size no larger than data's. axis must
// already be normalised.
func elementsShape(op string, data, indices tensor.Shape, axis int) (tensor.Shape, error) {
	if len(indices) != len(data) {
		return nil, fmt.Errorf("%s: indices of shape %v have rank %d, data of shape %v has rank %d; they must be equal: %w",
			op, indices, len(indices), data, len(data), ErrShape)
	}
	for d := range data {
		if d != axis && indices[d] > data[d] {
			return nil, fmt.Errorf("%s: indices of shape %v are larger than data of shape %v on axis %d (%d > %d): %w",
				op, indices, data, d, indices[d], data[d], ErrShape)
		}
	}
	if _, err := operand.Size(op, "indices", indices); err != nil {
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

// label is how an *IndexError names where it happened (see IndexError).
type label = operand.Label
