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
	if s, ok := src.(*tensor.Dense); ok && !s.IsMaterializable() && s.Dtype() == d.Dtype() && s.Shape().TotalSize() == d.Shape().TotalSize() {
		switch sd := s.Data().(type) {
		case []float32:
			copy(d.Float32s(), sd)
			return nil
		case []float64:
			copy(d.Float64s(), sd)
			return nil
		}
	}
	_, err := gorgonia.Copy(dst, src)
	return err
}
