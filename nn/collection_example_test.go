package nn_test

import (
	"context"
	"fmt"
	"log"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/machine"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/optim"
)

// Two features, a user and the ads they saw, pooled from their tables by
// one node and stepped by one call.
func ExampleNewCollection() {
	g := gorgonia.NewGraph()
	users, _ := nn.NewEmbedding(g, "users", 4, 2, tensor.Float32, nn.WithSparse(), nn.WithInit(counting))
	ads, _ := nn.NewEmbedding(g, "ads", 3, 2, tensor.Float32, nn.WithSparse(), nn.WithInit(counting))
	c, err := nn.NewCollection([]nn.Feature{
		{Key: "user", Table: users, Mode: nn.BagSum},
		{Key: "ads", Table: ads, Mode: nn.BagMean},
	}, nn.CollectionOptions{})
	if err != nil {
		log.Fatal(err)
	}
	// A batch of 2 samples: user [1] [3], ads [0 2] [1], in a values
	// vector with room for 6 ids.
	values := tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(6))
	offsets := tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(2*2+1))
	pooled, err := c.Bag(gorgonia.NodeFromAny(g, values, gorgonia.WithName("values")),
		gorgonia.NodeFromAny(g, offsets, gorgonia.WithName("offsets")), nil)
	if err != nil {
		log.Fatal(err)
	}
	batch := nn.KeyedJagged{Keys: []string{"ads", "user"}, Lengths: []int64{2, 1, 1, 1}, Values: []int64{0, 2, 1, 1, 3}}
	if err := c.Pack(batch, values, offsets, nil); err != nil {
		log.Fatal(err)
	}
	loss := gorgonia.Must(gorgonia.Sum(pooled))
	if _, err := gorgonia.Grad(loss, c.GradNodes()...); err != nil {
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
	fmt.Println("columns:", c.Keys(), c.Width())
	fmt.Println("pooled:", pooled.Value().Data())
	if err := c.Step(context.Background(), &optim.SparseSGD{LearnRate: 0.5}); err != nil {
		log.Fatal(err)
	}
	w, _ := ads.Home().(nn.Weights).Weight()
	fmt.Println("ads after a step:", w.Data())
	// Output:
	// columns: [user ads] 4
	// pooled: [2 3 2 3 6 7 2 3]
	// ads after a step: [-0.25 0.75 1.5 2.5 3.75 4.75]
}

// DLRM's interaction of a bottom MLP's output with two pooled features.
func ExampleDotInteraction() {
	g := gorgonia.NewGraph()
	x := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float32{1, 2})), gorgonia.WithName("x"))
	s := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(1, 4), tensor.WithBacking([]float32{3, 4, 5, 6})), gorgonia.WithName("s"))
	out, err := nn.DotInteraction(x, s) // x, then x·s₀, x·s₁, s₀·s₁
	if err != nil {
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
	fmt.Println(out.Shape(), out.Value().Data())
	// Output:
	// (1, 5) [1 2 11 17 39]
}

// The rows a step changed, as a delta for the servers of the table.
func ExampleEmbedding_Delta() {
	g := gorgonia.NewGraph()
	emb, _ := nn.NewEmbedding(g, "items", 5, 2, tensor.Float32, nn.WithSparse(), nn.WithInit(counting))
	emb.TrackChanges()
	ids := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(3), tensor.WithBacking([]int64{4, 1, 4})), gorgonia.WithName("ids"))
	rows, err := emb.Lookup(ids)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := gorgonia.Grad(gorgonia.Must(gorgonia.Sum(rows)), emb.GradNodes()...); err != nil {
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
	if err := emb.Step(context.Background(), &optim.SparseSGD{LearnRate: 0.5}); err != nil {
		log.Fatal(err)
	}
	d, err := emb.Delta(context.Background(), 1, 1) // delta 1 after version 1: checkpoint.WriteDelta it
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Table, d.Rows, d.Values)
	// Output:
	// items [1 4] [1.5 2.5 7 8]
}
