package nn_test

import (
	"fmt"
	"log"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/nn"
)

// A global average pooling, x.mean((2, 3)) in PyTorch: the mean over the
// two middle axes of a [2, 3, 4, 5] value, and the sum over them.
func ExampleMean() {
	g := gorgonia.NewGraph()
	v := make([]float64, 120)
	for i := range v {
		v[i] = float64(i)
	}
	x := gorgonia.NewTensor(g, tensor.Float64, 4, gorgonia.WithShape(2, 3, 4, 5), gorgonia.WithName("x"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 3, 4, 5), tensor.WithBacking(v))))
	sum, err := nn.Sum(x, false, 1, 2) // axes 1 and 2 of [2, 3, 4, 5]: [2, 5]
	if err != nil {
		log.Fatal(err)
	}
	mean, err := nn.Mean(x, false, -2, -1) // the last two axes: [2, 3]
	if err != nil {
		log.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(sum.Shape(), sum.Value().Data())
	fmt.Println(mean.Shape(), mean.Value().Data())
	// Output:
	// (2, 5) [330 342 354 366 378 1050 1062 1074 1086 1098]
	// (2, 3) [9.5 29.5 49.5 69.5 89.5 109.5]
}

// Matrix factorisation's prediction and loss: the dot product of each
// user's and item's factors, and its squared error against the ratings.
func ExampleMSELoss() {
	g := gorgonia.NewGraph()
	u := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(2, 2), gorgonia.WithName("u"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 0.5, 1}))))
	v := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(2, 2), gorgonia.WithName("v"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 1, 2, 2}))))
	ratings := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(2), gorgonia.WithName("r"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]float32{4, 3}))))
	pred, err := nn.RowDot(u, v) // [1·1+2·1, 0.5·2+1·2] = [3, 3]
	if err != nil {
		log.Fatal(err)
	}
	loss, err := nn.MSELoss(pred, ratings) // ((3-4)² + (3-3)²) / 2
	if err != nil {
		log.Fatal(err)
	}
	if _, err := nn.Grad(loss, u, v); err != nil {
		log.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	gu, _ := u.Grad()
	fmt.Println("predictions", pred.Value().Data(), "loss", loss.Value())
	fmt.Println("gradient of u", gu.Data())
	// Output:
	// predictions [3 3] loss 0.5
	// gradient of u [-1 -1 0 0]
}
