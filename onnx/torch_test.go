package onnx

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/optim"
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

// PyTorch's click model with its two embedding tables imported row-sparse
// (Options.Sparse): three steps, SparseSGD on the tables and SGD on the
// rest, leave every parameter where torch's dense SGD left it (untouched
// rows do not move in either), within 4e-6; and the tuned graph exports
// and imports back to the same forward, bit for bit.
func TestTorchSparse(t *testing.T) {
	dir := filepath.Join("testdata", "torch", "click")
	o := Options{Dims: map[string]int{"batch": torchModels["click"]}, Sparse: []string{"u.weight", "i.weight"}}
	m, err := ReadFile(filepath.Join(dir, "model.onnx"), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Embeddings) != 2 || len(m.Params) != 4 {
		t.Fatalf("%d embeddings and %d params", len(m.Embeddings), len(m.Params))
	}
	in := readInputs(t, dir, len(m.Inputs))
	for k, n := range m.Inputs {
		if err := gorgonia.Let(n, in[k]); err != nil {
			t.Fatal(err)
		}
	}
	out := m.Outputs[0]
	weights := gorgonia.NewTensor(m.Graph, tensor.Float32, out.Dims(), gorgonia.WithShape(out.Shape()...), gorgonia.WithName("loss weights"),
		gorgonia.WithValue(readTensor(t, filepath.Join(dir, "weights.pb"))))
	loss := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(out, weights))))
	var forward gorgonia.Value // out's value as the forward pass left it
	gorgonia.Read(out, &forward)
	wrt := slices.Clone(m.Params)
	for _, name := range o.Sparse {
		wrt = append(wrt, m.Embeddings[name].GradNodes()...)
	}
	if _, err := gorgonia.Grad(loss, wrt...); err != nil {
		t.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(m.Graph, gorgonia.BindDualValues(m.Params...))
	defer vm.Close()
	solver := gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.1))
	for range 3 {
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		if err := solver.Step(gorgonia.NodesToValueGrads(m.Params)); err != nil {
			t.Fatal(err)
		}
		for _, name := range o.Sparse {
			if err := m.Embeddings[name].Step(context.Background(), &optim.SparseSGD{LearnRate: 0.1}); err != nil {
				t.Fatal(err)
			}
		}
		vm.Reset()
	}
	check := func(name string, v tensor.Tensor) {
		if d := maxDiff(v, readTensor(t, filepath.Join(dir, "tuned_"+name+".pb"))); d > 4e-6 {
			t.Fatalf("parameter %q after 3 steps: %g from torch's", name, d)
		}
	}
	for _, p := range m.Params {
		check(p.Name(), p.Value().(tensor.Tensor))
	}
	for name, e := range m.Embeddings {
		check(name, e.Table.Value().(tensor.Tensor))
	}
	// Export the tuned model and read it back: the same forward.
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	want := forward.Data().([]float32)
	path := filepath.Join(t.TempDir(), "tuned.onnx")
	if err := Export(path, Graph{Inputs: m.Inputs, Outputs: []*gorgonia.Node{out}, OutputNames: []string{"out"}}); err != nil {
		t.Fatal(err)
	}
	back, err := ReadFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := run(t, back, in...)[0].Data().([]float32)
	if !slices.Equal(got, want) {
		t.Fatalf("the exported tuned model: %v, the graph %v", got, want)
	}
	tuned := readTensor(t, filepath.Join(dir, "tuned_output_0.pb")).Data().([]float32)
	for k := range got {
		if math.Abs(float64(got[k])-float64(tuned[k])) > 4e-6 {
			t.Fatalf("the exported tuned model: %v, torch's %v", got, tuned)
		}
	}
}

// Options.Sparse naming a weight a Gemm reads, or no initializer, is an
// error naming it.
func TestSparseRefuses(t *testing.T) {
	path := filepath.Join("testdata", "torch", "click", "model.onnx")
	dims := map[string]int{"batch": 9}
	_, err := ReadFile(path, Options{Dims: dims, Sparse: []string{"l1.weight"}})
	if !errors.Is(err, errs.ErrOption) || !containsAll(err.Error(), `"l1.weight"`, "Gemm") {
		t.Fatalf("a sparse weight a Gemm reads: %v", err)
	}
	_, err = ReadFile(path, Options{Dims: dims, Sparse: []string{"nothing"}})
	if !errors.Is(err, errs.ErrOption) || !containsAll(err.Error(), `"nothing"`) {
		t.Fatalf("a sparse table of no initializer: %v", err)
	}
}
