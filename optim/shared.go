package optim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/operand"
)

// SharedWidth is how many values of a SharedDense's learnables one row
// of its table holds.
const SharedWidth = 256

// A SharedDense holds dense learnables (a model's weights and biases) in
// a table that steps its own rows (a driver.Store that is a driver.Stepper:
// a cluster.Store for several workers, parameter-server style, or a
// MemoryStore): each worker reads them at the start of a step (Pull) and
// sends its gradient at the end (Push), which the store applies by the
// optimiser, each update atomic and applied exactly once. The learnables
// are kept, one after another, in rows of SharedWidth float32 values (the
// last row padded with zeros), with the optimiser's state beside each
// row; with RowWiseAdagrad, each run of 256 values shares one sum. The
// table has SharedRows rows:
//
//	rows, _ := optim.SharedRows(params...)
//	cluster.Create(ctx, o, "dense", rows, optim.SharedWidth, tensor.Float32, table.WithState(adam.Columns(optim.SharedWidth)...))
//	s, _ := cluster.Open(ctx, o, "dense")
//	optim.CreateSharedDense(ctx, s, params...)
//	d, _ := optim.OpenSharedDense(ctx, s, adam, optim.SharedOptions{Worker: w, Workers: n}, params...)
//
// Workers drift apart by at most SharedOptions.Staleness steps (stale
// synchronous parallel): Pull at a worker's step t waits until every
// worker has pushed t - Staleness steps, so the learnables it reads hold
// every worker's updates up to then, and its gradient, computed from
// them, lands at most Staleness steps of each other worker late. Workers
// record their steps in the store's clocks (SetClock and Clocks, which a
// cluster.Store keeps): a store without them serves one worker.
type SharedDense struct {
	store sharedStore
	clock clock // the store's, for several workers
	opt   Sparse
	nodes []*gorgonia.Node
	so    SharedOptions
	rows  int
	ids   []int64
	buf   []byte
	grad  *tensor.Dense
}

// SharedOptions place a worker among the workers of a SharedDense.
type SharedOptions struct {
	// Worker is this worker's number, in [0, Workers).
	Worker, Workers int
	// Staleness is how many steps a worker may run ahead of the slowest;
	// 0 keeps them in step.
	Staleness int
	// Wait bounds how long Pull waits for a slower worker; 0 means 60 s.
	Wait time.Duration
	// Gone is how long a worker that has pushed nothing (it died, or
	// stopped) holds the others back; 0 means 10 s.
	Gone time.Duration
}

// SharedRows returns how many rows of SharedWidth values the table of a
// SharedDense of the learnables nodes (named float32 tensors) has.
func SharedRows(nodes ...*gorgonia.Node) (int64, error) {
	n, err := sharedSize("shared dense", nodes)
	if err != nil {
		return 0, err
	}
	return int64((n + SharedWidth - 1) / SharedWidth), nil
}

// CreateSharedDense writes the learnables nodes (named float32 tensors),
// as they are, into the rows of store, a table of SharedRows rows of
// SharedWidth float32 values; their state is left as it is (the
// columns' Init values of a new table).
func CreateSharedDense(ctx context.Context, store driver.Store, nodes ...*gorgonia.Node) error {
	d, err := sharedTable(store, nodes)
	if err != nil {
		return err
	}
	width := store.RowBytes() / 4
	vals := make([]float32, d.rows*width)
	if err := store.ReadRows(ctx, d.ids, fileio.LittleEndianBytes(vals)); err != nil {
		return err
	}
	at := 0
	for _, nd := range nodes {
		for _, v := range nd.Value().(*tensor.Dense).Float32s() {
			vals[at/SharedWidth*width+at%SharedWidth] = v
			at++
		}
	}
	return store.WriteRows(ctx, d.ids, fileio.LittleEndianBytes(vals))
}

