package optim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/table"
)

// sharedChunk is how many values of a SharedDense's learnables one row
// of its table holds.
const sharedChunk = 256

// A SharedDense holds dense learnables (a model's weights and biases) on
// a Redis Cluster for several workers, parameter-server style: each
// worker reads them at the start of a step (Pull) and sends its gradient
// at the end (Push), which the servers apply by the optimiser's ServerRule, each
// update atomic and applied exactly once. The learnables are kept, one
// after another, in rows of 256 float32 values (the last row padded with
// zeros) of a table, with the optimiser's state beside each row; with
// RowWiseAdagrad, each run of 256 values shares one sum.
//
// Workers drift apart by at most SharedOptions.Staleness steps (stale
// synchronous parallel): Pull at a worker's step t waits until every
// worker has pushed t - Staleness steps, so the learnables it reads hold
// every worker's updates up to then, and its gradient, computed from
// them, lands at most Staleness steps of each other worker late.
type SharedDense struct {
	store  sharedStore
	opt    Sparse
	nodes  []*gorgonia.Node
	so     SharedOptions
	rows   int
	steps  int64
	ids    []int64
	buf    []byte
	grad   *tensor.Dense
	gradID []int
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

// CreateSharedDense writes the learnables nodes (named float32 tensors),
// as they are, to the cluster as the table name, each row with opt's
// state, zeros. A table of that name already there is an error unless
// table.WithReplace is given.
func CreateSharedDense(ctx context.Context, o table.RedisOptions, name string, opt Sparse, nodes []*gorgonia.Node, opts ...table.Option) error {
	prefix := fmt.Sprintf("shared dense %q", name)
	n, err := sharedSize(prefix, nodes)
	if err != nil {
		return err
	}
	rows := (n + sharedChunk - 1) / sharedChunk
	cols := opt.Columns(sharedChunk)
	if err := table.CreateRedis(ctx, o, name, int64(rows), sharedChunk, tensor.Float32, append(opts, table.WithState(cols...))...); err != nil {
		return err
	}
	d, err := OpenSharedDense(ctx, o, name, opt, SharedOptions{Workers: 1}, nodes...)
	if err != nil {
		return err
	}
	defer d.Close()
	width := d.store.RowBytes() / 4
	vals := make([]float32, rows*width)
	at := 0
	for _, nd := range nodes {
		for _, v := range nd.Value().(*tensor.Dense).Float32s() {
			vals[at/sharedChunk*width+at%sharedChunk] = v
			at++
		}
	}
	return d.store.WriteRows(ctx, d.ids, fileio.LittleEndianBytes(vals))
}

// OpenSharedDense returns the learnables nodes as the table name on the
// cluster holds them, stepped by opt, for the worker so places, which it
// records as at step 0: a table of another size or layout is an error
// wrapping checkpoint.ErrMismatch.
func OpenSharedDense(ctx context.Context, o table.RedisOptions, name string, opt Sparse, so SharedOptions, nodes ...*gorgonia.Node) (*SharedDense, error) {
	prefix := fmt.Sprintf("shared dense %q", name)
	if so.Workers < 1 || so.Worker < 0 || so.Worker >= so.Workers || so.Staleness < 0 || so.Wait < 0 || so.Gone < 0 {
		return nil, fmt.Errorf("%s: worker %d of %d, staleness %d, wait %v, gone %v: %w", prefix, so.Worker, so.Workers, so.Staleness, so.Wait, so.Gone, gather.ErrOption)
	}
	if so.Wait == 0 {
		so.Wait = time.Minute
	}
	if so.Gone == 0 {
		so.Gone = 10 * time.Second
	}
	n, err := sharedSize(prefix, nodes)
	if err != nil {
		return nil, err
	}
	s, err := table.OpenRedis(ctx, o, name, sharedChunk, tensor.Float32, opt.Columns(sharedChunk))
	if err != nil {
		return nil, err
	}
	rows := (n + sharedChunk - 1) / sharedChunk
	if s.Rows() != int64(rows) {
		s.Close()
		return nil, fmt.Errorf("%s: the cluster's table has %d rows of %d values; the learnables need %d: %w", prefix, s.Rows(), sharedChunk, rows, checkpoint.ErrMismatch)
	}
	d := &SharedDense{store: s, opt: opt, nodes: nodes, so: so, rows: rows,
		ids: make([]int64, rows), buf: make([]byte, rows*s.RowBytes()), gradID: make([]int, rows),
		grad: tensor.New(tensor.WithShape(rows, sharedChunk), tensor.Of(tensor.Float32))}
	for r := range d.ids {
		d.ids[r], d.gradID[r] = int64(r), r
	}
	if so.Workers > 1 {
		if err := s.SetClock(ctx, so.Worker, 0, so.Gone); err != nil {
			s.Close()
			return nil, err
		}
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
			return 0, fmt.Errorf("%s: %q must be a named node holding a float32 tensor, got %v: %w", prefix, nd.Name(), nd.Value(), gather.ErrDtype)
		}
		n += w.Shape().TotalSize()
	}
	if n == 0 {
		return 0, fmt.Errorf("%s: no learnables: %w", prefix, gather.ErrShape)
	}
	return n, nil
}

