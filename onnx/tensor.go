package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/onnxpb"
)

// maxElements bounds the elements of one tensor a file may declare, so
// that a hostile shape is an error, not a huge allocation.
const maxElements = 1 << 31

// dtypeOf returns the tensor dtype of an ONNX element type.
func dtypeOf(et int32) (tensor.Dtype, bool) {
	switch onnxpb.TensorProto_DataType(et) {
	case onnxpb.TensorProto_FLOAT:
		return tensor.Float32, true
	case onnxpb.TensorProto_DOUBLE:
		return tensor.Float64, true
	case onnxpb.TensorProto_INT64:
		return tensor.Int64, true
	case onnxpb.TensorProto_INT32:
		return tensor.Int32, true
	}
	return tensor.Dtype{}, false
}

// elemType returns the ONNX element type of dt.
func elemType(dt tensor.Dtype) (onnxpb.TensorProto_DataType, bool) {
	switch dt {
	case tensor.Float32:
		return onnxpb.TensorProto_FLOAT, true
	case tensor.Float64:
		return onnxpb.TensorProto_DOUBLE, true
	case tensor.Int64:
		return onnxpb.TensorProto_INT64, true
	case tensor.Int32:
		return onnxpb.TensorProto_INT32, true
	case tensor.Int:
		if strconv.IntSize == 64 {
			return onnxpb.TensorProto_INT64, true
		}
		return onnxpb.TensorProto_INT32, true
	}
	return 0, false
}

// shapeSize returns the number of elements of dims, or an error if a dim
// is negative or it or the product passes maxElements.
func shapeSize(what string, dims []int64) (int, error) {
	n := int64(1)
	for _, d := range dims {
		if d < 0 || d > maxElements || (d > 0 && n > maxElements/d) {
			return 0, fmt.Errorf("%s: shape %v: %w", what, dims, checkpoint.ErrFormat)
		}
		n *= d
	}
	return int(n), nil
}

