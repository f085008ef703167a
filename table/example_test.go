package table_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/table"
)

// A table file made, mapped, and protected while it is open.
func ExampleCreate() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "items.safetensors")
	if err := table.Create(path, "items", 100_000, 16, tensor.Float32, table.WithSeed(1)); err != nil {
		log.Fatal(err)
	}
	f, err := table.Open(path, "items")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	w, err := f.Weight()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(w.Shape())
	err = table.Create(path, "items", 10, 16, tensor.Float32, table.WithReplace())
	fmt.Println(errors.Is(err, table.ErrInUse))
	err = checkpoint.Write(path, nil, nil)
	fmt.Println(errors.Is(err, table.ErrInUse))
	// Output:
	// (100000, 16)
	// true
	// true
}
