package checkpoint_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
)

// Write and Read any named tensors and string metadata.
func ExampleWrite() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "vectors.safetensors")
	err = checkpoint.Write(path, map[string]tensor.Tensor{
		"weight": tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6})),
		"ids":    tensor.New(tensor.WithBacking([]int64{7, 9})),
	}, map[string]string{"format": "pt"})
	if err != nil {
		log.Fatal(err)
	}
	tensors, meta, err := checkpoint.Read(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(tensors["weight"].Shape(), tensors["weight"].Data())
	fmt.Println(tensors["ids"].Dtype(), tensors["ids"].Data())
	fmt.Println(meta)
	// Output:
	// (2, 3) [1 2 3 4 5 6]
	// int64 [7 9]
	// map[format:pt]
}

// Save the learnables of a model, change them, and Load them back in
// place.
func ExampleSave() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")

	g := gorgonia.NewGraph()
	w := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("w"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1, 2, 3, 4}))))
	if err := checkpoint.Save(path, map[string]string{"epoch": "3"}, checkpoint.Nodes(w)); err != nil {
		log.Fatal(err)
	}
	w.Value().(*tensor.Dense).Zero() // training goes wrong
	meta, err := checkpoint.Load(path, checkpoint.Nodes(w))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(w.Value().Data(), meta["epoch"])
	// Output:
	// [1 2 3 4] 3
}
