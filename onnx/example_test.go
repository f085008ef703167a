package onnx_test

import (
	"fmt"
	"log"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/onnx"
)

// A model PyTorch exported (a linear layer, log_softmax, torch.gather of
// one log-probability per example) run in Go: its batch dimension, which
// the export made dynamic, sized 2.
func ExampleReadFile() {
	m, err := onnx.ReadFile("testdata/torch/picker/model.onnx", onnx.Options{Dims: map[string]int{"batch": 2}})
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range m.Params {
		fmt.Println(p.Name(), p.Shape())
	}
	x := tensor.New(tensor.WithShape(2, 6), tensor.WithBacking([]float32{1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}))
	target := tensor.New(tensor.WithShape(2, 1), tensor.WithBacking([]int64{0, 4}))
	gorgonia.Let(m.Inputs[0], x)
	gorgonia.Let(m.Inputs[1], target)
	vm := gorgonia.NewTapeMachine(m.Graph)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Outputs[0].Shape())
	// Output:
	// l.weight (5, 6)
	// l.bias (5)
	// (2, 1)
}
