package dense

import (
	"fmt"
	"math"
	"strconv"

	"github.com/chewxy/hm"
	"github.com/gathergrad/gather/internal/kernel"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// CheckIndexDtype accepts the three integer dtypes an index argument
// (named what) of the operation op may have.
func CheckIndexDtype(op, what string, dt tensor.Dtype) error {
	switch dt {
	case tensor.Int, tensor.Int32, tensor.Int64:
		return nil
	}
	return fmt.Errorf("%s: %s must be int, int32 or int64, got %v: %w", op, what, dt, ErrDtype)
}

// Size returns the number of elements of shape, or an error if a dimension
// is negative or the count overflows int.
func Size(op, what string, shape tensor.Shape) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("%s: %s shape %s has a negative dimension: %w", op, what, ShapeString(shape), ErrShape)
		}
		if d != 0 && n > math.MaxInt/d {
			return 0, fmt.Errorf("%s: %s shape %s has more than %d elements: %w", op, what, ShapeString(shape), math.MaxInt, ErrShape)
		}
		n *= d
	}
	return n, nil
}

// ShapeString formats a shape as tensor.Shape does, "(2, 3)", without
// letting the slice escape: shapes built in stack buffers are formatted
// with it.
func ShapeString(shape []int) string {
	b := []byte{'('}
	for i, d := range shape {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, int64(d), 10)
	}
	return string(append(b, ')'))
}

// SameShape reports whether a and b have the same rank and the same size
// on every axis. Unlike tensor.Shape.Eq, it does not take (2), (2, 1) and
// (1, 2) for one shape.
func SameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Unravel returns the coordinates of flat position p in a row-major tensor
// of shape.
func Unravel(p int, shape tensor.Shape) []int {
	pos := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] > 0 {
			pos[d] = p % shape[d]
			p /= shape[d]
		}
	}
	return pos
}

// Type returns the Gorgonia type of a value of rank dims and dtype dt: dt
// itself for a scalar.
func Type(dims int, dt tensor.Dtype) hm.Type {
	if dims == 0 {
		return dt
	}
	return gorgonia.TensorType{Dims: dims, Of: dt}
}

// Overlaps reports whether a and b share any memory.
func Overlaps(a, b *tensor.Dense) bool {
	if a.MemSize() == 0 || b.MemSize() == 0 {
		return false
	}
	a0, b0 := a.Uintptr(), b.Uintptr()
	return a0 < b0+b.MemSize() && b0 < a0+a.MemSize()
}

// NewOutput returns a row-major tensor of dtype dt and the given shape for
// a kernel that writes every element of it before it is returned. For
// float32, float64, int, int32 and int64 its memory is not cleared first
// (kernel.Uninit): a cleared 8 MB output costs Go more time than gathering
// into it, because the runtime clears a large allocation on one thread,
// while the kernels write it on all of them. The tensor is cleared for
// other dtypes and for empty or rank-0 shapes.
func NewOutput(dt tensor.Dtype, shape tensor.Shape) *tensor.Dense {
	n := shape.TotalSize()
	if n == 0 || len(shape) == 0 {
		return tensor.New(tensor.Of(dt), tensor.WithShape(shape.Clone()...))
	}
	var backing any
	switch dt {
	case tensor.Float32:
		backing = kernel.Uninit[float32](n)
	case tensor.Float64:
		backing = kernel.Uninit[float64](n)
	case tensor.Int:
		backing = kernel.Uninit[int](n)
	case tensor.Int32:
		backing = kernel.Uninit[int32](n)
	case tensor.Int64:
		backing = kernel.Uninit[int64](n)
	default:
		return tensor.New(tensor.Of(dt), tensor.WithShape(shape.Clone()...))
	}
	return tensor.New(tensor.WithShape(shape.Clone()...), tensor.WithBacking(backing))
}

// FuncOpts is what a list of tensor.FuncOpt asks of a call.
type FuncOpts struct {
	Reuse, Incr tensor.Tensor
	Unsafe      bool         // tensor.UseUnsafe was given
	As          tensor.Dtype // tensor.As was given, when As.Type is set
}

// opOpts holds tensor.OpOpt values for ParseFuncOpts to reuse, so that a
// call with options allocates nothing: gorgonia/tensor's own
// ParseFuncOpts takes one from a pool that it gives no way to refill.
var opOpts = make(chan *tensor.OpOpt, 16)

