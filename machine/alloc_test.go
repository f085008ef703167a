package machine_test

import (
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/machine"
)

// The allocations of a run, as the package doc states them: none for a
// graph of the binary elementwise ops, Sum and Rectify; 3 for
// each of Gorgonia's unary elementwise functions on a tensor (its
// UnsafeDo's), which the doc and the README name.
func TestRunAllocs(t *testing.T) {
	if raceOn {
		t.Skip("the race detector allocates")
	}
	type unary func(*gorgonia.Node) (*gorgonia.Node, error)
	for _, c := range []struct {
		name   string
		f      unary
		allocs float64
	}{
		{"none", nil, 0},
		{"Rectify", gorgonia.Rectify, 0},
		{"Exp", gorgonia.Exp, 3},
		{"Log", gorgonia.Log, 3},
		{"Neg", gorgonia.Neg, 3},
		{"Sigmoid", gorgonia.Sigmoid, 3},
		{"Tanh", gorgonia.Tanh, 3},
		{"Square", gorgonia.Square, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := gorgonia.NewGraph()
			x := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(4, 3), gorgonia.WithName("x"), gorgonia.WithInit(gorgonia.Ones()))
			w := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(4, 3), gorgonia.WithName("w"), gorgonia.WithInit(gorgonia.Ones()))
			y := gorgonia.Must(gorgonia.Add(gorgonia.Must(gorgonia.HadamardProd(x, w)), x))
			if c.f != nil {
				y = gorgonia.Must(c.f(y))
			}
			gorgonia.Must(gorgonia.Sum(y))
			m, err := machine.New(g)
			if err != nil {
				t.Fatal(err)
			}
			run := func() {
				if err := m.RunAll(); err != nil {
					t.Fatal(err)
				}
			}
			run()
			if got := testing.AllocsPerRun(10, run); got != c.allocs {
				t.Errorf("a run allocates %v times, the doc says %v", got, c.allocs)
			}
		})
	}
}
