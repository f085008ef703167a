package checkpoint_test

import (
	"errors"
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

// Loading a checkpoint into a model that has grown a layer since, as
// PyTorch's load_state_dict(strict=False) does.
func ExampleLoadWith() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")
	old := map[string]tensor.Tensor{"w": tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{1, 2}))}
	if err := checkpoint.Write(path, old, nil); err != nil {
		log.Fatal(err)
	}

	g := gorgonia.NewGraph()
	w := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithName("w"), gorgonia.WithShape(2), gorgonia.WithInit(gorgonia.Zeroes()))
	b := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithName("b"), gorgonia.WithShape(2), gorgonia.WithInit(gorgonia.Zeroes()))
	_, err = checkpoint.Load(path, checkpoint.Nodes(w, b))
	fmt.Println(errors.Is(err, checkpoint.ErrMismatch))
	r, err := checkpoint.LoadWith(path, checkpoint.LoadOptions{NonStrict: true, Convert: true}, checkpoint.Nodes(w, b))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(w.Value().Data(), "missing:", r.Missing)
	// Output:
	// true
	// [1 2] missing: [b]
}
