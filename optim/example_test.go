package optim_test

import (
	"fmt"
	"log"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/optim"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// A table and its optim.SparseAdam state saved together, and restored into a
// model built again (another seed: the values come from the file).
func ExampleState() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "words.safetensors")

	build := func(seed uint64) (*nn.Embedding, *optim.SparseAdam) {
		g := gorgonia.NewGraph()
		emb, err := nn.NewEmbedding(g, "words", 3, 2, tensor.Float32, nn.WithSparse(), nn.WithSeed(seed))
		if err != nil {
			log.Fatal(err)
		}
		return emb, optim.NewSparseAdam(0.1)
	}
	emb, adam := build(1)
	if err := checkpoint.Save(path, nil, emb, optim.State(emb, adam)); err != nil {
		log.Fatal(err)
	}
	saved := slices.Clone(emb.Table.Value().(*tensor.Dense).Float32s())

	again, fresh := build(2)
	if _, err := checkpoint.Load(path, again, optim.State(again, fresh)); err != nil {
		log.Fatal(err)
	}
	fmt.Println("same table:", slices.Equal(saved, again.Table.Value().(*tensor.Dense).Float32s()))
	tensors, _, err := checkpoint.Read(path)
	if err != nil {
		log.Fatal(err)
	}
	names := slices.Sorted(maps.Keys(tensors))
	fmt.Println(names)
	// Output:
	// same table: true
	// [words.exp_avg words.exp_avg_sq words.step words.weight]
}
