package machine

import (
	"strings"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// binary returns the equivalent of one of Gorgonia's elementwise binary
// ops (+, -, ⊙, ÷, and the comparisons that return 1 or 0 in the
// inputs' dtype), on float32 or float64 operands of as many elements as
// the output or scalars, or nil. Gorgonia's tensor engine computes each
// element as one operation of the dtype's arithmetic, as these loops do.
func binary(s *step, args gorgonia.Nodes) func(dst gorgonia.Value, in []gorgonia.Value) error {
	sym, retSame, ok := strings.Cut(s.op.String(), " ")
	if !ok || (s.dtype != tensor.Float32 && s.dtype != tensor.Float64) {
		return nil
	}
	size := s.shape.TotalSize()
	for _, a := range args {
		if a.Dtype() != s.dtype || !a.IsScalar() && a.Shape().TotalSize() != size {
			return nil
		}
	}
	switch sym {
	case "+", "-", "⊙", "÷":
	case "<", ">", "<=", ">=", "==", "!=":
		if retSame != "true" {
			return nil
		}
	default:
		return nil
	}
	do, dt := s.op.Do, s.dtype
	if s.dtype == tensor.Float32 {
		f, sc, data := binaryFunc[float32](sym), new([3]float32), (*tensor.Dense).Float32s
		return func(dst gorgonia.Value, in []gorgonia.Value) error { return apply(f, sc, data, dt, dst, in, do) }
	}
	f, sc, data := binaryFunc[float64](sym), new([3]float64), (*tensor.Dense).Float64s
	return func(dst gorgonia.Value, in []gorgonia.Value) error { return apply(f, sc, data, dt, dst, in, do) }
}

// binaryFunc returns the loop of the op sym: out[i] = a[i] op b[i], an
// operand of length 1 standing for each element. The arithmetic loops are
// written out, as a call per element costs more than the operation.
func binaryFunc[T float32 | float64](sym string) func(out, a, b []T) {
	switch sym {
	case "+":
		return func(out, a, b []T) {
			switch {
			case len(a) == len(out) && len(b) == len(out):
				b = b[:len(a)]
				for i := range a {
					out[i] = a[i] + b[i]
				}
			case len(a) == len(out):
				for i, y := 0, b[0]; i < len(a); i++ {
					out[i] = a[i] + y
				}
			default:
				for i, x := 0, a[0]; i < len(b); i++ {
					out[i] = x + b[i]
				}
			}
		}
	case "-":
		return func(out, a, b []T) {
			switch {
			case len(a) == len(out) && len(b) == len(out):
				b = b[:len(a)]
				for i := range a {
					out[i] = a[i] - b[i]
				}
			case len(a) == len(out):
				for i, y := 0, b[0]; i < len(a); i++ {
					out[i] = a[i] - y
				}
			default:
				for i, x := 0, a[0]; i < len(b); i++ {
					out[i] = x - b[i]
				}
			}
		}
	case "⊙":
		return func(out, a, b []T) {
			switch {
			case len(a) == len(out) && len(b) == len(out):
				b = b[:len(a)]
				for i := range a {
					out[i] = a[i] * b[i]
				}
			case len(a) == len(out):
				for i, y := 0, b[0]; i < len(a); i++ {
					out[i] = a[i] * y
				}
			default:
				for i, x := 0, a[0]; i < len(b); i++ {
					out[i] = x * b[i]
				}
			}
		}
	case "÷":
		return func(out, a, b []T) {
			switch {
			case len(a) == len(out) && len(b) == len(out):
				b = b[:len(a)]
				for i := range a {
					out[i] = a[i] / b[i]
				}
			case len(a) == len(out):
				for i, y := 0, b[0]; i < len(a); i++ {
					out[i] = a[i] / y
				}
			default:
				for i, x := 0, a[0]; i < len(b); i++ {
					out[i] = x / b[i]
				}
			}
		}
	}
	if sym == ">=" { // Rectify's comparison, x >= 0
		return func(out, a, b []T) {
			if len(a) == len(out) && len(b) == 1 {
				out = out[:len(a)]
				for i, y := 0, b[0]; i < len(a); i++ {
					out[i] = one[T](a[i] >= y)
				}
				return
			}
			compare(out, a, b, func(x, y T) T { return one[T](x >= y) })
		}
	}
	var f func(x, y T) T
	switch sym {
	case "<":
		f = func(x, y T) T { return one[T](x < y) }
	case ">":
		f = func(x, y T) T { return one[T](x > y) }
	case "<=":
		f = func(x, y T) T { return one[T](x <= y) }
	case "==":
		f = func(x, y T) T { return one[T](x == y) }
	case "!=":
		f = func(x, y T) T { return one[T](x != y) }
	}
	return func(out, a, b []T) { compare(out, a, b, f) }
}

// compare is out[i] = f(a[i], b[i]), an operand of length 1 standing for
// each element.
func compare[T float32 | float64](out, a, b []T, f func(x, y T) T) {
	switch {
	case len(a) == len(out) && len(b) == len(out):
		for i := range out {
			out[i] = f(a[i], b[i])
		}
	case len(a) == len(out):
		y := b[0]
		for i := range out {
			out[i] = f(a[i], y)
		}
	default:
		x := a[0]
		for i := range out {
			out[i] = f(x, b[i])
		}
	}
}

func one[T float32 | float64](c bool) T {
	// An integer chosen by c compiles to a conditional move, where a
	// float would take a branch, mispredicted half the time on the
	// signs of activations.
	var v int32
	if c {
		v = 1
	}
	return T(v)
}

// apply runs f on the elements of in into dst, or, for operands of
// another form than it reads (a view, a 0-d tensor), runs the op's Do and
// copies its result. A scalar goes through one of sc's elements.
func apply[T float32 | float64](f func(out, a, b []T), sc *[3]T, data func(*tensor.Dense) []T, dt tensor.Dtype, dst gorgonia.Value, in []gorgonia.Value, do func(...gorgonia.Value) (gorgonia.Value, error)) error {
	out, ok1 := elems(dst, sc[0:1], data, dt, false)
	a, ok2 := elems(in[0], sc[1:2], data, dt, true)
	b, ok3 := elems(in[1], sc[2:3], data, dt, true)
	if ok1 && ok2 && ok3 && (len(a) == len(out) || len(a) == 1) && (len(b) == len(out) || len(b) == 1) {
		f(out, a, b)
		if _, ok := dst.(*tensor.Dense); !ok {
			return setScalar(dst, float64(out[0]))
		}
		return nil
	}
	return doInto(dst, in, do)
}

// elems returns v's elements in row-major order: a row-major tensor's
// backing slice, or a scalar in one, which holds its value if read.
// data is (*tensor.Dense).Float32s or Float64s, which, unlike Data, do
// not allocate.
func elems[T float32 | float64](v gorgonia.Value, one []T, data func(*tensor.Dense) []T, dt tensor.Dtype, read bool) ([]T, bool) {
	switch x := v.(type) {
	case *gorgonia.F32:
		if read {
			one[0] = T(*x)
		}
		return one, true
	case *gorgonia.F64:
		if read {
			one[0] = T(*x)
		}
		return one, true
	case *tensor.Dense:
		if x.IsMaterializable() || x.Shape().IsScalar() || x.Dtype() != dt {
			return nil, false // a 0-d tensor's Data is its element, not a slice
		}
		return data(x), true
	}
	return nil, false
}
