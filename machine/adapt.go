package machine

import (
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/graphop"
)

// adapt returns this package's equivalent of s's op, which writes into
// dst what the op's Do returns, or nil if it has none. Each calls what Do
// calls, so that the arithmetic is the op's own.
func adapt(s *step, args gorgonia.Nodes) func(dst gorgonia.Value, in []gorgonia.Value) error {
	op := s.op
	switch graphop.TypeName(op) {
	case "gorgonia.elemUnaryOp":
		ud, ok := op.(gorgonia.UnsafeDoer)
		if !ok || args[0].Dtype() != s.dtype || !sameShape(args[0].Shape(), s.shape) {
			return nil
		}
		if s.shape.IsScalar() {
			return scalarUnary(op)
		}
		// Do applies the op to a new tensor; UnsafeDo applies it in place.
		return func(dst gorgonia.Value, in []gorgonia.Value) error {
			if err := copyInto(dst, in[0]); err != nil {
				return err
			}
			_, err := ud.UnsafeDo(dst)
			return err
		}
	case "gorgonia.elemBinOp":
		return binary(s, args)
	case "gorgonia.sumOp":
		return sum(s, args[0])
	case "gorgonia.reshapeOp":
		if args[0].Dtype() != s.dtype || args[0].Shape().TotalSize() != s.shape.TotalSize() || s.shape.IsScalar() {
			return nil
		}
		// Do makes a tensor sharing the input's memory, or holding a
		// scalar; this one copies the elements into the buffer.
		return func(dst gorgonia.Value, in []gorgonia.Value) error { return copyInto(dst, in[0]) }
	case "gorgonia.repeatOp":
		return repeat(s, args[0])
	case "gorgonia.sliceIncrOp":
		// The gradient of Slice: Do adds the upstream gradient into a
		// slice of a new tensor of zeros; UsePreallocDo adds it into the
		// buffer as it finds it, so the buffer is cleared first.
		pre, ok := op.(gorgonia.UsePreallocDoer)
		if !ok || s.shape.IsScalar() {
			return nil
		}
		return func(dst gorgonia.Value, in []gorgonia.Value) error {
			d, ok := dst.(*tensor.Dense)
			if !ok {
				return fmt.Errorf("a slice's gradient into a %T", dst)
			}
			d.Zero()
			_, err := pre.UsePreallocDo(d, in...)
			return err
		}
	case "gorgonia.sizeOp":
		axis, ok := graphop.Int(op, "axis")
		if !ok || !s.shape.IsScalar() || args[0].IsScalar() || axis >= args[0].Dims() {
			return nil
		}
		return func(dst gorgonia.Value, in []gorgonia.Value) error {
			sh := in[0].Shape()
			if axis >= len(sh) {
				return fmt.Errorf("shape is %v, want the size of axis %d", sh, axis)
			}
			return setScalar(dst, float64(sh[axis]))
		}
	}
	return nil
}

// sum returns the equivalent of Gorgonia's Sum over every axis of x,
// which sums the elements in order in the dtype's arithmetic, or nil for
// a Sum over some axes.
func sum(s *step, x *gorgonia.Node) func(dst gorgonia.Value, in []gorgonia.Value) error {
	along, ok := graphop.Ints(s.op, "along")
	if !ok || !s.shape.IsScalar() || x.IsScalar() || x.Dtype() != s.dtype {
		return nil
	}
	for i, a := range along {
		if a != i {
			return nil
		}
	}
	if len(along) != 0 && len(along) != x.Dims() {
		return nil
	}
	do := s.op.Do
	return func(dst gorgonia.Value, in []gorgonia.Value) error {
		t, ok := in[0].(*tensor.Dense)
		if !ok || t.IsMaterializable() || t.Dtype() != s.dtype {
			return doInto(dst, in, do)
		}
		switch d := dst.(type) {
		case *gorgonia.F32:
			var acc float32
			for _, v := range t.Float32s() {
				acc += v
			}
			*d = gorgonia.F32(acc)
		case *gorgonia.F64:
			var acc float64
			for _, v := range t.Float64s() {
				acc += v
			}
			*d = gorgonia.F64(acc)
		}
		return nil
	}
}

// repeat returns the equivalent of Gorgonia's Repeat of x along one axis
// (the number of repeats, an input, is read from the output's shape):
// out[o][j][i] = x[o][j/r][i] for r = out's size on the axis over x's.
// It takes an x of the output's rank, or of one element.
func repeat(s *step, x *gorgonia.Node) func(dst gorgonia.Value, in []gorgonia.Value) error {
	axis, ok := graphop.Int(s.op, "along")
	xs := x.Shape()
	if !ok || x.Dtype() != s.dtype || s.shape.IsScalar() || axis < 0 || axis >= len(s.shape) {
		return nil
	}
	outer, n, inner := 1, s.shape[axis], 1
	for _, d := range s.shape[:axis] {
		outer *= d
	}
	for _, d := range s.shape[axis+1:] {
		inner *= d
	}
	m := 1 // x's size on the axis
	switch {
	case xs.TotalSize() == 1:
		outer, inner = 1, 1
		n = s.shape.TotalSize()
	case len(xs) == len(s.shape):
		for i := range xs {
			if i != axis && xs[i] != s.shape[i] {
				return nil
			}
		}
		m = xs[axis]
		if m == 0 || n%m != 0 {
			return nil
		}
	default:
		return nil
	}
	r := n / m
	if s.dtype == tensor.Float32 {
		return repeatFn((*tensor.Dense).Float32s, s.dtype, outer, n, inner, m, r, s.op.Do)
	}
	return repeatFn((*tensor.Dense).Float64s, s.dtype, outer, n, inner, m, r, s.op.Do)
}

