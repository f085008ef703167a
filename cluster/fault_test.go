package cluster_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/cluster"
	"github.com/gathergrad/gather/internal/localredis"
	"github.com/gathergrad/gather/optim"
	_ "github.com/gathergrad/gather/optim/clusterlua"
	"github.com/gathergrad/gather/table"
)

// The fault tests run on the layout the README gives, three masters with
// a replica each, and two workers that step every row of a table on the
// servers (SGD, learning rate 1, gradient -1: each step adds 1 to every
// value), with Replicas 1 and a Retry of a minute.
const (
	fVocab, fDim = 3000, 8
	fWorkers     = 2
)

// A span is when one step ran.
type span struct{ start, end time.Time }

// A crew is fWorkers workers stepping the table name, each with a store
// of its own, until stop.
type crew struct {
	stores []*cluster.Store
	done   chan struct{}
	wg     sync.WaitGroup
	acked  []int
	errs   []error
	mu     sync.Mutex
	spans  []span       // of the acknowledged steps
	busy   atomic.Int32 // steps in flight
}

// waitBusy returns once a step is in flight, so that a fault made next
// meets one even on a machine too loaded to start steps on time.
func (c *crew) waitBusy() {
	for c.busy.Load() == 0 {
		time.Sleep(100 * time.Microsecond)
	}
}

// workers starts a crew on the table name with stores of o.
func workers(t *testing.T, o cluster.Options, name string) *crew {
	t.Helper()
	c := &crew{done: make(chan struct{}), acked: make([]int, fWorkers), errs: make([]error, fWorkers)}
	for w := range fWorkers {
		s, err := cluster.Open(context.Background(), o, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		c.stores = append(c.stores, s)
		c.wg.Go(func() {
			ids, grad := allIDs(fVocab), filled(fVocab*fDim, -1)
			for {
				select {
				case <-c.done:
					return
				default:
				}
				start := time.Now()
				c.busy.Add(1)
				c.errs[w] = serverStep(s, &optim.SparseSGD{LearnRate: 1, WeightDecay: 0}, ids, grad)
				c.busy.Add(-1)
				if c.errs[w] != nil {
					return
				}
				c.acked[w]++
				c.mu.Lock()
				c.spans = append(c.spans, span{start, time.Now()})
				c.mu.Unlock()
			}
		})
	}
	return c
}

// heldUp returns how many acknowledged steps a fault at the moment at
// held up: steps begun before it or within half a second after, that
// ended at least d after it.
func (c *crew) heldUp(at time.Time, d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.spans {
		if s.start.Before(at.Add(500*time.Millisecond)) && s.end.After(at.Add(d)) {
			n++
		}
	}
	return n
}

// stop stops the crew and returns each worker's acknowledged steps and
// the error each stopped on, if any.
func (c *crew) stop() ([]int, []error) {
	close(c.done)
	c.wg.Wait()
	return c.acked, c.errs
}

// faultCluster starts the README's layout with a zero table name on it
// and returns the cluster and the options of the workers' stores.
func faultCluster(t *testing.T, name string) (*localredis.Cluster, cluster.Options) {
	t.Helper()
	if testing.Short() {
		t.Skip("waits for failovers")
	}
	// Each waits for failovers most of its time, on a cluster of its own.
	t.Parallel()
	cl, o := zeroTable(t, name, 1, fVocab, fDim)
	o.Retry, o.Replicas = time.Minute, 1
	// A replica whose first sync is not done cannot take over.
	if err := cl.Settled(time.Minute); err != nil {
		t.Fatal(err)
	}
	return cl, o
}

// masterWithReplica returns a master of the cluster that has a live
// replica, and that replica, drawn with r.
func masterWithReplica(t *testing.T, cl *localredis.Cluster, r *rand.Rand) (master, replica string) {
	t.Helper()
	i := slices.IndexFunc(cl.Addrs, cl.Running) // a node to ask
	if i < 0 {
		t.Fatal("no node of the cluster is running")
	}
	nodes, err := cl.Nodes(cl.Addrs[i])
	if err != nil {
		t.Fatal(err)
	}
	var pairs [][2]string
	for _, n := range nodes {
		if n.Role == "slave" && !n.Failing && cl.Running(n.Addr) && cl.Running(n.Master) {
			pairs = append(pairs, [2]string{n.Master, n.Addr})
		}
	}
	if len(pairs) == 0 {
		t.Fatalf("no master with a live replica: %+v", nodes)
	}
	p := pairs[r.IntN(len(pairs))]
	return p[0], p[1]
}

// checkSteps stops the workers and checks that none failed and that every
// row took exactly the steps the stores acknowledged.
func checkSteps(t *testing.T, o cluster.Options, name string, c *crew) int {
	t.Helper()
	acked, errs := c.stop()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("worker %d stopped after %d steps: %v", w, acked[w], err)
		}
	}
	total := acked[0] + acked[1]
	for r, n := range countRows(t, o, name, fVocab, fDim) {
		if n != total {
			t.Fatalf("row %d took %d steps; the workers' stores acknowledged %d (%v)", r, n, total, acked)
		}
	}
	return total
}

