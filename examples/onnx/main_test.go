package main

import (
	"os"
	"path/filepath"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/onnx"
)

// Fine-tuning learns the rule (the held-out batch's loss falls below a
// tenth of the start's, and nine in ten are right), and the exported
// file imports and runs to the probabilities Go computed; ONNX Runtime,
// where it is installed, agrees within 1e-6.
func TestRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "tuned.onnx")
	r, err := run(200, out)
	if err != nil {
		t.Fatal(err)
	}
	if r.after > r.before/10 || r.accuracy < 0.9 {
		t.Fatalf("loss %.3f -> %.3f, accuracy %.2f", r.before, r.after, r.accuracy)
	}
	m, err := onnx.ReadFile(out, onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	u, it := make([]int64, batch), make([]int64, batch)
	u[0], u[1], it[0], it[1] = 2, 3, 4, 4
	for k, v := range [][]int64{u, it} {
		if err := gorgonia.Let(m.Inputs[k], tensor.New(tensor.WithShape(batch), tensor.WithBacking(v))); err != nil {
			t.Fatal(err)
		}
	}
	vm := gorgonia.NewTapeMachine(m.Graph)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	p := m.Outputs[0].Value().Data().([]float32)
	if p[0] < 0.5 || p[1] > 0.5 { // user 2 and item 4 share parity, user 3 does not
		t.Fatalf("the exported model says %v for (2, 4) and (3, 4)", p)
	}
	switch {
	case r.ort >= 0 && r.ort > 1e-6:
		t.Fatalf("ONNX Runtime differs from Go by %g", r.ort)
	case r.ort < 0 && os.Getenv("GATHER_REQUIRE_ORT") != "":
		t.Fatalf("ONNX Runtime did not run: %v", r.ortErr)
	case r.ort < 0:
		t.Logf("ONNX Runtime not checked: %v", r.ortErr)
	}
}