// repeatFn returns repeat's function for elements of type T.
func repeatFn[T float32 | float64](data func(*tensor.Dense) []T, dt tensor.Dtype, outer, n, inner, m, r int, do func(...gorgonia.Value) (gorgonia.Value, error)) func(dst gorgonia.Value, in []gorgonia.Value) error {
	one := new([1]T)
	return func(dst gorgonia.Value, in []gorgonia.Value) error {
		d, ok := dst.(*tensor.Dense)
		src, ok2 := elems(in[0], one[:], data, dt, true)
		if ok && ok2 && d.Dtype() == dt && len(src) == outer*m*inner {
			out := data(d)
			switch {
			case len(src) == 1:
				v := src[0]
				for i := range out {
					out[i] = v
				}
			case inner == 1:
				for o := range outer {
					row, in := out[o*n:(o+1)*n], src[o*m:(o+1)*m]
					for k, v := range in {
						run := row[k*r : (k+1)*r]
						for j := range run {
							run[j] = v
						}
					}
				}
			default:
				for o := range outer {
					for j := range n {
						copy(out[(o*n+j)*inner:(o*n+j+1)*inner], src[(o*m+j/r)*inner:(o*m+j/r+1)*inner])
					}
				}
			}
			return nil
		}
		return doInto(dst, in, do)
	}
}

// scalarUnary returns the adapter of an elemUnaryOp on a scalar.
func scalarUnary(op gorgonia.Op) func(dst gorgonia.Value, in []gorgonia.Value) error {
	f32, f64 := graphop.ScalarUnary(op)
	if f32 == nil && f64 == nil {
		return nil
	}
	return func(dst gorgonia.Value, in []gorgonia.Value) error {
		switch x := in[0].(type) {
		case *gorgonia.F32:
			if d, ok := dst.(*gorgonia.F32); ok && f32 != nil {
				*d = gorgonia.F32(f32(float32(*x)))
				return nil
			}
		case *gorgonia.F64:
			if d, ok := dst.(*gorgonia.F64); ok && f64 != nil {
				*d = gorgonia.F64(f64(float64(*x)))
				return nil
			}
		}
		return fmt.Errorf("a scalar op on %v (%v) into %v", in[0], in[0].Dtype(), dst.Dtype())
	}
}

// doInto runs an op's Do on in and copies the result into dst: an
// equivalent's way for operands of a form it does not read.
func doInto(dst gorgonia.Value, in []gorgonia.Value, do func(...gorgonia.Value) (gorgonia.Value, error)) error {
	v, err := do(in...)
	if err != nil {
		return err
	}
	_, err = gorgonia.Copy(dst, v)
	return err
}

// setScalar writes v into a scalar buffer.
func setScalar(dst gorgonia.Value, v float64) error {
	switch d := dst.(type) {
	case *gorgonia.F32:
		*d = gorgonia.F32(float32(v))
	case *gorgonia.F64:
		*d = gorgonia.F64(v)
	default:
		return fmt.Errorf("a scalar into a %T", dst)
	}
	return nil
}

// copyInto copies src's elements, in row-major order, into dst, a
// row-major tensor of as many elements.
func copyInto(dst, src gorgonia.Value) error {
	d, ok := dst.(*tensor.Dense)
	if !ok {
		return fmt.Errorf("a copy into a %T", dst)
	}
	switch x := src.(type) {
	case *gorgonia.F32:
		if d.Dtype() == tensor.Float32 && d.Shape().TotalSize() == 1 {
			d.Float32s()[0] = float32(*x)
			return nil
		}
	case *gorgonia.F64:
		if d.Dtype() == tensor.Float64 && d.Shape().TotalSize() == 1 {
			d.Float64s()[0] = float64(*x)
			return nil
		}
	}
	// Float32s and Float64s rather than Data, which allocates.
	if s, ok := src.(*tensor.Dense); ok && !s.IsMaterializable() && !s.Shape().IsScalar() && s.Dtype() == d.Dtype() && s.Shape().TotalSize() == d.Shape().TotalSize() {
		switch s.Dtype() {
		case tensor.Float32:
			copy(d.Float32s(), s.Float32s())
			return nil
		case tensor.Float64:
			copy(d.Float64s(), s.Float64s())
			return nil
		}
	}
	_, err := gorgonia.Copy(dst, src)
	return err
}
