package machine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/vmtest"
	"github.com/gathergrad/gather/machine"
	"github.com/gathergrad/gather/table"
)

// ops are graphs of Gorgonia's ops that a training graph uses, each a
// scalar cost of x [4, 3] and w [3, 5], whose gradients gorgonia.Grad
// makes.
var ops = []struct {
	name string
	cost func(x, w *gorgonia.Node) (*gorgonia.Node, error)
}{
	{"Mul", func(x, w *gorgonia.Node) (*gorgonia.Node, error) { return sumOf(gorgonia.Mul(x, w)) }},
	{"Mul/matrix-vector", func(x, w *gorgonia.Node) (*gorgonia.Node, error) {
		v := must(gorgonia.Slice(w, nil, gorgonia.S(0)))
		return sumOf(gorgonia.Mul(x, v))
	}},
	{"BroadcastAdd", func(x, w *gorgonia.Node) (*gorgonia.Node, error) {
		b := must(gorgonia.Slice(w, gorgonia.S(0))) // [5], broadcast over x·w's rows
		return sumOf(gorgonia.BroadcastAdd(must(gorgonia.Mul(x, w)), b, nil, []byte{0}))
	}},
	{"Add/Sub/HadamardProd/HadamardDiv", func(x, w *gorgonia.Node) (*gorgonia.Node, error) {
		y := must(gorgonia.Mul(x, w))
		z := must(gorgonia.Add(y, y))
		z = must(gorgonia.Sub(z, must(gorgonia.HadamardProd(y, y))))
		z = must(gorgonia.HadamardDiv(z, must(gorgonia.Add(must(gorgonia.Square(y)), gorgonia.NewConstant(float64(1))))))
		return sumOf(z, nil)
	}},
	{"Rectify", func(x, w *gorgonia.Node) (*gorgonia.Node, error) {
		return sumOf(gorgonia.Rectify(must(gorgonia.Mul(x, w))))
	}},
	{"Sigmoid", func(x, w *gorgonia.Node) (*gorgonia.Node, error) {
		return sumOf(gorgonia.Sigmoid(must(gorgonia.Mul(x, w))))
	}},
	{"Tanh", func(x, w *gorgonia.Node) (*gorgonia.Node, error) {
		return sumOf(gorgonia.Tanh(must(gorgonia.Mul(x, w))))
	}},
	{"Exp/Log/Neg", func(x, w *gorgonia.Node) (*gorgonia.Node, error) {
		y := must(gorgonia.Exp(must(gorgonia.Mul(x, w))))
		return sumOf(gorgonia.Neg(must(gorgonia.Log(y))))
	}},
	{"Square", func(x, w *gorgonia.Node) (*gorgonia.Node, error) {
		return sumOf(gorgonia.Square(must(gorgonia.Mul(x, w))))
	}},
	{"Sum/axis", func(x, w *gorgonia.Node) (*gorgonia.Node, error) {
		return sumOf(gorgonia.Sum(must(gorgonia.Square(must(gorgonia.Mul(x, w)))), 1))
	}},
	{"Mean", func(x, w *gorgonia.Node) (*gorgonia.Node, error) {
		return gorgonia.Mean(must(gorgonia.Square(must(gorgonia.Mul(x, w)))))
	}},
	{"Reshape", func(x, w *gorgonia.Node) (*gorgonia.Node, error) {
		y := must(gorgonia.Reshape(must(gorgonia.Mul(x, w)), tensor.Shape{2, 10}))
		return sumOf(gorgonia.Square(y))
	}},
	{"SoftMax", func(x, w *gorgonia.Node) (*gorgonia.Node, error) {
		y := must(gorgonia.SoftMax(must(gorgonia.Mul(x, w))))
		return sumOf(gorgonia.HadamardProd(y, must(gorgonia.Mul(x, w))))
	}},
	{"Concat", func(x, w *gorgonia.Node) (*gorgonia.Node, error) {
		y := must(gorgonia.Mul(x, w))
		return sumOf(gorgonia.Square(must(gorgonia.Concat(1, y, x))))
	}},
	{"Slice", func(x, w *gorgonia.Node) (*gorgonia.Node, error) {
		y := must(gorgonia.Slice(must(gorgonia.Mul(x, w)), gorgonia.S(1, 3), gorgonia.S(0, 4)))
		return sumOf(gorgonia.Square(y))
	}},
}

func must(n *gorgonia.Node, err error) *gorgonia.Node {
	if err != nil {
		panic(err)
	}
	return n
}

