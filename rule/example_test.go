package rule_test

import (
	"context"
	"fmt"
	"log"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/rule"
	"github.com/gathergrad/gather/table"
)

// The same rule steps rows wherever they live: a table in memory, and a
// store that steps its own rows under its lock (as a Redis Cluster steps
// them on its servers), to the same values.
func ExampleStepper() {
	adagrad := optim.NewRowWiseAdagrad(0.5)
	w := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float32{1, 1, 2, 2, 3, 3}))
	mem, err := optim.NewMemoryTable(w.Clone().(*tensor.Dense), adagrad)
	if err != nil {
		log.Fatal(err)
	}
	store, err := table.NewMemoryStore("t", w, adagrad.Columns(2)...)
	if err != nil {
		log.Fatal(err)
	}
	g := &rule.RowGrad{Rows: []int64{0, 2}, Values: tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, -1, 2, 0}))}
	for _, s := range []rule.Stepper{mem, store} {
		if err := s.Step(context.Background(), adagrad, g); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%T: %d step\n", s, s.Steps())
	}
	fmt.Println(mem.Weight.Float32s())
	c, err := table.NewCached(context.Background(), store, table.CacheOptions{Budget: 1 << 10})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	rows, err := c.Read(context.Background(), []int64{0, 1, 2})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rows.Float32s()) // each row's 2 values, then its sum
	// Output:
	// *optim.MemoryTable: 1 step
	// *table.MemoryStore: 1 step
	// [0.5 1.5 2 2 2.2928932 3]
	// [0.5 1.5 1 2 2 0 2.2928932 3 2]
}

// A rule's Columns are the state each row carries beside its values;
// rule.SameColumns compares two by name and width.
func ExampleSameColumns() {
	adam := optim.NewSparseAdam(0.01)
	fmt.Println(adam.Name(), adam.Columns(4))
	fmt.Println(rule.SameColumns(adam.Columns(4), optim.NewRowWiseAdagrad(0.1).Columns(4)))
	// Output:
	// sparse_adam [{exp_avg 4 0} {exp_avg_sq 4 0}]
	// false
}
