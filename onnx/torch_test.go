package onnx

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// torchModels are the fixtures testdata/make_torch.py writes with
// PyTorch's exporter: the dims their batch dimension takes.
var torchModels = map[string]int{"click": 9, "picker": 7, "language": 8}

// readInputs reads the inputs of the fixture in dir.
func readInputs(t *testing.T, dir string, n int) []*tensor.Dense {
	var in []*tensor.Dense
	for k := range n {
		in = append(in, readTensor(t, filepath.Join(dir, fmt.Sprintf("input_%d.pb", k))))
	}
	return in
}

// maxDiff returns the largest difference between the float32 values of a
// and b, or +Inf if their shapes differ.
func maxDiff(a, b tensor.Tensor) float64 {
	if !a.Shape().Eq(b.Shape()) {
		return math.Inf(1)
	}
	x, y := a.Data().([]float32), b.Data().([]float32)
	d := 0.0
	for i := range x {
		d = max(d, math.Abs(float64(x[i])-float64(y[i])))
	}
	return d
}

// Each PyTorch export imports and runs to torch's forward within 1e-6,
// and three SGD steps of the loss sum(output * weights) in Go leave every
// parameter where torch's left it, within float32 rounding: 4e-6, about
// 32 units in the last place of the parameters' magnitudes (under 1), as
// the products' sums run in another order (3e-7 with the module's GEMM,
// 1.01e-6 with the purego build's).
func TestTorchFixtures(t *testing.T) {
	for name, batch := range torchModels {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", "torch", name)
			m, err := ReadFile(filepath.Join(dir, "model.onnx"), Options{Dims: map[string]int{"batch": batch}})
			if err != nil {
				t.Fatal(err)
			}
			in := readInputs(t, dir, len(m.Inputs))
			want := readTensor(t, filepath.Join(dir, "output_0.pb"))
			for k, n := range m.Inputs {
				if err := gorgonia.Let(n, in[k]); err != nil {
					t.Fatal(err)
				}
			}
			out := m.Outputs[0]
			var forward gorgonia.Value // out's value as the forward pass left it, before the backward pass's in-place ops
			gorgonia.Read(out, &forward)
			weights := gorgonia.NewTensor(m.Graph, tensor.Float32, out.Dims(), gorgonia.WithShape(out.Shape()...), gorgonia.WithName("loss weights"),
				gorgonia.WithValue(readTensor(t, filepath.Join(dir, "weights.pb"))))
			prod, err := gorgonia.HadamardProd(out, weights)
			if err != nil {
				t.Fatal(err)
			}
			loss, err := gorgonia.Sum(prod)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := gorgonia.Grad(loss, m.Params...); err != nil {
				t.Fatal(err)
			}
			vm := gorgonia.NewTapeMachine(m.Graph, gorgonia.BindDualValues(m.Params...))
			defer vm.Close()
			solver := gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.1))
			for step := range 4 {
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				if step == 0 {
					d := maxDiff(forward.(tensor.Tensor), want)
					if d > 1e-6 {
						t.Fatalf("forward: %g from torch's", d)
					}
					t.Logf("forward: %.2g from torch's", d)
				}
				if step == 3 {
					break
				}
				if err := solver.Step(gorgonia.NodesToValueGrads(m.Params)); err != nil {
					t.Fatal(err)
				}
				vm.Reset()
			}
			worst := 0.0
			for _, p := range m.Params {
				path := filepath.Join(dir, "tuned_"+p.Name()+".pb")
				if _, err := os.Stat(path); err != nil {
					t.Fatalf("parameter %q has no tuned value: %v", p.Name(), err)
				}
				d := maxDiff(p.Value().(tensor.Tensor), readTensor(t, path))
				if d > 4e-6 {
					t.Fatalf("parameter %q after 3 steps: %g from torch's", p.Name(), d)
				}
				worst = max(worst, d)
			}
			t.Logf("after 3 SGD steps: parameters within %.2g of torch's", worst)
		})
	}
}
