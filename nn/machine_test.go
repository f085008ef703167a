package nn

import (
	"math/rand/v2"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/ref"
	"github.com/gathergrad/gather/machine"
)

// TestMachineRunAllocs checks that a run of machine.Machine allocates
// nothing once it has run, on the graphs of the step and loss benchmarks.
func TestMachineRunAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the benchmarks' models")
	}
	if raceOn {
		t.Skip("the race detector's sync.Pool drops what is put back, which allocates")
	}
	m := ref.Machines[0]
	if m.Name != "machine" {
		t.Fatalf("ref.Machines[0] is %q", m.Name)
	}
	check := func(t *testing.T, vm gorgonia.VM, step func()) {
		t.Helper()
		defer vm.Close()
		step()
		step()
		run := func() {
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
		}
		if n := testing.AllocsPerRun(5, run); n != 0 {
			t.Errorf("a run allocates %v times", n)
		}
		t.Logf("a whole step allocates %v times", testing.AllocsPerRun(3, step))
		if m, ok := vm.(*machine.Machine); ok {
			st := m.Stats()
			t.Logf("buffers: %d of %d bytes for %d bytes of values (%d nodes, %d run through Do)",
				st.Buffers, st.Bytes, st.Unshared, st.Nodes, st.Fallback)
		}
	}
	for _, sparse := range []bool{false, true} {
		name := "dense"
		if sparse {
			name = "sparse"
		}
		t.Run("TrainStep/"+name, func(t *testing.T) {
			vm, step := trainStep(t, sparse, 10_000, m)
			check(t, vm, step)
		})
	}
	t.Run("SkipGram", func(t *testing.T) {
		vm, step := skipGram(t, m)
		check(t, vm, step)
	})
	t.Run("ClickModel", func(t *testing.T) {
		vm, step := clickModel(t, m, false, false)
		check(t, vm, step)
	})
	r := rand.New(rand.NewPCG(4, 5))
	const rows, classes = 256, 16
	x := make([]float32, rows*classes)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	y := make([]int, rows)
	for i := range y {
		y[i] = r.IntN(classes)
	}
	yf := make([]float32, rows*classes)
	for i := range yf {
		yf[i] = float32(r.Float64())
	}
	w := make([]float32, classes)
	for i := range w {
		w[i] = 0.5 + float32(i)/classes
	}
	ys := tensor.New(tensor.WithShape(rows), tensor.WithBacking(y))
	yfs := tensor.New(tensor.WithShape(rows, classes), tensor.WithBacking(yf))
	for _, c := range []struct {
		name   string
		target *tensor.Dense
		loss   func(x, target *gorgonia.Node) (*gorgonia.Node, error)
	}{
		{"CrossEntropy", ys, func(x, t *gorgonia.Node) (*gorgonia.Node, error) { return CrossEntropy(x, t) }},
		{"CrossEntropy/ignore_index", ys, func(x, t *gorgonia.Node) (*gorgonia.Node, error) {
			return CrossEntropy(x, t, WithIgnoreIndex(3))
		}},
		{"CrossEntropy/class_weights", ys, func(x, t *gorgonia.Node) (*gorgonia.Node, error) {
			return CrossEntropy(x, t, WithClassWeights(tensor.New(tensor.WithBacking(w))))
		}},
		{"LogSoftmax+NLLLoss", ys, logSoftmaxNLL},
		{"BCEWithLogits", yfs, bce},
	} {
		t.Run(c.name, func(t *testing.T) {
			vm := lossVM(t, m, x, rows, classes, c.target, c.loss)
			check(t, vm, func() {
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
