package optim_test

import (
	"context"
	"fmt"
	"log"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/optim"
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
	if err := checkpoint.Save(path, nil, emb, optim.State(emb.Home().(nn.Weights), adam)); err != nil {
		log.Fatal(err)
	}
	saved := slices.Clone(emb.Table.Value().(*tensor.Dense).Float32s())

	again, fresh := build(2)
	if _, err := checkpoint.Load(path, again, optim.State(again.Home().(nn.Weights), fresh)); err != nil {
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

// A tensor stepped directly: the Table keeps SparseAdagrad's sums, which
// start at InitialAccumulatorValue, and counts the steps (LRDecay uses
// the count).
func ExampleNewMemoryTable() {
	weights := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{1, 1, 2, 2, 3, 3}))
	ada := &optim.SparseAdagrad{LearnRate: 0.5, LRDecay: 0.1, InitialAccumulatorValue: 1, Eps: 1e-10}
	tab, err := optim.NewMemoryTable(weights, ada)
	if err != nil {
		log.Fatal(err)
	}
	// The gradient of rows 0 and 2 (RowGradient builds one from a lookup's).
	g := &optim.RowGrad{Rows: []int64{0, 2}, Values: tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{3, 0, -3, 0}))}
	for range 2 {
		if err := tab.Step(context.Background(), ada, g); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("weights %.4f\n", weights.Float64s())
	fmt.Printf("sums %v, steps %d\n", tab.State[0].Float64s(), tab.Steps())
	// Output:
	// weights [0.2128 1.0000 2.0000 2.0000 3.7872 3.0000]
	// sums [19 1 1 1 19 1], steps 2
}

// SparseAdagrad is torch.optim.Adagrad for a sparse embedding: its state
// is one accumulator per value, the column "sum", which a table file or
// a Redis table keeps beside each row.
func ExampleNewSparseAdagrad() {
	ada := optim.NewSparseAdagrad(0.01)
	fmt.Printf("%+v\n", ada.Columns(64))
	fmt.Println(ada.Eps)
	// Output:
	// [{Name:sum Width:64 Init:0}]
	// 1e-10
}
