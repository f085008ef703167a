package optim_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/gathergrad/gather/cluster"
	"github.com/gathergrad/gather/internal/vmtest"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/localredis"
	"github.com/gathergrad/gather/optim"
	_ "github.com/gathergrad/gather/optim/clusterlua"
	"github.com/gathergrad/gather/table"
)

// sharedModel is a loss of two learnables, sum(w²)/2 + sum(b·x): its
// gradients are w and x.
type sharedModel struct {
	w, b *gorgonia.Node
	vm   gorgonia.VM
}

func newSharedModel(t *testing.T, seed float32) *sharedModel {
	g := gorgonia.NewGraph()
	wv := make([]float32, 3*100)
	for i := range wv {
		wv[i] = seed + float32(i)/100
	}
	m := &sharedModel{
		w: gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(3, 100), gorgonia.WithName("w"), gorgonia.WithValue(tensor.New(tensor.WithShape(3, 100), tensor.WithBacking(wv)))),
		b: gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(5), gorgonia.WithName("b"), gorgonia.WithValue(tensor.New(tensor.WithShape(5), tensor.WithBacking([]float32{1, 2, 3, 4, 5})))),
	}
	x := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(5), gorgonia.WithName("x"), gorgonia.WithValue(tensor.New(tensor.WithShape(5), tensor.WithBacking([]float32{0.5, -1, 2, 0, 1}))))
	half := gorgonia.NewScalar(g, tensor.Float32, gorgonia.WithValue(float32(0.5)))
	loss := gorgonia.Must(gorgonia.Add(
		gorgonia.Must(gorgonia.Mul(half, gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.Square(m.w)))))),
		gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(m.b, x))))))
	if _, err := gorgonia.Grad(loss, m.w, m.b); err != nil {
		t.Fatal(err)
	}
	m.vm = vmtest.Bound(t, g, m.w, m.b)
	t.Cleanup(func() { m.vm.Close() })
	return m
}

func (m *sharedModel) run(t *testing.T) {
	t.Helper()
	if err := m.vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	m.vm.Reset()
}

// Dense learnables on a real cluster: one worker's Pull, run, Push steps
// them as SparseSGD steps them in memory; a worker more than Staleness
// steps ahead of another waits for it, and past Wait gets ErrStale
// naming it; a worker gone (its record expired) holds no one back.
func TestSharedDense(t *testing.T) {
	cl := localredis.Start(t, 3, 0)
	o := cluster.Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 5 * time.Second}
	opt := &optim.SparseSGD{LearnRate: 0.1}
	m := newSharedModel(t, 1)
	nodes := []*gorgonia.Node{m.w, m.b}
	if err := createShared(o, "mlp", opt, nodes); err != nil {
		t.Fatal(err)
	}
	d, err := openShared(o, "mlp", opt, optim.SharedOptions{Workers: 1}, nodes...)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Pull(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The reference: the same model stepped in memory by dense SGD.
	sgd := &optim.SGD{LearnRate: 0.1}
	ref := newSharedModel(t, 1)
	for step := range 5 {
		m.run(t)
		if err := d.Push(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := d.Pull(context.Background()); err != nil {
			t.Fatal(err)
		}
		ref.run(t)
		if err := sgd.Step(gorgonia.NodesToValueGrads(gorgonia.Nodes{ref.w, ref.b})); err != nil {
			t.Fatal(err)
		}
		for k, n := range []*gorgonia.Node{m.w, m.b} {
			got, want := n.Value().(*tensor.Dense).Float32s(), []*gorgonia.Node{ref.w, ref.b}[k].Value().(*tensor.Dense).Float32s()
			for i := range got {
				if math.Abs(float64(got[i]-want[i])) > 1e-6*math.Abs(float64(want[i])) {
					t.Fatalf("step %d: %s[%d] = %v on the cluster, %v in memory", step, n.Name(), i, got[i], want[i])
				}
			}
		}
	}

	// Two workers, staleness 1: worker 0 two steps ahead waits.
	so := optim.SharedOptions{Worker: 0, Workers: 2, Staleness: 1, Wait: 300 * time.Millisecond, Gone: time.Second}
	if _, err := openShared(o, "mlp", opt, so, newSharedModel(t, 0).b); !errors.Is(err, checkpoint.ErrMismatch) {
		t.Fatalf("learnables of another size: %v", err)
	}
	m0, m1 := newSharedModel(t, 0), newSharedModel(t, 0)
	w0, err := openShared(o, "mlp", opt, so, m0.w, m0.b)
	if err != nil {
		t.Fatal(err)
	}
	defer w0.Close()
	so.Worker = 1
	w1, err := openShared(o, "mlp", opt, so, m1.w, m1.b)
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close()
	for range 2 {
		if err := w0.Pull(context.Background()); err != nil {
			t.Fatal(err)
		}
		m0.run(t)
		if err := w0.Push(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := w0.Pull(context.Background()); !errors.Is(err, optim.ErrStale) || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("two steps ahead of worker 1 with staleness 1: %v after %v", err, time.Since(start))
	}
	m1.run(t)
	if err := w1.Push(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w0.Pull(context.Background()); err != nil {
		t.Fatalf("worker 1 one step behind: %v", err)
	}
	// A worker that never pushes: its record expires after Gone, and
	// the worker waiting for it goes on.
	if err := createShared(o, "mlp2", opt, nodes); err != nil {
		t.Fatal(err)
	}
	so = optim.SharedOptions{Worker: 1, Workers: 2, Staleness: 1, Wait: 5 * time.Second, Gone: 500 * time.Millisecond}
	idle, err := openShared(o, "mlp2", opt, so, m1.w, m1.b)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	start = time.Now()
	so.Worker = 0
	w0, err = openShared(o, "mlp2", opt, so, m0.w, m0.b)
	if err != nil {
		t.Fatal(err)
	}
	defer w0.Close()
	for range 2 {
		m0.run(t)
		if err := w0.Push(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := w0.Pull(context.Background()); err != nil || time.Since(start) < 400*time.Millisecond {
		t.Fatalf("worker 1 gone: %v after %v", err, time.Since(start))
	}
}

// createShared writes the table name of the learnables nodes, stepped by
// opt, to the cluster o.
func createShared(o cluster.Options, name string, opt optim.Sparse, nodes []*gorgonia.Node) error {
	ctx := context.Background()
	rows, err := optim.SharedRows(nodes...)
	if err != nil {
		return err
	}
	if err := cluster.Create(ctx, o, name, rows, optim.SharedWidth, tensor.Float32, table.WithState(opt.Columns(optim.SharedWidth)...)); err != nil {
		return err
	}
	s, err := cluster.Open(ctx, o, name)
	if err != nil {
		return err
	}
	defer s.Close()
	return optim.CreateSharedDense(ctx, s, nodes...)
}

// openShared opens the learnables nodes of the table name on the cluster
// o, as worker so.
func openShared(o cluster.Options, name string, opt optim.Sparse, so optim.SharedOptions, nodes ...*gorgonia.Node) (*optim.SharedDense, error) {
	s, err := cluster.Open(context.Background(), o, name)
	if err != nil {
		return nil, err
	}
	d, err := optim.OpenSharedDense(context.Background(), s, opt, so, nodes...)
	if err != nil {
		s.Close()
	}
	return d, err
}