// decode returns the value of t, a tensor of a file: its values in
// raw_data (little-endian) or in the typed field of its type. Data kept
// outside the file, a type this package does not read, or values of
// another number than the shape says are errors wrapping
// checkpoint.ErrFormat naming the tensor.
func decode(t *onnxpb.TensorProto) (*tensor.Dense, error) {
	what := fmt.Sprintf("tensor %q", t.GetName())
	if t.GetDataLocation() == onnxpb.TensorProto_EXTERNAL || len(t.GetExternalData()) > 0 {
		return nil, fmt.Errorf("%s: its data is in another file, which Import does not read: %w", what, checkpoint.ErrFormat)
	}
	if f, ok := halfOf(t.GetDataType()); ok {
		return decodeHalf(what, t, f)
	}
	dt, ok := dtypeOf(t.GetDataType())
	if !ok {
		return nil, fmt.Errorf("%s: element type %v: Import reads float, double, float16, bfloat16, int64 and int32: %w", what, onnxpb.TensorProto_DataType(t.GetDataType()), errs.ErrOption)
	}
	n, err := shapeSize(what, t.GetDims())
	if err != nil {
		return nil, err
	}
	shape := make(tensor.Shape, len(t.GetDims()))
	for k, d := range t.GetDims() {
		shape[k] = int(d)
	}
	raw := t.GetRawData()
	size := int(dt.Size())
	count := func(have int) error {
		if have != n {
			return fmt.Errorf("%s: %d values for shape %v: %w", what, have, shape, checkpoint.ErrFormat)
		}
		return nil
	}
	var backing any
	switch {
	case raw != nil:
		if len(raw)%size != 0 {
			return nil, fmt.Errorf("%s: %d bytes of raw data: %w", what, len(raw), checkpoint.ErrFormat)
		}
		if err := count(len(raw) / size); err != nil {
			return nil, err
		}
		switch dt {
		case tensor.Float32:
			v := make([]float32, n)
			for i := range v {
				v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
			backing = v
		case tensor.Float64:
			v := make([]float64, n)
			for i := range v {
				v[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
			}
			backing = v
		case tensor.Int64:
			v := make([]int64, n)
			for i := range v {
				v[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
			}
			backing = v
		case tensor.Int32:
			v := make([]int32, n)
			for i := range v {
				v[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
			}
			backing = v
		}
	case dt == tensor.Float32:
		if err := count(len(t.GetFloatData())); err != nil {
			return nil, err
		}
		backing = append([]float32(nil), t.GetFloatData()...)
	case dt == tensor.Float64:
		if err := count(len(t.GetDoubleData())); err != nil {
			return nil, err
		}
		backing = append([]float64(nil), t.GetDoubleData()...)
	case dt == tensor.Int64:
		if err := count(len(t.GetInt64Data())); err != nil {
			return nil, err
		}
		backing = append([]int64(nil), t.GetInt64Data()...)
	default: // int32 values travel in int32_data
		if err := count(len(t.GetInt32Data())); err != nil {
			return nil, err
		}
		backing = append([]int32(nil), t.GetInt32Data()...)
	}
	if len(shape) == 0 {
		return tensor.New(tensor.FromScalar(scalarOf(backing))), nil
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing)), nil
}

// scalarOf returns the one value of backing.
func scalarOf(backing any) any {
	switch v := backing.(type) {
	case []float32:
		return v[0]
	case []float64:
		return v[0]
	case []int64:
		return v[0]
	default:
		return backing.([]int32)[0]
	}
}

// encode returns t as a tensor of a file named name, its values in
// raw_data, little-endian.
func encode(name string, t *tensor.Dense) (*onnxpb.TensorProto, error) {
	et, ok := elemType(t.Dtype())
	if !ok {
		return nil, fmt.Errorf("tensor %q: dtype %v has no ONNX element type here: %w", name, t.Dtype(), checkpoint.ErrFormat)
	}
	p := &onnxpb.TensorProto{Name: &name, DataType: ptr(int32(et))}
	for _, d := range t.Shape() {
		p.Dims = append(p.Dims, int64(d))
	}
	var raw []byte
	switch v := t.Data().(type) {
	case []float32:
		raw = make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
		}
	case float32:
		raw = binary.LittleEndian.AppendUint32(nil, math.Float32bits(v))
	case []float64:
		raw = make([]byte, 8*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(x))
		}
	case float64:
		raw = binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))
	case []int64:
		raw = make([]byte, 8*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint64(raw[8*i:], uint64(x))
		}
	case []int32:
		raw = make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(raw[4*i:], uint32(x))
		}
	case int64:
		raw = binary.LittleEndian.AppendUint64(nil, uint64(v))
	case int32:
		raw = binary.LittleEndian.AppendUint32(nil, uint32(v))
	case []int:
		for _, x := range v {
			if strconv.IntSize == 64 {
				raw = binary.LittleEndian.AppendUint64(raw, uint64(x))
			} else {
				raw = binary.LittleEndian.AppendUint32(raw, uint32(x))
			}
		}
	default:
		return nil, fmt.Errorf("tensor %q: values of %T: %w", name, v, checkpoint.ErrFormat)
	}
	p.RawData = raw
	return p, nil
}

func ptr[T any](v T) *T { return &v }

// sortedKeys returns the keys of m in order.
func sortedKeys(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// halfOf returns the half format of an ONNX element type.
func halfOf(et int32) (kernel.HalfFormat, bool) {
	switch onnxpb.TensorProto_DataType(et) {
	case onnxpb.TensorProto_FLOAT16:
		return kernel.Float16, true
	case onnxpb.TensorProto_BFLOAT16:
		return kernel.BFloat16, true
	}
	return 0, false
}

// decodeHalf returns the float32 values of t, a tensor of half values f:
// two little-endian bytes each in raw_data, or one a value of int32_data.
func decodeHalf(what string, t *onnxpb.TensorProto, f kernel.HalfFormat) (*tensor.Dense, error) {
	n, err := shapeSize(what, t.GetDims())
	if err != nil {
		return nil, err
	}
	raw := t.GetRawData()
	if raw == nil {
		bits := t.GetInt32Data()
		if len(bits) != n {
			return nil, fmt.Errorf("%s: %d values for %d: %w", what, len(bits), n, checkpoint.ErrFormat)
		}
		raw = make([]byte, 2*n)
		for i, b := range bits {
			binary.LittleEndian.PutUint16(raw[2*i:], uint16(b))
		}
	}
	if len(raw) != 2*n {
		return nil, fmt.Errorf("%s: %d bytes of raw data for %d values of 2: %w", what, len(raw), n, checkpoint.ErrFormat)
	}
	v := make([]float32, n)
	kernel.FromHalf(f, v, raw)
	shape := make(tensor.Shape, len(t.GetDims()))
	for k, d := range t.GetDims() {
		shape[k] = int(d)
	}
	if len(shape) == 0 {
		return tensor.New(tensor.FromScalar(v[0])), nil
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v)), nil
}
