// Package operand is the edge between gorgonia.org/tensor values and the
// slice-level kernels of package kernel: it reads tensors and Gorgonia
// values as row-major slices, checks their dtypes, makes the tensors the
// kernels write, counts, compares and formats their shapes (shapes.go),
// and holds the options of package gather's ops with the Label by which
// index errors name where they happened (config.go), which package gather
// reads from its Options and package nn sets for the ops it builds.
//
// The module's op plumbing is three packages, one a job: operand (the
// values an op reads and writes, and its options), opkit (what every
// Gorgonia op of the module shares: signatures, gradients, runs) and
// graphop (reading the unexported parts of Gorgonia's own ops, for
// export).
package operand

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/kernel"
)

// Indices is an index argument in row-major order, whatever form it came
// in. Exactly one of the slices is set, by dtype; each holds
// Shape.TotalSize() values.
type Indices struct {
	Shape tensor.Shape
	Dtype tensor.Dtype
	Ints  []int
	I32   []int32
	I64   []int64
}

// Pick returns the one of f's instantiations, fInt, fInt32 or fInt64, for
// the index dtype dt (tensor.Int, Int32 or Int64): the one place a run-time
// index dtype becomes a type parameter. A function generic in its index
// type I takes the Indices and reads them with Slice[I]:
//
//	func count[I kernel.Index](ix operand.Indices, s int) int { ... operand.Slice[I](ix) ... }
//	n := operand.Pick(ix.Dtype, count[int], count[int32], count[int64])(ix, s)
func Pick[F any](dt tensor.Dtype, fInt, fInt32, fInt64 F) F {
	switch dt {
	case tensor.Int:
		return fInt
	case tensor.Int32:
		return fInt32
	}
	return fInt64
}

// Slice returns ix's indices as a []I; I must be the Go type of ix.Dtype
// (see Pick), else the result is nil.
func Slice[I kernel.Index](ix Indices) []I {
	var s []I
	switch p := any(&s).(type) {
	case *[]int:
		*p = ix.Ints
	case *[]int32:
		*p = ix.I32
	case *[]int64:
		*p = ix.I64
	}
	return s
}

// At returns the index at flat position p.
func (ix Indices) At(p int) int64 {
	switch ix.Dtype {
	case tensor.Int:
		return int64(ix.Ints[p])
	case tensor.Int32:
		return int64(ix.I32[p])
	}
	return ix.I64[p]
}

// FirstBad returns the flat position of the first index outside
// [-s, s-1], or -1 (kernel.FirstBad).
func (ix Indices) FirstBad(s int) int {
	return Pick(ix.Dtype, firstBad[int], firstBad[int32], firstBad[int64])(ix, s)
}

func firstBad[I kernel.Index](ix Indices, s int) int { return kernel.FirstBad(Slice[I](ix), s) }

// FirstBadIn returns the flat position of the first index outside the
// range l admits for an axis of size s: [0, s) with l.NonNegative
// (kernel.FirstOutside), else [-s, s-1] (FirstBad); or -1.
func (ix Indices) FirstBadIn(l Label, s int) int {
	if !l.NonNegative {
		return ix.FirstBad(s)
	}
	return Pick(ix.Dtype, firstOutside[int], firstOutside[int32], firstOutside[int64])(ix, s)
}

func firstOutside[I kernel.Index](ix Indices, s int) int { return kernel.FirstOutside(Slice[I](ix), s) }

// ReadIndices reads an index argument named what (e.g. "indices", "ids")
// of the operation op: a *tensor.Dense of any layout, or one of Gorgonia's
// integer scalar values. It never copies a row-major tensor.
func ReadIndices(op, what string, v any) (Indices, error) {
	t, err := Read(op, what, v)
	if err != nil {
		return Indices{}, err
	}
	n, dt := t.Shape().TotalSize(), t.Dtype()
	ix := Indices{Shape: t.Shape(), Dtype: dt}
	switch dt {
	case tensor.Int:
		ix.Ints = Elems[int](t)[:n]
	case tensor.Int32:
		ix.I32 = Elems[int32](t)[:n]
	case tensor.Int64:
		ix.I64 = Elems[int64](t)[:n]
	default:
		return Indices{}, CheckIndexDtype(op, what, dt)
	}
	return ix, nil
}

