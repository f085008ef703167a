package gather

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gathergrad/gather/internal/vmtest"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/ref"
)

// The ONNX backend node tests in testdata/onnx are the ONNX project's own
// cases: a model.onnx holding one node and test_data_set_0 with its inputs
// and expected output as TensorProto files.

// onnxCase is one backend node test.
type onnxCase struct {
	name    string
	opType  string
	axis    int
	data    *tensor.Dense
	indices *tensor.Dense
	want    *tensor.Dense
}

func loadONNXCases(t *testing.T) []onnxCase {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("testdata", "onnx", "test_*"))
	require.NoError(t, err)
	require.NotEmpty(t, dirs, "no ONNX cases in testdata/onnx")
	var cases []onnxCase
	for _, dir := range dirs {
		c := onnxCase{name: filepath.Base(dir)}
		model, err := os.ReadFile(filepath.Join(dir, "model.onnx"))
		require.NoError(t, err)
		c.opType, c.axis, err = parseNode(model)
		require.NoError(t, err, dir)
		read := func(name string) *tensor.Dense {
			b, err := os.ReadFile(filepath.Join(dir, "test_data_set_0", name))
			require.NoError(t, err)
			d, err := parseTensor(b)
			require.NoError(t, err, "%s/%s", dir, name)
			return d
		}
		c.data, c.indices, c.want = read("input_0.pb"), read("input_1.pb"), read("output_0.pb")
		cases = append(cases, c)
	}
	return cases
}

// fields calls f for each field of the protobuf message b.
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var u uint32
			u, n = protowire.ConsumeFixed32(b)
			x = uint64(u)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// parseNode returns the op_type and axis attribute (0 if absent) of the
// single node of an ONNX ModelProto (graph = 7; GraphProto.node = 1;
// NodeProto.op_type = 4, attribute = 5; AttributeProto.name = 1, i = 3).
func parseNode(model []byte) (opType string, axis int, err error) {
	err = fields(model, func(num protowire.Number, _ protowire.Type, graph []byte, _ uint64) error {
		if num != 7 {
			return nil
		}
		return fields(graph, func(num protowire.Number, _ protowire.Type, node []byte, _ uint64) error {
			if num != 1 {
				return nil
			}
			return fields(node, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
				switch num {
				case 4:
					opType = string(v)
				case 5:
					var name string
					var i int64
					if err := fields(v, func(num protowire.Number, _ protowire.Type, v []byte, x uint64) error {
						switch num {
						case 1:
							name = string(v)
						case 3:
							i = int64(x)
						}
						return nil
					}); err != nil {
						return err
					}
					if name == "axis" {
						axis = int(i)
					}
				}
				return nil
			})
		})
	})
	if err == nil && opType == "" {
		err = fmt.Errorf("model has no node")
	}
	return opType, axis, err
}

// ONNX TensorProto data types used by these tests.
const (
	onnxFloat  = 1
	onnxInt32  = 6
	onnxInt64  = 7
	onnxDouble = 11
)