func sumOf(n *gorgonia.Node, err error) (*gorgonia.Node, error) {
	if err != nil {
		return nil, err
	}
	return gorgonia.Sum(n)
}

// TestOps runs each graph of ops on a TapeMachine and a Machine (vmtest),
// three runs with new inputs bound before each, which must agree bit for
// bit, and checks that the Machine's gradients change with the inputs.
func TestOps(t *testing.T) {
	for _, c := range ops {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			g := gorgonia.NewGraph()
			x := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(4, 3), gorgonia.WithName("x"))
			w := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(3, 5), gorgonia.WithName("w"))
			cost, err := c.cost(x, w)
			if err != nil {
				t.Fatal(err)
			}
			learn := gorgonia.Nodes{x, w}
			if _, err := gorgonia.Grad(cost, learn...); err != nil {
				t.Fatal(err)
			}
			vm := vmtest.Bound(t, g, learn...)
			defer vm.Close()
			var last float64
			for run := range 3 {
				for _, n := range learn {
					v := make([]float64, n.Shape().TotalSize())
					for i := range v {
						v[i] = r.NormFloat64()
					}
					if err := gorgonia.Let(n, tensor.New(tensor.WithShape(n.Shape()...), tensor.WithBacking(v))); err != nil {
						t.Fatal(err)
					}
				}
				if err := vm.RunAll(); err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
				gw, err := w.Deriv().Value().(*tensor.Dense), error(nil)
				if gw == nil {
					t.Fatalf("run %d: no gradient of w (%v)", run, err)
				}
				if s := gw.Float64s()[0]; s == last {
					t.Errorf("run %d: w's gradient[0] is %v, as in the run before", run, s)
				} else {
					last = s
				}
				vm.Reset()
			}
			if st := vm.Machine().Stats(); st.Fallback != 0 {
				t.Logf("ops run through Do on every run: %d", st.Fallback)
			}
		})
	}
}

// TestUnsupported checks that a statement New cannot run is an error
// naming the node and its op.
func TestUnsupported(t *testing.T) {
	g := gorgonia.NewGraph()
	a := gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("a"), gorgonia.WithValue(1.0))
	b := gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("b"), gorgonia.WithValue(2.0))
	gorgonia.Set(a, b)
	_, err := machine.New(g)
	if !errors.Is(err, errs.ErrGraph) {
		t.Fatalf("New of a graph with gorgonia.Set: %v, want ErrGraph", err)
	}
	for _, want := range []string{`"a :: float64 = b :: float64"`, "letOp"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, err := machine.New(gorgonia.NewGraph()); !errors.Is(err, errs.ErrGraph) {
		t.Errorf("New of an empty graph: %v, want ErrGraph", err)
	}
}

// TestInputs checks the errors of inputs that cannot be read, and that
// nothing after the bad input runs.
func TestInputs(t *testing.T) {
	g := gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(2, 3), gorgonia.WithName("x"))
	y := must(gorgonia.Sum(must(gorgonia.Square(x))))
	m, err := machine.New(g)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.RunAll(); !errors.Is(err, errs.ErrGraph) || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("RunAll with x unbound: %v, want ErrGraph naming x", err)
	}
	xv := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}))
	if err := gorgonia.Let(x, xv); err != nil {
		t.Fatal(err)
	}
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	if got := y.Value().Data(); got != 91.0 {
		t.Errorf("sum of squares = %v, want 91", got)
	}
	// A value reshaped in place after Let: its shape is not the node's.
	if err := xv.Reshape(3, 2); err != nil {
		t.Fatal(err)
	}
	if err := m.RunAll(); !errors.Is(err, errs.ErrShape) || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("RunAll with x of shape (3, 2): %v, want ErrShape naming x", err)
	}
	if got := y.Value().Data(); got != 91.0 {
		t.Errorf("after the failed run, the sum of squares is %v, want the run before's 91", got)
	}
	if err := xv.Reshape(2, 3); err != nil {
		t.Fatal(err)
	}
	xv.Float64s()[0] = 2
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	if got := y.Value().Data(); got != 94.0 {
		t.Errorf("after x[0] = 2, the sum of squares = %v, want 94", got)
	}
}

