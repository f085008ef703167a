package optim_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/machine"
	"github.com/gathergrad/gather/optim"
)

// fitLine builds a graph fitting y = w·x to the points (1, 2), (2, 4),
// (3, 6), and returns its learnable w and a function running one step.
func fitLine(opt optim.Dense) (*gorgonia.Node, func()) {
	g := gorgonia.NewGraph()
	col := func(name string, v ...float64) *gorgonia.Node {
		return gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName(name), gorgonia.WithValue(tensor.New(tensor.WithShape(len(v), 1), tensor.WithBacking(v))))
	}
	x, y, w := col("x", 1, 2, 3), col("y", 2, 4, 6), col("w", 0)
	loss := gorgonia.Must(gorgonia.Mean(gorgonia.Must(gorgonia.Square(gorgonia.Must(gorgonia.Sub(gorgonia.Must(gorgonia.Mul(x, w)), y))))))
	if _, err := gorgonia.Grad(loss, w); err != nil {
		log.Fatal(err)
	}
	vm, err := machine.New(g, machine.WithGrads(w))
	if err != nil {
		log.Fatal(err)
	}
	return w, func() {
		if err := vm.RunAll(); err != nil {
			log.Fatal(err)
		}
		if err := opt.Step(gorgonia.NodesToValueGrads(gorgonia.Nodes{w})); err != nil {
			log.Fatal(err)
		}
		vm.Reset()
	}
}

// Adam in place of Gorgonia's solvers, fitting y = 2x.
func ExampleNewAdam() {
	adam := optim.NewAdam(0.1)
	w, step := fitLine(adam)
	for range 200 {
		step()
	}
	fmt.Printf("w = %.3f\n", w.Value().Data().([]float64)[0])
	// Output:
	// w = 2.000
}

// A dense optimiser's state saved with the learnables, and restored into
// a fresh optimiser that then steps on as the first would have.
func ExampleDenseState() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "fit.safetensors")

	adam := optim.NewAdam(0.1)
	w, step := fitLine(adam)
	for range 10 {
		step()
	}
	if err := checkpoint.Save(path, nil, checkpoint.Nodes(w), optim.DenseState("fit", adam, w)); err != nil {
		log.Fatal(err)
	}
	for range 10 {
		step()
	}

	fresh := optim.NewAdam(0.1)
	w2, step2 := fitLine(fresh)
	if _, err := checkpoint.Load(path, checkpoint.Nodes(w2), optim.DenseState("fit", fresh, w2)); err != nil {
		log.Fatal(err)
	}
	for range 10 {
		step2()
	}
	fmt.Println("same as without the break:", w.Value().Data().([]float64)[0] == w2.Value().Data().([]float64)[0])
	// Output:
	// same as without the break: true
}

// A warm-up of 5 epochs, then a cosine decay over 10.
func ExampleThen() {
	warm, err := optim.WarmupLR(5, 0.2)
	if err != nil {
		log.Fatal(err)
	}
	cos, err := optim.CosineLR(10, 0)
	if err != nil {
		log.Fatal(err)
	}
	sched, err := optim.Then(warm, 5, cos)
	if err != nil {
		log.Fatal(err)
	}
	sgd := &optim.SGD{Momentum: 0.9}
	for epoch := range 15 {
		sgd.LearnRate = sched(0.1, epoch)
		fmt.Printf("%.3f ", sgd.LearnRate)
	}
	fmt.Println()
	// Output:
	// 0.020 0.036 0.052 0.068 0.084 0.100 0.098 0.090 0.079 0.065 0.050 0.035 0.021 0.010 0.002
}

// Clipping a dense gradient, (2, 2), and a table's row gradient, (1, 4),
// to a global norm of 1: theirs is 5.
func ExampleClipGradNorm() {
	g := gorgonia.NewGraph()
	w := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithName("w"), gorgonia.WithShape(2), gorgonia.WithInit(gorgonia.Zeroes()))
	cost := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.Mul(w, gorgonia.NewConstant(2.0)))))
	if _, err := gorgonia.Grad(cost, w); err != nil {
		log.Fatal(err)
	}
	vm, err := machine.New(g, machine.WithGrads(w))
	if err != nil {
		log.Fatal(err)
	}
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	rows := &optim.RowGrad{Rows: []int64{7}, Values: tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float64{1, 4}))}
	norm, err := optim.ClipGradNorm(1, gorgonia.NodesToValueGrads(gorgonia.Nodes{w}), rows)
	if err != nil {
		log.Fatal(err)
	}
	dw, _ := w.Grad()
	fmt.Printf("norm %.0f; now %.3f and %.3f\n", norm, dw.Data(), rows.Values.Data())
	// Output:
	// norm 5; now [0.400 0.400] and [0.200 0.800]
}