// checkFaults stops the crew, checks its steps (checkSteps), and checks
// that each fault (what, at the moments landed) held up a step for d.
func checkFaults(t *testing.T, o cluster.Options, name string, c *crew, what string, landed []time.Time, d time.Duration) {
	t.Helper()
	total := checkSteps(t, o, name, c)
	for round, at := range landed {
		n := c.heldUp(at, d)
		if n == 0 {
			t.Fatalf("round %d: the %s held up no step", round, what)
		}
		t.Logf("round %d: the %s held up %d steps", round, what, n)
	}
	t.Logf("%d faults (%s): %d steps acknowledged, each row took each exactly once", len(landed), what, total)
}

// A master paused (SIGSTOP) past the cluster's node timeout while steps
// are in flight, then resumed, five times: its replica takes over, the
// old master comes back as a replica, no worker stops, and every row took
// exactly the acknowledged steps. Each pause must hold up a step (one
// begun before it, or within half a second, that ended 2 s after it).
func TestRedisPausedMaster(t *testing.T) {
	cl, o := faultCluster(t, "paused")
	// The pause outlasts the node timeout (2 s), not the client's: the
	// master, resumed, still answers the calls it holds, and learns only
	// then that it is a replica now (a WAIT it was in ends UNBLOCKED).
	o.Timeout = 10 * time.Second
	c := workers(t, o, "paused")
	r := rand.New(rand.NewPCG(7, 8))
	var landed []time.Time
	for round := range 5 {
		time.Sleep(time.Duration(100+r.IntN(400)) * time.Millisecond)
		master, _ := masterWithReplica(t, cl, r)
		c.waitBusy()
		if err := cl.Pause(master); err != nil {
			t.Fatal(err)
		}
		landed = append(landed, time.Now())
		time.Sleep(5 * time.Second) // past the 2 s node timeout: its replica takes over
		if err := cl.Resume(master); err != nil {
			t.Fatal(err)
		}
		if err := cl.Settled(time.Minute); err != nil {
			t.Fatalf("round %d: the cluster did not settle after the master at %s came back: %v", round, master, err)
		}
		t.Logf("round %d: master %s paused for 5 s", round, master)
	}
	checkFaults(t, o, "paused", c, "pause", landed, 2*time.Second)
}