// OpenSharedDense returns the learnables nodes as store holds them,
// stepped by opt, for the worker so places, which it records as at step
// 0. store must step its own rows (driver.Stepper) and, for several
// workers, keep their clocks; a table of another size or layout is an
// error wrapping checkpoint.ErrMismatch.
func OpenSharedDense(ctx context.Context, store driver.Store, opt Sparse, so SharedOptions, nodes ...*gorgonia.Node) (*SharedDense, error) {
	d, err := sharedTable(store, nodes)
	if err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("shared dense %q", store.Schema().Name)
	if opt == nil || so.Workers < 1 || so.Worker < 0 || so.Worker >= so.Workers || so.Staleness < 0 || so.Wait < 0 || so.Gone < 0 {
		return nil, fmt.Errorf("%s: optimiser %v, worker %d of %d, staleness %d, wait %v, gone %v: %w", prefix, opt, so.Worker, so.Workers, so.Staleness, so.Wait, so.Gone, errs.ErrOption)
	}
	if want, have := opt.Columns(SharedWidth), store.Schema().Columns; !driver.SameColumns(want, have) {
		return nil, fmt.Errorf("%s: the optimiser %q keeps %v by row; the table holds %v: %w", prefix, opt.Name(), want, have, checkpoint.ErrMismatch)
	}
	if so.Wait == 0 {
		so.Wait = time.Minute
	}
	if so.Gone == 0 {
		so.Gone = 10 * time.Second
	}
	var ok bool
	if d.store, ok = store.(sharedStore); !ok {
		return nil, fmt.Errorf("%s: its store, %T, does not step its own rows (driver.Stepper): %w", prefix, store, errs.ErrOption)
	}
	d.opt, d.so = opt, so
	if so.Workers > 1 {
		if d.clock, ok = store.(clock); !ok {
			return nil, fmt.Errorf("%s: %d workers: its store, %T, keeps no clocks (SetClock, Clocks): %w", prefix, so.Workers, store, errs.ErrOption)
		}
		if err := d.clock.SetClock(ctx, so.Worker, 0, so.Gone); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// sharedTable checks that store is the table of the learnables nodes and
// returns a SharedDense of them, without store or optimiser.
func sharedTable(store driver.Store, nodes []*gorgonia.Node) (*SharedDense, error) {
	if store == nil {
		return nil, fmt.Errorf("shared dense: needs a store: %w", errs.ErrOption)
	}
	sc := store.Schema()
	prefix := fmt.Sprintf("shared dense %q", sc.Name)
	n, err := sharedSize(prefix, nodes)
	if err != nil {
		return nil, err
	}
	rows := (n + SharedWidth - 1) / SharedWidth
	if sc.Rows != int64(rows) || sc.Dim != SharedWidth || sc.Dtype != tensor.Float32 || sc.Format != driver.Float32 {
		return nil, fmt.Errorf("%s: the table has %d rows of %d %v values; the learnables need %d of %d float32 (SharedRows): %w",
			prefix, sc.Rows, sc.Dim, sc.Format, rows, SharedWidth, checkpoint.ErrMismatch)
	}
	d := &SharedDense{nodes: nodes, rows: rows, ids: make([]int64, rows), buf: make([]byte, rows*store.RowBytes()),
		grad: tensor.New(tensor.WithShape(rows, SharedWidth), tensor.Of(tensor.Float32))}
	for r := range d.ids {
		d.ids[r] = int64(r)
	}
	return d, nil
}

// sharedSize checks that nodes are named float32 tensors and returns how
// many values they hold.
func sharedSize(prefix string, nodes []*gorgonia.Node) (int, error) {
	n := 0
	for _, nd := range nodes {
		w, ok := nd.Value().(*tensor.Dense)
		if !ok || w.Dtype() != tensor.Float32 || !operand.Writable(w) || nd.Name() == "" {
			return 0, fmt.Errorf("%s: %q must be a named node holding a float32 tensor, got %v: %w", prefix, nd.Name(), nd.Value(), errs.ErrDtype)
		}
		n += w.Shape().TotalSize()
	}
	if n == 0 {
		return 0, fmt.Errorf("%s: no learnables: %w", prefix, errs.ErrShape)
	}
	return n, nil
}

// Steps returns how many steps this worker has pushed.
func (d *SharedDense) Steps() int64 { return d.store.Steps() }

// Store returns the table that holds the learnables.
func (d *SharedDense) Store() driver.Store { return d.store }

// sharedStore is what a SharedDense needs of the store of its table: its
// rows, stepped where they live.
type sharedStore interface {
	driver.Store
	driver.Stepper
}

// clock is what several workers of a SharedDense need of its store: each
// worker's step count (a cluster.Store keeps them).
type clock interface {
	SetClock(ctx context.Context, worker int, steps int64, ttl time.Duration) error
	Clocks(ctx context.Context, workers int) ([]int64, error)
}

// Pull waits until no worker is more than Staleness steps behind this
// one, then reads the learnables into the nodes' values. Waiting longer
// than SharedOptions.Wait is an error naming the slowest worker.
func (d *SharedDense) Pull(ctx context.Context) error {
	if d.so.Workers > 1 {
		end := time.Now().Add(d.so.Wait)
		pause := time.Millisecond
		for {
			clocks, err := d.clock.Clocks(ctx, d.so.Workers)
			if err != nil {
				return err
			}
			slow, at := -1, int64(math.MaxInt64)
			for w, c := range clocks {
				if c >= 0 && c < at {
					slow, at = w, c
				}
			}
			if slow < 0 || d.Steps()-at <= int64(d.so.Staleness) {
				break
			}
			if time.Now().After(end) {
				return fmt.Errorf("shared dense %q: worker %d has pushed %d steps, this one (%d) %d: waited %v for it to come within %d: %w",
					d.store.Schema().Name, slow, at, d.so.Worker, d.Steps(), d.so.Wait, d.so.Staleness, ErrStale)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("shared dense %q: waiting for worker %d: %w", d.store.Schema().Name, slow, ctx.Err())
			case <-time.After(pause):
			}
			pause = min(2*pause, 50*time.Millisecond)
		}
	}
	if err := d.store.ReadRows(ctx, d.ids, d.buf); err != nil {
		return err
	}
	width := d.store.RowBytes() / 4
	row := fileio.Float32s(d.buf)
	at := 0
	for _, nd := range d.nodes {
		w := nd.Value().(*tensor.Dense).Float32s()
		for i := range w {
			w[i] = row[at/SharedWidth*width+at%SharedWidth]
			at++
		}
	}
	return nil
}

// Push sends the nodes' gradients (bound with gorgonia.BindDualValues)
// to the servers, which apply the optimiser's step, sets the gradients
// to zero, and records this worker's step count.
func (d *SharedDense) Push(ctx context.Context) error {
	g := d.grad.Float32s()
	clear(g)
	at := 0
	for _, nd := range d.nodes {
		gv, err := nd.Grad()
		if err != nil {
			return fmt.Errorf("shared dense %q: %q has no gradient (bind it with gorgonia.BindDualValues): %v: %w", d.store.Schema().Name, nd.Name(), err, errs.ErrGraph)
		}
		gt, ok := gv.(*tensor.Dense)
		if !ok || gt.Dtype() != tensor.Float32 || gt.Shape().TotalSize() != nd.Shape().TotalSize() {
			return fmt.Errorf("shared dense %q: the gradient of %q is %v: %w", d.store.Schema().Name, nd.Name(), gv, errs.ErrShape)
		}
		at += copy(g[at:], gt.Float32s())
	}
	if err := d.store.Step(ctx, d.opt, &RowGrad{Rows: d.ids, Values: d.grad}); err != nil {
		return err
	}
	for _, nd := range d.nodes {
		gv, _ := nd.Grad()
		gv.(*tensor.Dense).Zero()
	}
	if d.clock != nil {
		return d.clock.SetClock(ctx, d.so.Worker, d.Steps(), d.so.Gone)
	}
	return nil
}

// Close closes the store, if it has a Close method (a cluster.Store's
// connections).
func (d *SharedDense) Close() error {
	if c, ok := d.store.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// ErrStale: a worker waited longer than SharedOptions.Wait for the
// slowest to come within the staleness bound.
var ErrStale = errors.New("a worker fell too far behind")
