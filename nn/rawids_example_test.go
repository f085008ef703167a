package nn_test

import (
	"context"
	"fmt"
	"log"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// Raw item ids (any int64) train a table of 2 rows and its padding row:
// an id gets a row at its second sighting, and reads the padding row's
// zeros until then; a third id takes the row of the id used longest ago,
// which starts afresh.
func ExampleNewRawIDs() {
	m, err := table.NewIDMap("item", driver.IDMapOptions{Rows: 2, AdmitAfter: 2})
	if err != nil {
		log.Fatal(err)
	}
	g := gorgonia.NewGraph()
	emb, err := nn.NewEmbedding(g, "item", m.Rows()+1, 2, tensor.Float32, nn.WithSparse(), nn.WithPadding(m.Rows()))
	if err != nil {
		log.Fatal(err)
	}
	ids := tensor.New(tensor.WithShape(2), tensor.Of(tensor.Int))
	node := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(2), gorgonia.WithName("ids"), gorgonia.WithValue(ids))
	h, err := emb.Lookup(node)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := gorgonia.Grad(gorgonia.Must(gorgonia.Sum(h)), emb.GradNodes()...); err != nil {
		log.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	raw, err := nn.NewRawIDs(emb, m, driver.RowInit{Seed: 1, Std: 1})
	if err != nil {
		log.Fatal(err)
	}
	sgd := &optim.SparseSGD{LearnRate: 0.5}
	for step, batch := range [][]int64{{-9, 1 << 62}, {-9, 1 << 62}, {-9, 555}, {555, 555}} {
		if err := raw.Map(context.Background(), batch, ids, int64(step)); err != nil {
			log.Fatal(err)
		}
		if err := vm.RunAll(); err != nil {
			log.Fatal(err)
		}
		if err := emb.Step(context.Background(), sgd); err != nil {
			log.Fatal(err)
		}
		vm.Reset()
		fmt.Println(batch, "->", ids.Ints(), "new:", raw.Fresh())
	}
	st, _ := m.Stats(context.Background())
	fmt.Printf("%+v\n", st)
	// Output:
	// [-9 4611686018427387904] -> [2 2] new: []
	// [-9 4611686018427387904] -> [0 1] new: [{0 -9} {1 4611686018427387904}]
	// [-9 555] -> [0 2] new: []
	// [555 555] -> [1 1] new: [{1 555}]
	// {Used:2 Admitted:3 Evicted:1 Expired:0 Rejected:0 Pending:3 Dropped:0}
}