// A master killed (SIGKILL) at a random moment while steps are in flight,
// five times, its replica cut off for 300 ms before the kill (its link
// to the master dropped, the process paused until after the kill) so
// that writes the master alone had are lost with it: the store
// acknowledges no write before a replica has it, so the replica taken
// over holds every acknowledged step, and the calls not acknowledged are
// made again, once. The killed node restarts as a replica before the
// next round.
func TestRedisKillMasters(t *testing.T) {
	cl, o := faultCluster(t, "killed")
	c := workers(t, o, "killed")
	r := rand.New(rand.NewPCG(9, 10))
	var landed []time.Time
	for round := range 5 {
		time.Sleep(time.Duration(100+r.IntN(400)) * time.Millisecond)
		master, replica := masterWithReplica(t, cl, r)
		// The replica drops its link to the master and is held back
		// (a paused process still receives into its socket, so the link
		// must go first): what the master writes from now on is on the
		// master alone.
		if out, err := cl.CLI(replica, "client", "kill", "type", "master"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if err := cl.Pause(replica); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		c.waitBusy()
		if err := cl.Kill(master); err != nil {
			t.Fatal(err)
		}
		landed = append(landed, time.Now())
		if err := cl.Resume(replica); err != nil {
			t.Fatal(err)
		}
		if err := cl.Settled(time.Minute); err != nil {
			t.Fatalf("round %d: no failover after the master at %s was killed: %v", round, master, err)
		}
		if err := cl.Restart(master); err != nil {
			t.Fatal(err)
		}
		if err := cl.Settled(time.Minute); err != nil {
			t.Fatalf("round %d: the node at %s did not come back as a replica: %v", round, master, err)
		}
		t.Logf("round %d: master %s killed, its replica %s cut off 300 ms before", round, master, replica)
	}
	checkFaults(t, o, "killed", c, "kill", landed, time.Second)
}

// A master killed for good with the README's layout: its replica takes
// over with no replica of its own, and training goes on, each write to
// it degraded (Stats.Degraded); every row took exactly the
// acknowledged steps. A store with StrictReplicas fails at once with
// ErrFewReplicas naming the master, and the same Step made again is
// applied once, whatever the errors before it.
func TestRedisMasterLostForGood(t *testing.T) {
	cl, o := faultCluster(t, "lost")
	c := workers(t, o, "lost")
	time.Sleep(300 * time.Millisecond)
	master, replica := masterWithReplica(t, cl, rand.New(rand.NewPCG(1, 2)))
	if err := cl.Kill(master); err != nil {
		t.Fatal(err)
	}
	if err := cl.Settled(time.Minute); err != nil {
		t.Fatal(err)
	}
	var degraded uint64
	deadline := time.Now().Add(time.Minute)
	for degraded < 20 && time.Now().Before(deadline) { // steps on the replica taken over, without a replica
		time.Sleep(100 * time.Millisecond)
		degraded = 0
		for _, s := range c.stores {
			degraded += s.Stats().Degraded
		}
	}
	total := checkSteps(t, o, "lost", c)
	if degraded < 20 {
		t.Fatalf("%d writes were counted as degraded in a minute after the master died for good", degraded)
	}
	t.Logf("master %s killed for good, %s took over: %d steps acknowledged, %d degraded pipelines", master, replica, total, degraded)

	o.StrictReplicas = true
	s, err := cluster.Open(context.Background(), o, "lost")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids, grad := allIDs(fVocab), filled(fVocab*fDim, -1)
	for range 2 {
		start := time.Now()
		err := serverStep(s, &optim.SparseSGD{LearnRate: 1, WeightDecay: 0}, ids, grad)
		if !errors.Is(err, cluster.ErrFewReplicas) || !errors.Is(err, cluster.ErrUnknownOutcome) || !strings.Contains(err.Error(), replica) {
			t.Fatalf("a strict store stepping on a master without replicas: %v", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("the strict store took %v to fail", d)
		}
	}
	o.StrictReplicas = false
	for r, n := range countRows(t, o, "lost", fVocab, fDim) {
		if n != total+1 {
			t.Fatalf("row %d took %d steps; %d acknowledged and one step failed twice, applied once", r, n, total)
		}
	}
}

// Every call that reaches the servers stops when its context is done,
// however long the store's Timeout and Retry would wait, and returns
// the context's error: reads, writes, rule steps, a cache's fetch and
// sync, Export, and a SharedDense's Pull and Push, against masters that
// hang (SIGSTOP). Once they resume, the store works again.
func TestRedisContext(t *testing.T) {
	cl := localredis.Start(t, 3, 0)
	o := cluster.Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 20 * time.Second, Retry: time.Minute}
	ctx := context.Background()
	const vocab, dim = 500, 4
	opt := optim.NewSparseAdam(0.1)
	cols := opt.Columns(dim)
	if err := cluster.Create(ctx, o, "ctx", vocab, dim, tensor.Float32, table.WithState(cols...)); err != nil {
		t.Fatal(err)
	}
	s, err := cluster.Open(ctx, o, "ctx")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := table.NewCached(ctx, s, table.CacheOptions{Budget: 1 << 20, Shared: &table.SharedOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	g := gorgonia.NewGraph()
	w := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(10), gorgonia.WithName("w"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(10), tensor.Of(tensor.Float32))))
	if _, err := gorgonia.Grad(gorgonia.Must(gorgonia.Sum(w)), w); err != nil {
		t.Fatal(err)
	}
	rows, err := optim.SharedRows(w)
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Create(ctx, o, "ctxdense", rows, optim.SharedWidth, tensor.Float32, table.WithState(opt.Columns(optim.SharedWidth)...)); err != nil {
		t.Fatal(err)
	}
	ds, err := cluster.Open(ctx, o, "ctxdense")
	if err != nil {
		t.Fatal(err)
	}
	if err := optim.CreateSharedDense(ctx, ds, w); err != nil {
		t.Fatal(err)
	}
	d, err := optim.OpenSharedDense(ctx, ds, opt, optim.SharedOptions{Workers: 1}, w)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(w))
	defer vm.Close()
	if err := vm.RunAll(); err != nil { // w's gradient, which Push sends
		t.Fatal(err)
	}
	ids := []int64{1, 2, 3}
	grad := make([]float32, len(ids)*dim)
	rg := &optim.RowGrad{Rows: ids, Values: tensor.New(tensor.WithShape(3, dim), tensor.WithBacking(grad))}
	if err := s.Step(ctx, opt, rg); err != nil {
		t.Fatal(err) // loads the rule's Function before the masters hang
	}

	for _, addr := range cl.Addrs {
		if err := cl.Pause(addr); err != nil {
			t.Fatal(err)
		}
	}
	resumed := false
	resume := func() {
		if resumed {
			return
		}
		resumed = true
		for _, addr := range cl.Addrs {
			if err := cl.Resume(addr); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer resume()
	buf := make([]byte, len(ids)*s.RowBytes())
	calls := map[string]func(ctx context.Context) error{
		"ReadRows":  func(ctx context.Context) error { return s.ReadRows(ctx, ids, buf) },
		"WriteRows": func(ctx context.Context) error { return s.WriteRows(ctx, ids, buf) },
		"Step":      func(ctx context.Context) error { return s.Step(ctx, opt, rg) },
		"Fetch": func(ctx context.Context) error {
			c.NewBatch()
			return c.Fetch(ctx, []int64{7, 8}, make([]int32, 2))
		},
		"Read": func(ctx context.Context) error { _, err := c.Read(ctx, []int64{9}); return err },
		"Export": func(ctx context.Context) error {
			return table.Export(ctx, filepath.Join(t.TempDir(), "x"), s, 0)
		},
		"Pull": func(ctx context.Context) error { return d.Pull(ctx) },
		"Push": func(ctx context.Context) error { return d.Push(ctx) },
	}
	for name, call := range calls {
		for _, cancel := range []bool{false, true} {
			cctx, stop := context.WithTimeout(ctx, 300*time.Millisecond)
			want := context.DeadlineExceeded
			if cancel {
				cctx, stop = context.WithCancel(ctx)
				time.AfterFunc(300*time.Millisecond, stop)
				want = context.Canceled
			}
			start := time.Now()
			err := call(cctx)
			stop()
			if !errors.Is(err, want) || time.Since(start) > 5*time.Second {
				t.Errorf("%s (cancel %v) with the masters hung: %v after %v, want %v within the context's time", name, cancel, err, time.Since(start), want)
			}
		}
	}
	resume()
	if err := cl.Settled(time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.ReadRows(ctx, ids, buf); err != nil {
		t.Fatalf("after the masters resumed: %v", err)
	}
}