// TestClosed checks RunAll after Close.
func TestClosed(t *testing.T) {
	g := gorgonia.NewGraph()
	x := gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("x"), gorgonia.WithValue(3.0))
	gorgonia.Must(gorgonia.Square(x))
	m, err := machine.New(g)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.RunAll(); !errors.Is(err, machine.ErrClosed) || !errors.Is(err, table.ErrClosed) {
		t.Fatalf("RunAll after Close: %v, want ErrClosed, which is table.ErrClosed", err)
	}
}

// TestBusy checks that a RunAll while another runs on the same machine
// is ErrBusy, with an op that waits until the test lets it go on.
func TestBusy(t *testing.T) {
	g := gorgonia.NewGraph()
	x := gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("x"), gorgonia.WithValue(3.0))
	op := &waitOp{started: make(chan struct{}), release: make(chan struct{})}
	if _, err := gorgonia.ApplyOp(op, x); err != nil {
		t.Fatal(err)
	}
	m, err := machine.New(g)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- m.RunAll() }()
	<-op.started
	if err := m.RunAll(); !errors.Is(err, machine.ErrBusy) {
		t.Errorf("RunAll during a RunAll: %v, want ErrBusy", err)
	}
	close(op.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentMachines runs two machines on two graphs at once, many
// times (run it with -race), each giving the value it gives alone.
func TestConcurrentMachines(t *testing.T) {
	build := func(seed uint64) (*machine.Machine, *gorgonia.Node, *gorgonia.Node) {
		r := rand.New(rand.NewPCG(seed, 1))
		g := gorgonia.NewGraph()
		xv, wv := make([]float32, 64*32), make([]float32, 32*16)
		for i := range xv {
			xv[i] = float32(r.NormFloat64())
		}
		for i := range wv {
			wv[i] = float32(r.NormFloat64())
		}
		x := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithName("x"), gorgonia.WithValue(tensor.New(tensor.WithShape(64, 32), tensor.WithBacking(xv))))
		w := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithName("w"), gorgonia.WithValue(tensor.New(tensor.WithShape(32, 16), tensor.WithBacking(wv))))
		cost := must(gorgonia.Mean(must(gorgonia.Sigmoid(must(gorgonia.Mul(x, w))))))
		if _, err := gorgonia.Grad(cost, w); err != nil {
			t.Fatal(err)
		}
		m, err := machine.New(g)
		if err != nil {
			t.Fatal(err)
		}
		return m, cost, w
	}
	var wg sync.WaitGroup
	for seed := range uint64(2) {
		m, cost, w := build(seed)
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		want := cost.Value().Data().(float32)
		wantG := w.Deriv().Value().(*tensor.Dense).Float32s()[7]
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer m.Close()
			for range 50 {
				if err := m.RunAll(); err != nil {
					t.Error(err)
					return
				}
				if got, gotG := cost.Value().Data().(float32), w.Deriv().Value().(*tensor.Dense).Float32s()[7]; got != want || gotG != wantG {
					t.Errorf("graph %d: cost %v, gradient %v; alone %v, %v", seed, got, gotG, want, wantG)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestReuse checks that a backward pass's intermediate values share
// buffers, and that the kept values do not: the cost and the gradients
// of the inputs after a run, which the next run overwrites.
func TestReuse(t *testing.T) {
	g := gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(8, 8), gorgonia.WithName("x"), gorgonia.WithInit(gorgonia.GlorotN(1)))
	y := x
	for range 6 {
		y = must(gorgonia.Tanh(must(gorgonia.Mul(y, x))))
	}
	cost := must(gorgonia.Sum(y))
	if _, err := gorgonia.Grad(cost, x); err != nil {
		t.Fatal(err)
	}
	m, err := machine.New(g)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	st := m.Stats()
	if st.Bytes >= st.Unshared {
		t.Errorf("buffers of %d bytes for values of %d bytes: none shared", st.Bytes, st.Unshared)
	}
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	grad, _ := x.Grad()
	before := grad.(*tensor.Dense).Clone().(*tensor.Dense)
	c0 := cost.Value().Data().(float64)
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	grad2, _ := x.Grad()
	if grad2 != grad {
		t.Error("the gradient of x is another value after a second run; it should be overwritten in place")
	}
	if !slices.Equal(before.Float64s(), grad2.(*tensor.Dense).Float64s()) || cost.Value().Data().(float64) != c0 {
		t.Error("a second run on the same inputs gives other values")
	}
	kept := map[*gorgonia.Node]bool{}
	for _, n := range m.Kept() {
		kept[n] = true
	}
	if !kept[cost] || !kept[x.Deriv()] || !kept[y] {
		t.Errorf("Kept() = %v: want the cost, y and the gradient of x among them", m.Kept())
	}
}

// ExampleNew trains y = 2x with one weight: each run computes the loss
// and the gradient into the buffers the machine planned once, and the
// solver reads the gradient through Grad.
func ExampleNew() {
	g := gorgonia.NewGraph()
	x := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(4), gorgonia.WithName("x"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]float64{1, 2, 3, 4}))))
	y := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(4), gorgonia.WithName("y"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]float64{2, 4, 6, 8}))))
	w := gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("w"), gorgonia.WithValue(0.0))
	pred := gorgonia.Must(gorgonia.Mul(x, w))
	loss := gorgonia.Must(gorgonia.Mean(gorgonia.Must(gorgonia.Square(gorgonia.Must(gorgonia.Sub(pred, y))))))
	if _, err := gorgonia.Grad(loss, w); err != nil {
		panic(err)
	}
	m, err := machine.New(g, machine.WithGrads(w))
	if err != nil {
		panic(err)
	}
	defer m.Close()
	solver := gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.01))
	for step := range 40 {
		if err := m.RunAll(); err != nil {
			panic(err)
		}
		if step%10 == 0 {
			fmt.Printf("step %d: loss %.4f, w %.4f\n", step, loss.Value().Data(), w.Value().Data())
		}
		if err := solver.Step(gorgonia.NodesToValueGrads(gorgonia.Nodes{w})); err != nil {
			panic(err)
		}
	}
	fmt.Printf("w %.4f\n", w.Value().Data())
	// Output:
	// step 0: loss 30.0000, w 0.0000
	// step 10: loss 1.1628, w 1.6063
	// step 20: loss 0.0451, w 1.9225
	// step 30: loss 0.0017, w 1.9847
	// w 1.9970
}

