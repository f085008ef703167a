package onnx_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
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

// A graph of this module's ops written as an ONNX model and read back:
// an embedding lookup, the mean of each example's rows, a sigmoid.
func ExampleExport() {
	g := gorgonia.NewGraph()
	table := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(4, 2), gorgonia.WithName("emb.weight"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(4, 2), tensor.WithBacking([]float32{0, 0, 1, 1, 2, -2, -1, 3}))))
	ids := gorgonia.NewMatrix(g, tensor.Int64, gorgonia.WithShape(2, 2), gorgonia.WithName("ids"))
	rows, err := gather.Gather(table, ids, 0)
	if err != nil {
		log.Fatal(err)
	}
	p := gorgonia.Must(gorgonia.Sigmoid(gorgonia.Must(gorgonia.Mean(rows, 1))))
	dir, err := os.MkdirTemp("", "onnx-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.onnx")
	if err := onnx.Export(path, onnx.Graph{Inputs: []*gorgonia.Node{ids}, Outputs: []*gorgonia.Node{p}, OutputNames: []string{"p"}}); err != nil {
		log.Fatal(err)
	}
	m, err := onnx.ReadFile(path, onnx.Options{})
	if err != nil {
		log.Fatal(err)
	}
	gorgonia.Let(m.Inputs[0], tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]int64{1, 2, 3, 0})))
	vm := gorgonia.NewTapeMachine(m.Graph)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Params[0].Name(), m.Outputs[0].Shape())
	fmt.Printf("%.3f\n", m.Outputs[0].Value().Data())
	// Output:
	// emb.weight (2, 2)
	// [0.818 0.378 0.378 0.818]
}