// ReadData reads a data argument as a row-major, contiguous *tensor.Dense:
// the argument itself when it already is one, else a copy.
func ReadData(op string, v any) (*tensor.Dense, error) {
	t, err := Read(op, "data", v)
	if err != nil {
		return nil, err
	}
	if WordOf(t.Dtype()) == WordNone {
		return nil, fmt.Errorf("%s: data dtype %v is not supported: %w", op, t.Dtype(), errs.ErrDtype)
	}
	return t, nil
}

// Read checks that v is a *tensor.Dense held in Go memory, or one of
// Gorgonia's scalar values, and returns it as a row-major contiguous
// *tensor.Dense, copying only scalars, views, transposes and column-major tensors.
func Read(op, what string, v any) (*tensor.Dense, error) {
	var t *tensor.Dense
	switch x := v.(type) {
	case *tensor.Dense:
		t = x
	case nil:
		return nil, fmt.Errorf("%s: %s is nil: %w", op, what, errs.ErrShape)
	case tensor.Tensor:
		return nil, fmt.Errorf("%s: %s must be a *tensor.Dense, got a %v tensor of shape %v: %w", op, what, x.Dtype(), x.Shape(), errs.ErrDtype)
	case gorgonia.Scalar:
		return tensor.New(tensor.FromScalar(x.Data())), nil
	default:
		return nil, fmt.Errorf("%s: %s must be a tensor, got a value of type %T: %w", op, what, v, errs.ErrDtype)
	}
	if t == nil {
		return nil, fmt.Errorf("%s: %s is nil: %w", op, what, errs.ErrShape)
	}
	if !t.IsNativelyAccessible() {
		return nil, fmt.Errorf("%s: %s of shape %v is not in Go memory: %w", op, what, t.Shape(), errs.ErrDtype)
	}
	if _, err := Size(op, what, t.Shape()); err != nil {
		return nil, err
	}
	if IsRowMajor(t) {
		return t, nil
	}
	return rowMajorCopy(t)
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
		return nil, fmt.Errorf("gather: tensor of shape %v has strides %v: %w", shape, strides, errs.ErrShape)
	}
	w := WordOf(t.Dtype())
	if w == WordNone {
		return nil, fmt.Errorf("gather: dtype %v is not supported: %w", t.Dtype(), errs.ErrDtype)
	}
	PickWord(w, walks)(out, t, shape, strides)
	return out, nil
}

// walks holds walk for each Word.
var walks = Words[func(dst, src *tensor.Dense, shape, strides []int)]{walk[uint8], walk[uint16], walk[uint32], walk[uint64],
	walk[complex128], walk[string], walk[kernel.Pointer]}

