package onnx

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/onnxpb"
	"github.com/gathergrad/gather/table"
)

// graphOf returns m as Export takes it, its outputs named out_<k>.
func graphOf(m *Model) Graph {
	g := Graph{Inputs: m.Inputs, Outputs: m.Outputs}
	for k := range m.Outputs {
		g.OutputNames = append(g.OutputNames, "out_"+string(rune('0'+k)))
	}
	return g
}

// Import(Export(m)) of PyTorch's exports and ONNX's node tests runs to
// the same bits as m.
func TestExportRoundTrip(t *testing.T) {
	type fixture struct {
		dir   string
		batch int
	}
	var all []fixture
	for name, batch := range torchModels {
		all = append(all, fixture{filepath.Join("testdata", "torch", name), batch})
	}
	nodes, _ := filepath.Glob("testdata/node/test_*")
	for _, d := range nodes {
		all = append(all, fixture{d, 0})
	}
	for _, f := range all {
		t.Run(filepath.Base(f.dir), func(t *testing.T) {
			o := Options{Dims: map[string]int{"batch": f.batch}}
			m, err := ReadFile(filepath.Join(f.dir, "model.onnx"), o)
			if err != nil {
				t.Fatal(err)
			}
			var in []*tensor.Dense
			if f.batch > 0 {
				in = readInputs(t, f.dir, len(m.Inputs))
			} else {
				for k := range len(m.Inputs) {
					in = append(in, readTensor(t, filepath.Join(f.dir, "test_data_set_0", "input_"+string(rune('0'+k))+".pb")))
				}
			}
			want := run(t, m, in...)
			path := filepath.Join(t.TempDir(), "model.onnx")
			if err := Export(path, graphOf(m)); err != nil {
				t.Fatal(err)
			}
			back, err := ReadFile(path, o)
			if err != nil {
				t.Fatal(err)
			}
			got := run(t, back, in...)
			for k := range want {
				if !got[k].Shape().Eq(want[k].Shape()) || !equalData(got[k].Data(), want[k].Data()) {
					t.Fatalf("output %d: %v, want %v", k, got[k].Data(), want[k].Data())
				}
			}
		})
	}
}

// A node Export does not write is an error naming it and its op, and no
// file is written.
func TestExportRefuses(t *testing.T) {
	g := gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(2, 3), gorgonia.WithName("x"))
	y := gorgonia.Must(gorgonia.Square(x))
	path := filepath.Join(t.TempDir(), "m.onnx")
	err := Export(path, Graph{Inputs: []*gorgonia.Node{x}, Outputs: []*gorgonia.Node{y}})
	if err == nil || !containsAll(err.Error(), y.Name(), "square") {
		t.Fatalf("an op Export does not write: %v", err)
	}
	if _, statErr := filepath.Glob(path); statErr != nil {
		t.Fatal(statErr)
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*")); len(m) != 0 {
		t.Fatalf("files written on error: %v", m)
	}
}