// New refuses a WithGrads or Keep node that is nil, of another graph,
// outside a subgraph's roots, or (for WithGrads) without a gradient: an
// ErrGraph error naming it, never a panic.
func TestOptionNodes(t *testing.T) {
	g := gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(2, 2), gorgonia.WithName("x"), gorgonia.WithInit(gorgonia.Ones()))
	w := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(2, 2), gorgonia.WithName("w"), gorgonia.WithInit(gorgonia.Ones()))
	y := must(gorgonia.Mul(x, w))
	cost := must(gorgonia.Sum(y))
	if _, err := gorgonia.Grad(cost, w); err != nil {
		t.Fatal(err)
	}
	other := gorgonia.NewGraph()
	stranger := gorgonia.NewMatrix(other, tensor.Float64, gorgonia.WithShape(2, 2), gorgonia.WithName("stranger"), gorgonia.WithInit(gorgonia.Ones()))
	if _, err := gorgonia.Grad(must(gorgonia.Sum(stranger)), stranger); err != nil {
		t.Fatal(err)
	}
	// The forward subgraph holds x, w, y and cost, not w's gradient.
	forward := g.SubgraphRoots(cost)
	cases := []struct {
		name  string
		g     *gorgonia.ExprGraph
		opt   machine.Option
		names string // what the error must say
	}{
		{"WithGrads(nil)", g, machine.WithGrads(nil), "node 0 of 1 is nil"},
		{"WithGrads(w, nil)", g, machine.WithGrads(w, nil), "node 1 of 2 is nil"},
		{"Keep(nil)", g, machine.Keep(nil), "Keep: node 0 of 1 is nil"},
		{"WithGrads of another graph", g, machine.WithGrads(stranger), `"stranger" is not in the graph`},
		{"Keep of another graph", g, machine.Keep(stranger), `Keep: node "stranger" is not in the graph`},
		{"WithGrads without a gradient", g, machine.WithGrads(x), `"x" has no gradient`},
		{"WithGrads of a gradient outside a subgraph", forward, machine.WithGrads(w), `the gradient of node "w" is not in the graph`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := machine.New(c.g, c.opt)
			if !errors.Is(err, errs.ErrGraph) {
				t.Fatalf("New: %v, want an ErrGraph error", err)
			}
			if !strings.Contains(err.Error(), c.names) {
				t.Errorf("New: %q does not say %q", err, c.names)
			}
		})
	}
	for _, opt := range []machine.Option{machine.WithGrads(w), machine.Keep(y), machine.WithGrads()} {
		m, err := machine.New(g, opt)
		if err != nil {
			t.Fatalf("New with nodes of the graph: %v", err)
		}
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
	}
}