func walk[T any](dst, src *tensor.Dense, shape, strides []int) {
	walkStrided(Elems[T](dst), Elems[T](src), shape, strides)
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

// A Word is the unit in which kernels move a dtype's elements: an opaque
// machine word of the element's width, or the element's own type for dtypes
// that hold pointers.
type Word int

const (
	WordNone Word = iota
	Word8
	Word16
	Word32
	Word64
	Word128
	WordString
	WordPointer
)

// Words holds a function for each Word but WordNone, in the order of the
// Words: Word8, Word16, Word32, Word64, Word128, WordString, WordPointer.
// An op fills it with one generic function's instances, T being uint8,
// uint16, uint32, uint64, complex128, string and kernel.Pointer, with
// Elems[T] reading the tensors.
type Words[F any] [7]F

// PickWord returns the function of f for w, which must not be WordNone.
func PickWord[F any](w Word, f Words[F]) F { return f[w-Word8] }

// Elems returns t's elements as a []T, for T one of the Go types Words
// names (read as machine words of T's width whatever t's dtype), one of
// float32, float64, int, int32 and int64 (t's own dtype), or
// kernel.Pointer. An empty tensor gives nil.
func Elems[T any](t *tensor.Dense) []T { return kernel.Words[T](t.Raw) }

// addable are the dtypes whose values an op can add into an output, in the
// order PickAddable takes its functions.
var addable = [5]tensor.Dtype{tensor.Float32, tensor.Float64, tensor.Int, tensor.Int32, tensor.Int64}

// PickAddable returns the function of f for dtype dt (f[0] for Float32,
// then Float64, Int, Int32 and Int64) and true, or false for a dtype whose
// values cannot be added.
func PickAddable[F any](dt tensor.Dtype, f [5]F) (F, bool) {
	i := slices.Index(addable[:], dt)
	if i < 0 {
		var zero F
		return zero, false
	}
	return f[i], true
}

// WordOf returns the Word of dtype dt, WordNone for dtypes the kernels
// cannot move.
func WordOf(dt tensor.Dtype) Word {
	switch dt {
	case tensor.String:
		return WordString
	case tensor.UnsafePointer:
		return WordPointer
	}
	if dt.Type == nil || dt.Kind() == reflect.Pointer || dt.Kind() == reflect.Interface {
		return WordNone
	}
	switch dt.Size() {
	case 1:
		return Word8
	case 2:
		return Word16
	case 4:
		return Word32
	case 8:
		return Word64
	case 16:
		return Word128
	}
	return WordNone
}

// Value returns t as the value Gorgonia expects of a node of t's rank:
// t itself, or for rank 0 one of Gorgonia's scalar values where it has one
// for t's dtype (its scalar ops do not accept a 0-d tensor).
func Value(t *tensor.Dense) gorgonia.Value {
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

// CheckIndexDtype accepts the three integer dtypes an index argument
// (named what) of the operation op may have.
func CheckIndexDtype(op, what string, dt tensor.Dtype) error {
	switch dt {
	case tensor.Int, tensor.Int32, tensor.Int64:
		return nil
	}
	return fmt.Errorf("%s: %s must be int, int32 or int64, got %v: %w", op, what, dt, errs.ErrDtype)
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
	switch x := v.(type) { // without Data, which boxes a scalar
	case *gorgonia.F32:
		return float64(*x), nil
	case *gorgonia.F64:
		return float64(*x), nil
	}
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
	return 0, fmt.Errorf("%s is %v, not a float scalar: %w", what, v, errs.ErrDtype)
}

// CheckIndices returns a *gather.IndexError for the first index of ix
// outside the range l admits for an axis of size s ([0, s) with
// l.NonNegative, else [-s, s-1]), or nil; l names where the indices are,
// axis what they index.
func CheckIndices(l Label, ix Indices, axis, s int) error {
	if p := ix.FirstBadIn(l, s); p >= 0 {
		return IndexError(l, ix, p, axis, s)
	}
	return nil
}

// IndexError returns the *gather.IndexError for the index at flat
// position p of ix, an index into an axis of size s.
func IndexError(l Label, ix Indices, p, axis, s int) *errs.IndexError {
	return &errs.IndexError{Op: l.Op, Name: l.Name, Arg: l.Arg, Pos: Unravel(p, ix.Shape), Value: ix.At(p), Axis: axis, Size: s, NonNegative: l.NonNegative}
}

// CheckArity reports an error unless the op named op (with role "" for
// the op itself, " gradient" for its gradient op) got the want inputs it
// takes. The message is assembled only on error, so the check allocates
// nothing.
func CheckArity(op, role string, n, want int) error {
	if n != want {
		return fmt.Errorf("%s%s: want %d inputs, got %d: %w", op, role, want, n, errs.ErrShape)
	}
	return nil
}

// PickFloat returns f32 for the data dtype Float32 and f64 otherwise
// (Float64): the one place a float dtype becomes a type parameter. An op
// picks its loops once, when it is built.
func PickFloat[F any](dt tensor.Dtype, f32, f64 F) F {
	if dt == tensor.Float32 {
		return f32
	}
	return f64
}

// PickFloatIndex returns the instance of a function generic in a float
// type T and an index type I for the data dtype dt and the index dtype it.
func PickFloatIndex[F any](dt, it tensor.Dtype, f32 [3]F, f64 [3]F) F {
	return PickFloat(dt, Pick(it, f32[0], f32[1], f32[2]), Pick(it, f64[0], f64[1], f64[2]))
}

// Floats returns t's values as a []T, T the Go type of t's dtype (Float32
// or Float64); an empty tensor gives an empty slice, nil gives nil.
func Floats[T kernel.Float](t *tensor.Dense) []T {
	if t == nil {
		return nil
	}
	if t.Shape().TotalSize() == 0 {
		return []T{}
	}
	want := tensor.Float64
	if _, ok := any(*new(T)).(float32); ok {
		want = tensor.Float32
	}
	if t.Dtype() != want {
		return nil
	}
	return Elems[T](t)
}

// Prealloc returns prealloc as the output of an op of dtype dt and the
// given shape if it can hold it: a row-major tensor of that dtype and
// shape, in Go memory, sharing no memory with the inputs in. Else it
// returns NewOutput(dt, shape). An op's UsePreallocDo writes into it only
// after checking every input.
func Prealloc(prealloc gorgonia.Value, dt tensor.Dtype, shape tensor.Shape, in []gorgonia.Value) *tensor.Dense {
	out, ok := prealloc.(*tensor.Dense)
	if !ok || out.Dtype() != dt || !SameShape(out.Shape(), shape) || !Writable(out) {
		return NewOutput(dt, shape)
	}
	for _, v := range in {
		if t, ok := v.(*tensor.Dense); ok && Overlaps(out, t) {
			return NewOutput(dt, shape)
		}
	}
	return out
}

// ScalarOut returns v as a Gorgonia scalar of dtype dt (float32 or
// float64): prealloc itself, set to v, if it is one of that dtype, else a
// new one.
func ScalarOut(prealloc gorgonia.Value, dt tensor.Dtype, v float64) gorgonia.Value {
	switch p := prealloc.(type) {
	case *gorgonia.F32:
		if dt == tensor.Float32 {
			*p = gorgonia.F32(float32(v))
			return p
		}
	case *gorgonia.F64:
		if dt == tensor.Float64 {
			*p = gorgonia.F64(v)
			return p
		}
	}
	if dt == tensor.Float32 {
		return gorgonia.NewF32(float32(v))
	}
	return gorgonia.NewF64(v)
}

// CheckFloat reports an error wrapping gather.ErrDtype, naming op and
// what has the dtype, unless dt is Float32 or Float64: the dtypes of
// tables, gradients and the layers that compute in floats.
func CheckFloat(op, what string, dt tensor.Dtype) error {
	if dt == tensor.Float32 || dt == tensor.Float64 {
		return nil
	}
	return fmt.Errorf("%s: %s must be float32 or float64, got %v: %w", op, what, dt, errs.ErrDtype)
}

// LittleEndianBytes returns the values of t, a float32 or float64
// tensor, as little-endian bytes: t's own memory on a little-endian
// machine (fileio.LittleEndianBytes).
func LittleEndianBytes(t *tensor.Dense) []byte {
	if t.Dtype() == tensor.Float32 {
		return fileio.LittleEndianBytes(t.Float32s())
	}
	return fileio.LittleEndianBytes(t.Float64s())
}

// Header returns t if it is a tensor of backing (all of it, not empty)
// with shape, else a new tensor of backing with shape: the header of
// memory kept from one step to the next, made once, so that a step that
// reuses its memory allocates nothing. It never reads t through
// reflection (Dense.Data allocates).
func Header[T int64 | float32 | float64](t *tensor.Dense, backing []T, shape ...int) *tensor.Dense {
	if t != nil && len(backing) > 0 && t.Dims() == len(shape) {
		var d []T
		switch p := any(&d).(type) {
		case *[]int64:
			if t.Dtype() == tensor.Int64 {
				*p = Elems[int64](t)
			}
		case *[]float32:
			if t.Dtype() == tensor.Float32 {
				*p = Elems[float32](t)
			}
		case *[]float64:
			if t.Dtype() == tensor.Float64 {
				*p = Elems[float64](t)
			}
		}
		if len(d) == len(backing) && &d[0] == &backing[0] && SameShape(t.Shape(), shape) {
			return t
		}
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing))
}
