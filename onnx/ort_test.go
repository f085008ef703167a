package onnx

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"gorgonia.org/tensor"
)

// The ONNX Runtime tests run exported models with onnxruntime-node.
const (
	// ortInstall is what they need.
	ortInstall = "apt-get install -y nodejs npm && npm install --ignore-scripts --prefix DIR onnxruntime-node@1.30.0, with NODE_PATH=DIR/node_modules"
	// ortRequire makes a missing runtime a failure instead of a skip
	// (.ci/run sets it).
	ortRequire = "GATHER_REQUIRE_ORT"
	// ortScript runs a model with ONNX Runtime: examples/onnx's.
	ortScript = "../examples/onnx/ort.js"
)

// needORT skips t, naming the install, unless node can load
// onnxruntime-node; with ortRequire set it fails instead.
func needORT(t *testing.T) {
	t.Helper()
	err := exec.Command("node", "-e", "require('onnxruntime-node')").Run()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("node cannot load onnxruntime-node (%v); install: %s", err, ortInstall)
	if os.Getenv(ortRequire) != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// runORT runs the model file path with ONNX Runtime on in (named as
// names) and returns its outputs by name.
func runORT(t *testing.T, path string, names []string, in []*tensor.Dense) map[string][]float64 {
	t.Helper()
	type input struct {
		Name string `json:"name"`
		Type string `json:"type"`
		Dims []int  `json:"dims"`
		Data []any  `json:"data"`
	}
	ins := []input{}
	for k, x := range in {
		data := []any{}
		switch v := x.Data().(type) {
		case float32, float64, int64, int32:
			data = append(data, v)
		case []float32:
			for _, f := range v {
				data = append(data, f)
			}
		case []float64:
			for _, f := range v {
				data = append(data, f)
			}
		case []int64:
			for _, i := range v {
				data = append(data, i)
			}
		case []int32:
			for _, i := range v {
				data = append(data, i)
			}
		}
		ins = append(ins, input{names[k], x.Dtype().String(), append([]int{}, x.Shape()...), data})
	}
	b, err := json.Marshal(ins)
	if err != nil {
		t.Fatal(err)
	}
	inPath := filepath.Join(t.TempDir(), "inputs.json")
	if err := os.WriteFile(inPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("node", ortScript, path, inPath).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("ONNX Runtime: %v: %s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var res map[string]struct {
		Dims []int     `json:"dims"`
		Data []float64 `json:"data"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	got := map[string][]float64{}
	for k, v := range res {
		got[k] = v.Data
	}
	return got
}

// Every exported model, run by ONNX Runtime, gives Go's forward within
// 1e-6: PyTorch's three models imported and exported again, and ONNX's
// node tests.
func TestORT(t *testing.T) {
	needORT(t)
	dirs := []string{}
	for name := range torchModels {
		dirs = append(dirs, filepath.Join("testdata", "torch", name))
	}
	nodes, _ := filepath.Glob("testdata/node/test_*")
	dirs = append(dirs, nodes...)
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			batch := torchModels[filepath.Base(dir)]
			m, err := ReadFile(filepath.Join(dir, "model.onnx"), Options{Dims: map[string]int{"batch": batch}})
			if err != nil {
				t.Fatal(err)
			}
			var in []*tensor.Dense
			if batch > 0 {
				in = readInputs(t, dir, len(m.Inputs))
			} else {
				for k := range len(m.Inputs) {
					in = append(in, readTensor(t, filepath.Join(dir, "test_data_set_0", fmt.Sprintf("input_%d.pb", k))))
				}
			}
			want := run(t, m, in...)
			path := filepath.Join(t.TempDir(), "model.onnx")
			g := graphOf(m)
			if err := Export(path, g); err != nil {
				t.Fatal(err)
			}
			names := make([]string, len(m.Inputs))
			for k, n := range m.Inputs {
				names[k] = n.Name()
			}
			got := runORT(t, path, names, in)
			worst := 0.0
			for k, w := range want {
				o, ok := got[g.OutputNames[k]]
				if !ok {
					t.Fatalf("ONNX Runtime gave no %q: %v", g.OutputNames[k], got)
				}
				var wv []float64
				switch v := w.Data().(type) {
				case []float32:
					for _, f := range v {
						wv = append(wv, float64(f))
					}
				case []float64:
					wv = v
				}
				if len(o) != len(wv) {
					t.Fatalf("output %d: %d values from ONNX Runtime, %d from Go", k, len(o), len(wv))
				}
				for i := range o {
					worst = max(worst, math.Abs(o[i]-wv[i]))
				}
			}
			if worst > 1e-6 {
				t.Fatalf("ONNX Runtime and Go differ by %g", worst)
			}
			t.Logf("ONNX Runtime within %.2g of Go", worst)
		})
	}
}
