package gather

import (
	"math/rand/v2"
	"reflect"

	"gorgonia.org/tensor"
)

// Naive references, written for clarity: coordinates in, coordinates out.

// offset returns the row-major flat offset of coord in shape.
func offset(coord, shape []int) int {
	off := 0
	for d := range shape {
		off = off*shape[d] + coord[d]
	}
	return off
}

// forEachCoord calls f with every coordinate of shape in row-major order.
func forEachCoord(shape []int, f func(c []int)) {
	n := 1
	for _, d := range shape {
		n *= d
	}
	for p := 0; p < n; p++ {
		f(unravel(p, shape))
	}
}

func normIndex(v int64, s int) int {
	if v < 0 {
		v += int64(s)
	}
	return int(v)
}

// refTake is Gather: out[c] = data[c[:axis] ++ idx[c[axis:axis+q]] ++ c[axis+q:]].
func refTake(data []float64, dshape []int, idx []int64, ishape []int, axis int) ([]float64, []int) {
	q := len(ishape)
	oshape := append(append(append([]int{}, dshape[:axis]...), ishape...), dshape[axis+1:]...)
	var out []float64
	forEachCoord(oshape, func(c []int) {
		j := normIndex(idx[offset(c[axis:axis+q], ishape)], dshape[axis])
		dc := append(append(append([]int{}, c[:axis]...), j), c[axis+q:]...)
		out = append(out, data[offset(dc, dshape)])
	})
	return out, oshape
}

// refTakeAlong is GatherElements: out[c] = data[c with c[axis] = idx[c]].
func refTakeAlong(data []float64, dshape []int, idx []int64, ishape []int, axis int) []float64 {
	var out []float64
	forEachCoord(ishape, func(c []int) {
		dc := append([]int{}, c...)
		dc[axis] = normIndex(idx[offset(c, ishape)], dshape[axis])
		out = append(out, data[offset(dc, dshape)])
	})
	return out
}

// refIndexAdd is the gradient of refTake: grad[data coord] += up[c].
func refIndexAdd(dshape []int, idx []int64, ishape []int, axis int, up []float64) []float64 {
	q := len(ishape)
	oshape := append(append(append([]int{}, dshape[:axis]...), ishape...), dshape[axis+1:]...)
	grad := make([]float64, tensor.Shape(dshape).TotalSize())
	forEachCoord(oshape, func(c []int) {
		j := normIndex(idx[offset(c[axis:axis+q], ishape)], dshape[axis])
		dc := append(append(append([]int{}, c[:axis]...), j), c[axis+q:]...)
		grad[offset(dc, dshape)] += up[offset(c, oshape)]
	})
	return grad
}

// refScatterAdd is the gradient of refTakeAlong.
func refScatterAdd(dshape []int, idx []int64, ishape []int, axis int, up []float64) []float64 {
	grad := make([]float64, tensor.Shape(dshape).TotalSize())
	forEachCoord(ishape, func(c []int) {
		dc := append([]int{}, c...)
		dc[axis] = normIndex(idx[offset(c, ishape)], dshape[axis])
		grad[offset(dc, dshape)] += up[offset(c, ishape)]
	})
	return grad
}

// randFloats returns n values of the form k + 0.25, all distinct for a given shape.
func randFloats(r *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(r.IntN(1000)) + 0.25*float64(r.IntN(4))
	}
	return v
}

// randIndices returns n indices in [-s, s-1].
func randIndices(r *rand.Rand, n, s int) []int64 {
	v := make([]int64, n)
	for i := range v {
		v[i] = int64(r.IntN(2*s) - s)
	}
	return v
}

// castIndices returns idx as a tensor of dtype dt and the given shape.
func castIndices(idx []int64, shape []int, dt tensor.Dtype) *tensor.Dense {
	var backing any
	switch dt {
	case tensor.Int:
		v := make([]int, len(idx))
		for i, x := range idx {
			v[i] = int(x)
		}
		backing = v
	case tensor.Int32:
		v := make([]int32, len(idx))
		for i, x := range idx {
			v[i] = int32(x)
		}
		backing = v
	default:
		backing = append([]int64{}, idx...)
	}
	if len(shape) == 0 {
		return tensor.New(tensor.FromScalar(firstOf(backing)))
	}
	if len(idx) == 0 {
		return tensor.New(tensor.Of(dt), tensor.WithShape(shape...))
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing))
}

// firstOf returns the first element of a slice.
func firstOf(s any) any { return reflect.ValueOf(s).Index(0).Interface() }

// lenOf returns the length of a slice.
func lenOf(s any) int { return reflect.ValueOf(s).Len() }

// floats returns t's values as float64s, whatever the float dtype.
func floats(t *tensor.Dense) []float64 {
	if t.Shape().TotalSize() == 0 {
		return nil
	}
	switch t.Dtype() {
	case tensor.Float32:
		v := t.Float32s()[:t.Shape().TotalSize()]
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out
	case tensor.Float64:
		return append([]float64{}, t.Float64s()[:t.Shape().TotalSize()]...)
	}
	panic("floats: not a float tensor")
}

// floatTensor returns v as a tensor of dtype dt (Float32 or Float64) and shape.
func floatTensor(v []float64, shape []int, dt tensor.Dtype) *tensor.Dense {
	if len(v) == 0 {
		return tensor.New(tensor.Of(dt), tensor.WithShape(shape...))
	}
	if dt == tensor.Float32 {
		f := make([]float32, len(v))
		for i, x := range v {
			f[i] = float32(x)
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(f))
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float64{}, v...)))
}

func reflectTypeOf(v any) reflect.Type { return reflect.TypeOf(v) }
