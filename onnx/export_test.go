package onnx

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gathergrad/gather/table/driver"

	"google.golang.org/protobuf/proto"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/onnxpb"
	"github.com/gathergrad/gather/nn"
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
	for _, f := range []driver.Format{driver.Float16, driver.BFloat16} {
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
			g.Half = map[*gorgonia.Node]driver.Format{w: f}
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

// The Gorgonia ops a user's graph and Import build export and import back
// to the same bits, and ONNX Runtime, where installed, agrees within
// 1e-6: matrix, matrix-vector and batched products (transposed too),
// broadcast arithmetic, gorgonia.Mean over several axes (a division by a
// product of sizes) and nn.Sum and nn.Mean over middle axes.
func TestExportGorgoniaOps(t *testing.T) {
	g := gorgonia.NewGraph()
	vals := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i%5) - 1.5
		}
		return v
	}
	x := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(2, 3), gorgonia.WithName("x"))
	w := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(4, 3), gorgonia.WithName("w"), gorgonia.WithValue(f32([]int{4, 3}, vals(12)...)))
	v := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(3), gorgonia.WithName("v"), gorgonia.WithValue(f32([]int{3}, 1, 2, 3)))
	b := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(1, 3), gorgonia.WithName("b"), gorgonia.WithValue(f32([]int{1, 3}, 0.5, -1, 2)))
	s := gorgonia.NewTensor(g, tensor.Float32, 3, gorgonia.WithShape(2, 3, 2), gorgonia.WithName("s"), gorgonia.WithValue(f32([]int{2, 3, 2}, vals(12)...)))
	r4 := gorgonia.NewTensor(g, tensor.Float32, 4, gorgonia.WithShape(2, 3, 4, 5), gorgonia.WithName("r4"), gorgonia.WithValue(f32([]int{2, 3, 4, 5}, vals(120)...)))
	xt := gorgonia.Must(gorgonia.Mul(x, gorgonia.Must(gorgonia.Transpose(w)))) // Linear without a bias
	outs := []*gorgonia.Node{
		gorgonia.Must(gorgonia.Mul(x, gorgonia.Must(gorgonia.Transpose(x)))),
		xt,
		gorgonia.Must(gorgonia.Mul(x, v)),
		gorgonia.Must(gorgonia.BatchedMatMul(gorgonia.Must(gorgonia.Reshape(x, tensor.Shape{1, 2, 3})), gorgonia.Must(gorgonia.Reshape(gorgonia.Must(gorgonia.Transpose(x)), tensor.Shape{1, 3, 2})))),
		gorgonia.Must(gorgonia.BroadcastAdd(x, b, nil, []byte{0})),
		gorgonia.Must(gorgonia.BroadcastHadamardProd(b, x, []byte{0}, nil)),
		gorgonia.Must(gorgonia.Mean(s, 1, 2)),
		gorgonia.Must(nn.Sum(r4, false, 1, 2)),
		gorgonia.Must(nn.Mean(r4, true, 2, 3)),
	}
	gr := Graph{Inputs: []*gorgonia.Node{x}, Outputs: outs}
	for k := range outs {
		gr.OutputNames = append(gr.OutputNames, fmt.Sprintf("y%d", k))
	}
	in := f32([]int{2, 3}, 1, -2, 3, 0.5, 4, -1)
	m := &Model{Graph: g, Inputs: gr.Inputs, Outputs: gr.Outputs}
	want := run(t, m, in)
	path := filepath.Join(t.TempDir(), "ops.onnx")
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
			t.Errorf("%s imported again: %v %v, want %v %v", gr.OutputNames[k], got[k].Shape(), got[k].Data(), want[k].Shape(), want[k].Data())
		}
	}
	if exec.Command("node", "-e", "require('onnxruntime-node')").Run() != nil {
		if os.Getenv(ortRequire) != "" {
			t.Fatalf("node cannot load onnxruntime-node; install: %s", ortInstall)
		}
		t.Logf("ONNX Runtime not checked; install: %s", ortInstall)
		return
	}
	ort := runORT(t, path, []string{"x"}, []*tensor.Dense{in})
	for k, name := range gr.OutputNames {
		var w []float32
		switch d := want[k].Data().(type) {
		case []float32:
			w = d
		case float32:
			w = []float32{d}
		}
		if len(ort[name]) != len(w) {
			t.Fatalf("%s: %d values from ONNX Runtime, %d from Go", name, len(ort[name]), len(w))
		}
		for i, v := range ort[name] {
			if math.Abs(v-float64(w[i])) > 1e-6*(1+math.Abs(v)) {
				t.Fatalf("%s: ONNX Runtime %v, Go %v", name, ort[name], w)
			}
		}
	}
}

// An outer product is refused naming the product.
func TestExportRefusesOuter(t *testing.T) {
	g := gorgonia.NewGraph()
	v := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(3), gorgonia.WithName("v"))
	outer := gorgonia.Must(gorgonia.OuterProd(v, v))
	if err := Export(filepath.Join(t.TempDir(), "o.onnx"), Graph{Inputs: []*gorgonia.Node{v}, Outputs: []*gorgonia.Node{outer}}); err == nil || !containsAll(err.Error(), "product") {
		t.Errorf("an outer product: %v", err)
	}
}
