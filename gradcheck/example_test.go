package gradcheck_test

import (
	"errors"
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/gradcheck"
)

func ExampleCheck() {
	// sum(Gather(data, ids, axis 1) * w): the gradient of data, in both
	// of Gorgonia's machines, against finite differences.
	build := func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) {
		rows, err := gather.Gather(in[0], in[1], 1)
		if err != nil {
			return nil, err
		}
		return gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(rows, in[2])))
	}
	inputs := []tensor.Tensor{
		tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6})),
		tensor.New(tensor.WithShape(3), tensor.WithBacking([]int{2, 0, 2})),
		tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{0.5, -1, 2, 3, 0.25, -2})),
	}
	fmt.Println("tape:", gradcheck.Check(build, inputs))
	fmt.Println("lisp:", gradcheck.Check(build, inputs, gradcheck.WithLispMachine()))

	// A wrong gradient is caught: WithGradScale(2) doubles it.
	wrong := func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) {
		rows, err := gather.Gather(in[0], in[1], 1, gather.WithGradScale(2))
		if err != nil {
			return nil, err
		}
		return gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(rows, in[2])))
	}
	err := gradcheck.Check(wrong, inputs)
	fmt.Println(err)
	fmt.Println(errors.Is(err, gradcheck.ErrMismatch))
	// Output:
	// tape: <nil>
	// lisp: <nil>
	// gradcheck: input 0 at [0 2]: analytic gradient 5, numeric 2.5 (|difference| 2.5 > tolerance 5.1e-05): gradient mismatch
	// true
}