// ParseFuncOpts reads opts.
func ParseFuncOpts(opts []tensor.FuncOpt) FuncOpts {
	var fo *tensor.OpOpt
	select {
	case fo = <-opOpts:
		*fo = tensor.OpOpt{}
	default:
		fo = new(tensor.OpOpt)
	}
	for _, o := range opts {
		o(fo)
	}
	r := FuncOpts{Reuse: fo.Reuse(), Incr: fo.Incr(), Unsafe: !fo.Safe(), As: fo.As()}
	*fo = tensor.OpOpt{}
	select {
	case opOpts <- fo:
	default:
	}
	return r
}

// Scalar returns the value of a float scalar (or a one-element float
// tensor) as a float64; what names it in the error.
func Scalar(what string, v gorgonia.Value) (float64, error) {
	switch x := v.Data().(type) {
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	case []float64:
		if len(x) == 1 {
			return x[0], nil
		}
	case []float32:
		if len(x) == 1 {
			return float64(x[0]), nil
		}
	}
	return 0, fmt.Errorf("%s is %v, not a float scalar: %w", what, v, ErrDtype)
}

// Config holds the options of package gather's ops (gather.Option), read
// by package gather and, for the ops it builds on them, by package nn.
type Config struct {
	GradScale float64 // multiplies the gradient sent to data
	NoGrad    bool    // no gradient flows to data
	Name      string  // node name; empty for Gorgonia's default
	HasPad    bool    // a padding index was given
	Pad       int     // the padding index, normalised once the op is built
	Layer     Label   // how index errors name the layer; Op "" for none

	ScaleByFreq bool // divide each slice's gradient by its index's count
}

// A Label is how an index error names where it happened: the operation,
// the node or table, and the argument (see gather.IndexError). With
// NonNegative the argument takes indices in [0, s) only, as package nn's
// ids and targets do; otherwise negative indices count from the end.
type Label struct {
	Op, Name, Arg string
	NonNegative   bool
}

// String returns the op and, if it has one, the quoted name, as error
// messages start: `embedding "words"`.
func (l Label) String() string {
	if l.Name == "" {
		return l.Op
	}
	return l.Op + " " + strconv.Quote(l.Name)
}

// String lists the options that differ from the defaults, e.g. ", gradScale=2, noGrad".
func (c Config) String() string {
	s := ""
	if c.GradScale != 1 {
		s += ", gradScale=" + strconv.FormatFloat(c.GradScale, 'g', -1, 64)
	}
	if c.NoGrad {
		s += ", noGrad"
	}
	if c.HasPad {
		s += ", padding=" + strconv.Itoa(c.Pad)
	}
	if c.Name != "" {
		s += fmt.Sprintf(", name=%q", c.Name)
	}
	if c.Layer.Op != "" {
		s += fmt.Sprintf(", layer=%s %q %s", c.Layer.Op, c.Layer.Name, c.Layer.Arg)
		if c.Layer.NonNegative {
			s += " [0, s)"
		}
	}
	if c.ScaleByFreq {
		s += ", scaleGradByFreq"
	}
	return s
}

// CheckGradSize reports an error, for the SymDiff of the op named op, if
// out (the op's output) has no elements, or if one of ins (the inputs it
// differentiates) has none and is computed by another op. The gradient
// would then be zero-sized, and Gorgonia's TapeMachine panics when it
// allocates a zero-sized value for the ops (matrix products, the
// broadcasts of Sum and Mean) that carry such a gradient, so
// gorgonia.Grad refuses it here, while the graph is built.
func CheckGradSize(op string, out *gorgonia.Node, ins ...*gorgonia.Node) error {
	if out != nil && out.Shape().TotalSize() == 0 {
		return emptyBatch(op, "its output", out.Shape())
	}
	for _, n := range ins {
		if n != nil && n.Op() != nil && n.Shape().TotalSize() == 0 {
			return emptyBatch(op, "an input", n.Shape())
		}
	}
	return nil
}

func emptyBatch(op, what string, s tensor.Shape) error {
	return fmt.Errorf("%s: %s has shape %v, no elements: an empty batch cannot be differentiated, "+
		"as Gorgonia's TapeMachine panics on zero-sized values; leave empty batches out of training graphs: %w", op, what, s, ErrShape)
}