// parseTensor decodes a TensorProto (dims = 1, data_type = 2, raw_data = 9,
// or the typed float_data = 4, int32_data = 5, int64_data = 7, double_data = 10).
func parseTensor(b []byte) (*tensor.Dense, error) {
	var dims []int
	var dtype int
	var raw []byte
	var f32 []float32
	var i32 []int32
	var i64 []int64
	var f64 []float64
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		// Repeated numeric fields come packed (BytesType) or one per tag.
		each := func(add func(uint64)) error {
			if typ != protowire.BytesType {
				add(x)
				return nil
			}
			for len(v) > 0 {
				var u uint64
				var n int
				switch num {
				case 4:
					var w uint32
					w, n = protowire.ConsumeFixed32(v)
					u = uint64(w)
				case 10:
					u, n = protowire.ConsumeFixed64(v)
				default:
					u, n = protowire.ConsumeVarint(v)
				}
				if n < 0 {
					return protowire.ParseError(n)
				}
				v = v[n:]
				add(u)
			}
			return nil
		}
		switch num {
		case 1:
			return each(func(u uint64) { dims = append(dims, int(int64(u))) })
		case 2:
			dtype = int(x)
		case 4:
			return each(func(u uint64) { f32 = append(f32, math.Float32frombits(uint32(u))) })
		case 5:
			return each(func(u uint64) { i32 = append(i32, int32(u)) })
		case 7:
			return each(func(u uint64) { i64 = append(i64, int64(u)) })
		case 9:
			raw = v
		case 10:
			return each(func(u uint64) { f64 = append(f64, math.Float64frombits(u)) })
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	n := 1
	for _, d := range dims {
		n *= d
	}
	var backing any
	switch dtype {
	case onnxFloat:
		if raw != nil {
			f32 = make([]float32, n)
			for i := range f32 {
				f32[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		}
		backing = f32
	case onnxDouble:
		if raw != nil {
			f64 = make([]float64, n)
			for i := range f64 {
				f64[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
			}
		}
		backing = f64
	case onnxInt32:
		if raw != nil {
			i32 = make([]int32, n)
			for i := range i32 {
				i32[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		}
		backing = i32
	case onnxInt64:
		if raw != nil {
			i64 = make([]int64, n)
			for i := range i64 {
				i64[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
			}
		}
		backing = i64
	default:
		return nil, fmt.Errorf("ONNX data type %d is not used by these tests", dtype)
	}
	if l := ref.LenOf(backing); l != n {
		return nil, fmt.Errorf("tensor of dims %v holds %d values", dims, l)
	}
	if len(dims) == 0 {
		return tensor.New(tensor.FromScalar(ref.FirstOf(backing))), nil
	}
	return tensor.New(tensor.WithShape(dims...), tensor.WithBacking(backing)), nil
}

func TestONNXBackendCases(t *testing.T) {
	for _, c := range loadONNXCases(t) {
		t.Run(c.name, func(t *testing.T) {
			var op string
			switch {
			case strings.HasPrefix(c.name, "test_gather_elements"):
				op = "GatherElements"
			default:
				op = "Gather"
			}
			require.Equal(t, op, c.opType)
			before := c.data.Clone().(*tensor.Dense)

			// Tensor API.
			var got *tensor.Dense
			var err error
			if op == "Gather" {
				got, err = Take(c.data, c.indices, c.axis)
			} else {
				got, err = TakeAlongAxis(c.data, c.indices, c.axis)
			}
			require.NoError(t, err)
			requireSameTensor(t, c.want, got)
			requireSameTensor(t, before, c.data)

			// TapeMachine graph.
			g := gorgonia.NewGraph()
			data := gorgonia.NodeFromAny(g, c.data, gorgonia.WithName("data"))
			idx := gorgonia.NodeFromAny(g, c.indices, gorgonia.WithName("indices"))
			build := func(d, i *gorgonia.Node, axis int) (*gorgonia.Node, error) { return Gather(d, i, axis) }
			if op == "GatherElements" {
				build = func(d, i *gorgonia.Node, axis int) (*gorgonia.Node, error) { return GatherElements(d, i, axis) }
			}
			out, err := build(data, idx, c.axis)
			require.NoError(t, err)
			require.Equal(t, c.want.Shape(), out.Shape())
			vm := vmtest.New(t, g)
			defer vm.Close()
			require.NoError(t, vm.RunAll())
			requireSameTensor(t, c.want, out.Value().(*tensor.Dense))
		})
	}
}

// requireSameTensor checks dtype, shape and every element.
func requireSameTensor(t *testing.T, want, got *tensor.Dense) {
	t.Helper()
	require.Equal(t, want.Dtype(), got.Dtype(), "dtype")
	require.True(t, want.Shape().Eq(got.Shape()), "shape: want %v, got %v", want.Shape(), got.Shape())
	if want.Shape().TotalSize() == 0 {
		return
	}
	require.Equal(t, want.Data(), got.Data())
}
