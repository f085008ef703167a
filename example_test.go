package gather_test

import (
	"fmt"
	"log"

	"github.com/gathergrad/gather"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func ExampleGather() {
	g := gorgonia.NewGraph()
	table := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("table"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(4, 2), tensor.WithBacking([]float64{
			0, 1, // row 0
			10, 11, // row 1
			20, 21, // row 2
			30, 31, // row 3
		}))))
	ids := gorgonia.NewVector(g, tensor.Int64, gorgonia.WithName("ids"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]int64{3, 0, -1}))))

	rows, err := gather.Gather(table, ids, 0) // rows 3, 0 and the last
	if err != nil {
		log.Fatal(err)
	}
	cost := gorgonia.Must(gorgonia.Sum(rows))
	if _, err := gorgonia.Grad(cost, table); err != nil {
		log.Fatal(err)
	}

	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	grad, _ := table.Grad()
	fmt.Println("rows:", rows.Value().Data())
	fmt.Println("grad:", grad.Data()) // row 3 was picked twice
	// Output:
	// rows: [30 31 0 1 30 31]
	// grad: [1 1 0 0 0 0 2 2]
}

func ExampleTakeAlongAxis() {
	data := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, 4}))
	indices := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]int64{0, 0, 1, 0}))
	out, err := gather.TakeAlongAxis(data, indices, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Data())
	// Output:
	// [1 1 4 3]
}
