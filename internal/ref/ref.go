// Package ref holds naive reference loops for Gather, GatherElements and
// their gradients, written for clarity (coordinates in, coordinates out),
// and the random inputs and conversions the module's tests share. Only
// tests import it.
package ref

import (
	"math/rand/v2"
	"reflect"

	"gorgonia.org/tensor"
)

// Naive references, written for clarity: coordinates in, coordinates out.

// Offset returns the row-major flat Offset of coord in shape.
func Offset(coord, shape []int) int {
	off := 0
	for d := range shape {
		off = off*shape[d] + coord[d]
	}
	return off
}

// ForEachCoord calls f with every coordinate of shape in row-major order.
func ForEachCoord(shape []int, f func(c []int)) {
	n := 1
	for _, d := range shape {
		n *= d
	}
	for p := 0; p < n; p++ {
		f(Unravel(p, shape))
	}
}

func NormIndex(v int64, s int) int {
	if v < 0 {
		v += int64(s)
	}
	return int(v)
}

// Take is Gather: out[c] = data[c[:axis] ++ idx[c[axis:axis+q]] ++ c[axis+q:]].
func Take(data []float64, dshape []int, idx []int64, ishape []int, axis int) ([]float64, []int) {
	q := len(ishape)
	oshape := append(append(append([]int{}, dshape[:axis]...), ishape...), dshape[axis+1:]...)
	var out []float64
	ForEachCoord(oshape, func(c []int) {
		j := NormIndex(idx[Offset(c[axis:axis+q], ishape)], dshape[axis])
		dc := append(append(append([]int{}, c[:axis]...), j), c[axis+q:]...)
		out = append(out, data[Offset(dc, dshape)])
	})
	return out, oshape
}

// TakeAlong is GatherElements: out[c] = data[c with c[axis] = idx[c]].
func TakeAlong(data []float64, dshape []int, idx []int64, ishape []int, axis int) []float64 {
	var out []float64
	ForEachCoord(ishape, func(c []int) {
		dc := append([]int{}, c...)
		dc[axis] = NormIndex(idx[Offset(c, ishape)], dshape[axis])
		out = append(out, data[Offset(dc, dshape)])
	})
	return out
}

// IndexAdd is the gradient of Take: grad[data coord] += up[c].
func IndexAdd(dshape []int, idx []int64, ishape []int, axis int, up []float64) []float64 {
	q := len(ishape)
	oshape := append(append(append([]int{}, dshape[:axis]...), ishape...), dshape[axis+1:]...)
	grad := make([]float64, tensor.Shape(dshape).TotalSize())
	ForEachCoord(oshape, func(c []int) {
		j := NormIndex(idx[Offset(c[axis:axis+q], ishape)], dshape[axis])
		dc := append(append(append([]int{}, c[:axis]...), j), c[axis+q:]...)
		grad[Offset(dc, dshape)] += up[Offset(c, oshape)]
	})
	return grad
}

// ScatterAdd is the gradient of TakeAlong.
func ScatterAdd(dshape []int, idx []int64, ishape []int, axis int, up []float64) []float64 {
	grad := make([]float64, tensor.Shape(dshape).TotalSize())
	ForEachCoord(ishape, func(c []int) {
		dc := append([]int{}, c...)
		dc[axis] = NormIndex(idx[Offset(c, ishape)], dshape[axis])
		grad[Offset(dc, dshape)] += up[Offset(c, ishape)]
	})
	return grad
}

// RandFloats returns n values of the form k + 0.25, all distinct for a given shape.
func RandFloats(r *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(r.IntN(1000)) + 0.25*float64(r.IntN(4))
	}
	return v
}

// RandIndices returns n indices in [-s, s-1].
func RandIndices(r *rand.Rand, n, s int) []int64 {
	v := make([]int64, n)
	for i := range v {
		v[i] = int64(r.IntN(2*s) - s)
	}
	return v
}

// CastIndices returns idx as a tensor of dtype dt and the given shape.
func CastIndices(idx []int64, shape []int, dt tensor.Dtype) *tensor.Dense {
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
		return tensor.New(tensor.FromScalar(FirstOf(backing)))
	}
	if len(idx) == 0 {
		return tensor.New(tensor.Of(dt), tensor.WithShape(shape...))
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing))
}

// FirstOf returns the first element of a slice.
func FirstOf(s any) any { return reflect.ValueOf(s).Index(0).Interface() }

// LenOf returns the length of a slice.
func LenOf(s any) int { return reflect.ValueOf(s).Len() }

// Floats returns t's values as float64s, whatever the float dtype.
func Floats(t *tensor.Dense) []float64 {
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
	panic("Floats: not a float tensor")
}

// FloatTensor returns v as a tensor of dtype dt (Float32 or Float64) and shape.
func FloatTensor(v []float64, shape []int, dt tensor.Dtype) *tensor.Dense {
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

func ReflectTypeOf(v any) reflect.Type { return reflect.TypeOf(v) }

// Unravel returns the coordinates of flat position p in a row-major tensor
// of shape, outermost first.
func Unravel(p int, shape []int) []int {
	pos := make([]int, len(shape))
	block := 1
	for _, d := range shape {
		block *= max(d, 1)
	}
	for i, d := range shape {
		block /= max(d, 1)
		if d > 0 {
			pos[i] = p / block
			p %= block
		}
	}
	return pos
}
