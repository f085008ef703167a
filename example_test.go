package gather_test

import (
	"errors"
	"fmt"
	"log"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/machine"
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

	vm, err := machine.New(g)
	if err != nil {
		log.Fatal(err)
	}
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

func ExampleGatherElements() {
	// Pick one score per row: the score of each row's label.
	g := gorgonia.NewGraph()
	scores := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("scores"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{
			0.1, 0.7, 0.2,
			0.5, 0.3, 0.2,
		}))))
	labels := gorgonia.NewMatrix(g, tensor.Int, gorgonia.WithName("labels"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 1), tensor.WithBacking([]int{1, 0}))))
	picked, err := gather.GatherElements(scores, labels, 1)
	if err != nil {
		log.Fatal(err)
	}
	cost := gorgonia.Must(gorgonia.Sum(picked))
	if _, err := gorgonia.Grad(cost, scores); err != nil {
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
	grad, _ := scores.Grad()
	fmt.Println("picked:", picked.Value().Data())
	fmt.Println("grad:", grad.Data())
	// Output:
	// picked: [0.7 0.5]
	// grad: [0 1 0 1 0 0]
}

func ExampleTake() {
	data := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float32{0, 1, 10, 11, 20, 21}))
	ids := tensor.New(tensor.WithShape(2), tensor.WithBacking([]int{2, 0}))
	out, err := gather.Take(data, ids, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("new:", out.Data())

	// Into a buffer reused from call to call: no allocation.
	buf := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(2, 2))
	if _, err := gather.Take(data, ids, 0, tensor.WithReuse(buf)); err != nil {
		log.Fatal(err)
	}
	fmt.Println("reused:", buf.Data())
	// Added into it.
	if _, err := gather.Take(data, ids, 0, tensor.WithIncr(buf)); err != nil {
		log.Fatal(err)
	}
	fmt.Println("incremented:", buf.Data())
	// A buffer of the wrong shape is an error, not a silent new tensor.
	_, err = gather.Take(data, ids, 0, tensor.WithReuse(tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(4))))
	fmt.Println(err)
	// Output:
	// new: [20 21 0 1]
	// reused: [20 21 0 1]
	// incremented: [40 42 0 2]
	// gather: the output has shape (4), the result (2, 2): shape mismatch
}

func ExampleIndexAdd() {
	grad := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(3, 2))
	ids := tensor.New(tensor.WithShape(3), tensor.WithBacking([]int64{2, 0, 2}))
	up := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}))
	if err := gather.IndexAdd(grad, ids, up, 0); err != nil {
		log.Fatal(err)
	}
	fmt.Println(grad.Data()) // row 2 receives rows 0 and 2 of up
	// Output:
	// [3 4 0 0 6 8]
}

func ExampleScatterAdd() {
	grad := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(2, 3))
	indices := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]int{0, 0, 2, 1}))
	up := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1, 2, 3, 4}))
	if err := gather.ScatterAdd(grad, indices, up, 1); err != nil {
		log.Fatal(err)
	}
	fmt.Println(grad.Data())
	// Output:
	// [3 0 0 0 4 3]
}

func ExampleCause() {
	g := gorgonia.NewGraph()
	table := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(5, 2), gorgonia.WithName("table"),
		gorgonia.WithInit(gorgonia.Zeroes()))
	ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{0, 9}))))
	if _, err := gather.Gather(table, ids, 0); err != nil {
		log.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	err := vm.RunAll()

	// The machine wraps the op's error without Unwrap; Cause finds it.
	var ie *gather.IndexError
	if errors.As(gather.Cause(err), &ie) {
		fmt.Println(ie)
		fmt.Println("position", ie.Pos, "value", ie.Value, "axis size", ie.Size)
	}
	fmt.Println(errors.Is(gather.Cause(err), gather.ErrIndexOutOfRange))
	// Output:
	// gather: indices[1] = 9 is out of range [-5, 4] for axis 0 of size 5
	// position [1] value 9 axis size 5
	// true
}