// Steps returns how many steps this worker has pushed.
func (d *SharedDense) Steps() int64 { return d.steps }

// Store returns the table that holds the learnables.
func (d *SharedDense) Store() table.Store { return d.store }

// sharedStore is what a SharedDense needs of the store of its table (a
// table.RedisStore): rules applied on the servers, and the workers'
// clocks.
type sharedStore interface {
	table.RuleStore
	Name() string
	SetClock(ctx context.Context, worker int, steps int64, ttl time.Duration) error
	Clocks(ctx context.Context, workers int) ([]int64, error)
	Close() error
}

// Pull waits until no worker is more than Staleness steps behind this
// one, then reads the learnables into the nodes' values. Waiting longer
// than SharedOptions.Wait is an error naming the slowest worker.
func (d *SharedDense) Pull(ctx context.Context) error {
	if d.so.Workers > 1 {
		end := time.Now().Add(d.so.Wait)
		pause := time.Millisecond
		for {
			clocks, err := d.store.Clocks(ctx, d.so.Workers)
			if err != nil {
				return err
			}
			slow, at := -1, int64(math.MaxInt64)
			for w, c := range clocks {
				if c >= 0 && c < at {
					slow, at = w, c
				}
			}
			if slow < 0 || d.steps-at <= int64(d.so.Staleness) {
				break
			}
			if time.Now().After(end) {
				return fmt.Errorf("shared dense %q: worker %d has pushed %d steps, this one (%d) %d: waited %v for it to come within %d: %w",
					d.store.Name(), slow, at, d.so.Worker, d.steps, d.so.Wait, d.so.Staleness, ErrStale)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("shared dense %q: waiting for worker %d: %w", d.store.Name(), slow, ctx.Err())
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
			w[i] = row[at/sharedChunk*width+at%sharedChunk]
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
			return fmt.Errorf("shared dense %q: %q has no gradient (bind it with gorgonia.BindDualValues): %v: %w", d.store.Name(), nd.Name(), err, gather.ErrGraph)
		}
		gt, ok := gv.(*tensor.Dense)
		if !ok || gt.Dtype() != tensor.Float32 || gt.Shape().TotalSize() != nd.Shape().TotalSize() {
			return fmt.Errorf("shared dense %q: the gradient of %q is %v: %w", d.store.Name(), nd.Name(), gv, gather.ErrShape)
		}
		at += copy(g[at:], gt.Float32s())
	}
	rule, err := d.opt.ServerRule(d.steps+1, &RowGrad{Rows: d.gradID, Values: d.grad})
	if err != nil {
		return err
	}
	if err := d.store.ApplyRule(ctx, rule, d.ids, sharedChunk, fileio.LittleEndianBytes(g)); err != nil {
		return err
	}
	for _, nd := range d.nodes {
		gv, _ := nd.Grad()
		gv.(*tensor.Dense).Zero()
	}
	d.steps++
	if d.so.Workers > 1 {
		return d.store.SetClock(ctx, d.so.Worker, d.steps, d.so.Gone)
	}
	return nil
}

// Close closes the connections to the cluster.
func (d *SharedDense) Close() error { return d.store.Close() }

// ErrStale: a worker waited longer than SharedOptions.Wait for the
// slowest to come within the staleness bound.
var ErrStale = errors.New("a worker fell too far behind")