// Transpose, Sum, Mean (a sum divided by a size) and a division by a
// scalar constant export and import back to the same bits, and ONNX
// Runtime, where installed, agrees within 1e-6.
func TestExportReductions(t *testing.T) {
	g := gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(2, 3), gorgonia.WithName("x"))
	sum := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.Transpose(x)), 1))
	mean := gorgonia.Must(gorgonia.Mean(x, 1))
	half := gorgonia.Must(gorgonia.HadamardDiv(gorgonia.Must(gorgonia.Tanh(x)), gorgonia.NewConstant(float32(2))))
	gr := Graph{Inputs: []*gorgonia.Node{x}, Outputs: []*gorgonia.Node{sum, mean, half}, OutputNames: []string{"sum", "mean", "half"}}
	in := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1, -2, 3, 0.5, 4, -1}))
	m := &Model{Graph: g, Inputs: gr.Inputs, Outputs: gr.Outputs}
	want := run(t, m, in)
	path := filepath.Join(t.TempDir(), "r.onnx")
	if err := Export(path, gr); err != nil {
		t.Fatal(err)
	}
	back, err := ReadFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := run(t, back, in)
	for k := range want {
		if !got[k].Shape().Eq(want[k].Shape()) || !equalData(got[k].Data(), want[k].Data()) {
			t.Fatalf("output %s: %v %v, want %v %v", gr.OutputNames[k], got[k].Shape(), got[k].Data(), want[k].Shape(), want[k].Data())
		}
	}
	if exec.Command("node", "-e", "require('onnxruntime-node')").Run() != nil {
		t.Log("ONNX Runtime not checked: node cannot load onnxruntime-node")
		return
	}
	ort := runORT(t, path, []string{"x"}, []*tensor.Dense{in})
	for k, name := range gr.OutputNames {
		w := want[k].Data().([]float32)
		if len(ort[name]) != len(w) {
			t.Fatalf("%s: %d values from ONNX Runtime, %d from Go", name, len(ort[name]), len(w))
		}
		for i, v := range ort[name] {
			if math.Abs(v-float64(w[i])) > 1e-6 {
				t.Fatalf("%s: ONNX Runtime %v, Go %v", name, ort[name], w)
			}
		}
	}
}

// A weight stored as float16 or bfloat16 (Graph.Half) is written in two
// bytes a value and read through a Cast: Import gives back its values,
// so the model runs to the same bits once the graph's own weight holds
// the rounded values; ONNX Runtime, where installed, agrees within 1e-6.
func TestExportHalf(t *testing.T) {
	for _, f := range []table.Format{table.Float16, table.BFloat16} {
		t.Run(f.String(), func(t *testing.T) {
			dir := filepath.Join("testdata", "torch", "picker")
			o := Options{Dims: map[string]int{"batch": torchModels["picker"]}}
			m, err := ReadFile(filepath.Join(dir, "model.onnx"), o)
			if err != nil {
				t.Fatal(err)
			}
			w := m.Params[0]
			if w.Name() != "l.weight" {
				t.Fatalf("the first parameter is %q", w.Name())
			}
			table.RoundValues(f, w.Value().Data().([]float32))
			in := readInputs(t, dir, len(m.Inputs))
			want := run(t, m, in...)[0]
			path := filepath.Join(t.TempDir(), "half.onnx")
			g := graphOf(m)
			g.Half = map[*gorgonia.Node]table.Format{w: f}
			if err := Export(path, g); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var mp onnxpb.ModelProto
			if err := proto.Unmarshal(b, &mp); err != nil {
				t.Fatal(err)
			}
			for _, init := range mp.Graph.Initializer {
				if init.GetName() == "l.weight" && (len(init.GetRawData()) != 2*30 || init.GetDataType() == int32(onnxpb.TensorProto_FLOAT)) {
					t.Fatalf("l.weight written as %v in %d bytes", onnxpb.TensorProto_DataType(init.GetDataType()), len(init.GetRawData()))
				}
			}
			back, err := ReadFile(path, o)
			if err != nil {
				t.Fatal(err)
			}
			got := run(t, back, in...)[0]
			if !equalData(got.Data(), want.Data()) {
				t.Fatalf("read back: %v, want %v", got.Data(), want.Data())
			}
			if exec.Command("node", "-e", "require('onnxruntime-node')").Run() != nil {
				return
			}
			names := []string{m.Inputs[0].Name(), m.Inputs[1].Name()}
			ort := runORT(t, path, names, in)["out_0"]
			wv := want.Data().([]float32)
			if len(ort) != len(wv) {
				t.Fatalf("%d values from ONNX Runtime", len(ort))
			}
			for i := range ort {
				if math.Abs(ort[i]-float64(wv[i])) > 1e-6 {
					t.Fatalf("ONNX Runtime %v, Go %v", ort, wv)
				}
			}
		})
	}
}
