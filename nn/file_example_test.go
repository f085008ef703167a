package nn_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/machine"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// A table in a file, trained as a table in memory is, its updates kept by
// the file.
func ExampleOpenEmbedding() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "words.safetensors")
	if err := table.Create(path, "words", 1000, 4, tensor.Float32, table.WithInit(counting)); err != nil {
		log.Fatal(err)
	}

	g := gorgonia.NewGraph()
	emb, err := nn.OpenEmbedding(g, path, "words")
	if err != nil {
		log.Fatal(err)
	}
	ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"), gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{2, 999}))))
	h, err := emb.Lookup(ids)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := gorgonia.Grad(gorgonia.Must(gorgonia.Sum(h)), emb.GradNodes()...); err != nil {
		log.Fatal(err)
	}
	vm, err := machine.New(g)
	if err != nil {
		log.Fatal(err)
	}
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	if err := emb.Step(context.Background(), &optim.SparseSGD{LearnRate: 0.5}); err != nil {
		log.Fatal(err)
	}
	vm.Close()
	if err := emb.Close(context.Background()); err != nil { // syncs the file
		log.Fatal(err)
	}

	again, err := table.Open(path, "words")
	if err != nil {
		log.Fatal(err)
	}
	defer again.Close()
	w, err := again.Weight()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(w.Shape(), w.Float32s()[8:12]) // row 2, less 0.5
	// Output:
	// (1000, 4) [7.5 8.5 9.5 10.5]
}

// Clipping the row gradient of a table before its step.
func ExampleEmbedding_StepWith() {
	g := gorgonia.NewGraph()
	emb, err := nn.NewEmbedding(g, "words", 10, 2, tensor.Float64, nn.WithSparse(), nn.WithInit(gorgonia.Zeroes()))
	if err != nil {
		log.Fatal(err)
	}
	ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"), gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{4, 4}))))
	h, err := emb.Lookup(ids)
	if err != nil {
		log.Fatal(err)
	}
	cost := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.Mul(h, gorgonia.NewConstant(10.0)))))
	if _, err := gorgonia.Grad(cost, emb.GradNodes()...); err != nil {
		log.Fatal(err)
	}
	vm, err := machine.New(g)
	if err != nil {
		log.Fatal(err)
	}
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	rg, err := emb.RowGrad()
	if err != nil {
		log.Fatal(err)
	}
	norm, err := optim.ClipGradNorm(1, nil, rg)
	if err != nil {
		log.Fatal(err)
	}
	if err := emb.StepWith(context.Background(), &optim.SparseSGD{LearnRate: 1}, rg); err != nil {
		log.Fatal(err)
	}
	w, _ := emb.Home().(nn.Weights).Weight()
	fmt.Printf("norm %.1f; row 4 now %.3f\n", norm, w.Float64s()[8:10])
	// Output:
	// norm 28.3; row 4 now [-0.707 -0.707]
}

// A table in a file with its optimiser's state beside each row, trained
// behind a cache of 8 rows: the next batch prefetched, the changes synced
// to the file through its journal.
func ExampleCachedEmbedding() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "words.safetensors")
	opt := optim.NewRowWiseAdagrad(0.5)
	cols := opt.Columns(4) // one accumulator per row
	if err := table.Create(path, "words", 1000, 4, tensor.Float32, table.WithInit(counting), table.WithState(cols...)); err != nil {
		log.Fatal(err)
	}
	c, err := table.OpenCached(context.Background(), path, table.CacheOptions{Budget: 8 * (5*4 + 72)}, table.FileOptions{})
	if err != nil {
		log.Fatal(err)
	}
	g := gorgonia.NewGraph()
	emb, err := nn.CachedEmbedding(context.Background(), g, c)
	if err != nil {
		log.Fatal(err)
	}
	idv := tensor.New(tensor.WithBacking([]int{2, 999}))
	ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"), gorgonia.WithValue(idv))
	h, err := emb.Lookup(ids)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := gorgonia.Grad(gorgonia.Must(gorgonia.Sum(h)), emb.GradNodes()...); err != nil {
		log.Fatal(err)
	}
	vm, err := machine.New(g)
	if err != nil {
		log.Fatal(err)
	}
	defer vm.Close()
	batches := [][]int{{2, 999}, {3, 4}, {2, 5}}
	for i, b := range batches {
		copy(idv.Ints(), b)
		if i+1 < len(batches) {
			emb.Home().(nn.Cache).Prefetch([]int64{int64(batches[i+1][0]), int64(batches[i+1][1])})
		}
		if err := vm.RunAll(); err != nil {
			log.Fatal(err)
		}
		if err := emb.Step(context.Background(), opt); err != nil {
			log.Fatal(err)
		}
		vm.Reset()
	}
	st := c.Stats()
	fmt.Printf("cache of %d rows: %d hits, %d misses, %d of them prefetched\n", c.Weight().Shape()[0], st.Hits, st.Misses, st.Prefetched)
	if err := emb.Close(context.Background()); err != nil {
		log.Fatal(err)
	}

	c, err = table.OpenCached(context.Background(), path, table.CacheOptions{Budget: 1 << 20}, table.FileOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())
	rows, err := c.Read(context.Background(), []int64{2, 3, 6})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%.3f\n", rows.Float32s()) // each row: 4 values, then its accumulator
	// Output:
	// cache of 8 rows: 1 hits, 5 misses, 3 of them prefetched
	// [7.146 8.146 9.146 10.146 2.000 11.500 12.500 13.500 14.500 1.000 24.000 25.000 26.000 27.000 0.000]
}
