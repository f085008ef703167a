package cluster_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/cluster"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/killtest"
	"github.com/gathergrad/gather/internal/localredis"
	"github.com/gathergrad/gather/optim"
	_ "github.com/gathergrad/gather/optim/clusterlua"
)

// SparseSGD applied on the server equals a Go reference of the same
// float32 arithmetic to the bit, with and without weight decay; on amd64,
// where the compiler fuses no product with a sum, that is SparseSGD's own
// float32 step.
func TestRedisSGDFunction(t *testing.T) {
	const vocab, dim = 3000, 16
	_, s, all, raw := functionTable(t, "sgd", vocab, dim, nil, 7)
	ref := fileio.Float32s(raw)
	kern := tensor.New(tensor.WithShape(vocab, dim), tensor.WithBacking(fileio.Float32s(raw)))
	r := newRand(11)
	for step := range 20 {
		o := &optim.SparseSGD{LearnRate: 0.05}
		if step%2 == 1 {
			o.WeightDecay = 0.01
		}
		ids, ids64, grad := randomRows(r, vocab, 300, dim)
		if err := serverStep(s, &optim.SparseSGD{LearnRate: o.LearnRate, WeightDecay: o.WeightDecay}, ids64, grad); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		lr, wd := float32(o.LearnRate), float32(o.WeightDecay)
		for k, id := range ids {
			for j := range dim {
				w, d := &ref[id*dim+j], grad[k*dim+j]
				if wd != 0 {
					d = float32(d + float32(wd**w))
				}
				*w = float32(*w + float32(-lr*d))
			}
		}
		g := &optim.RowGrad{Rows: ids64, Values: tensor.New(tensor.WithShape(len(ids), dim), tensor.WithBacking(grad))}
		if err := o.StepRows(optim.Rows{Weight: kern, Step: 1}, g); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ReadRows(context.Background(), all, raw); err != nil {
		t.Fatal(err)
	}
	for i, got := range fileio.Float32s(raw) {
		if math.Float32bits(got) != math.Float32bits(ref[i]) {
			t.Fatalf("row %d value %d: server %v, Go %v", i/dim, i%dim, got, ref[i])
		}
		if k := kern.Float32s()[i]; runtime.GOARCH == "amd64" && math.Float32bits(got) != math.Float32bits(k) {
			t.Fatalf("row %d value %d: server %v, SparseSGD %v", i/dim, i%dim, got, k)
		}
	}
}

// zeroTable starts a cluster, writes a float32 table of vocab rows of dim
// zeros without state, loads the Functions, and returns the cluster and
// the options that reach it.
func zeroTable(t *testing.T, name string, replicas, vocab, dim int) (*localredis.Cluster, cluster.Options) {
	cl := localredis.Start(t, 3, replicas)
	o := cluster.Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 2 * time.Second}
	if err := cluster.Create(context.Background(), o, name, int64(vocab), dim, tensor.Float32); err != nil {
		t.Fatal(err)
	}
	s, err := cluster.Open(context.Background(), o, name)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WriteRows(context.Background(), allIDs(vocab), make([]byte, vocab*dim*4)); err != nil {
		t.Fatal(err)
	}
	return cl, o
}

func allIDs(n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	return ids
}

func filled(n int, v float32) []float32 {
	g := make([]float32, n)
	for i := range g {
		g[i] = v
	}
	return g
}

// countRows reads the rows of a table stepped only by SGD with learning
// rate 1 and gradients of -1, and returns how many steps each row took,
// failing the test if a row's values differ (a row half-updated) or are
// not whole steps.
func countRows(t *testing.T, o cluster.Options, name string, vocab, dim int) []int {
	t.Helper()
	s, err := cluster.Open(context.Background(), o, name)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	raw := make([]byte, vocab*dim*4)
	if err := s.ReadRows(context.Background(), allIDs(vocab), raw); err != nil {
		t.Fatal(err)
	}
	vals := fileio.Float32s(raw)
	counts := make([]int, vocab)
	for r := range vocab {
		row := vals[r*dim : (r+1)*dim]
		for _, v := range row {
			if v != row[0] || v != float32(int(v)) {
				t.Fatalf("row %d is %v: not %d whole steps on every value", r, row, int(row[0]))
			}
		}
		counts[r] = int(row[0])
	}
	return counts
}

// A worker killed (SIGKILL) mid-step, five times, while another steps the
// same rows: no row is half-updated (each call is atomic), the other
// worker goes on, and each row took the other's steps, the killed
// workers' acknowledged steps and at most each one's step in flight.
func TestRedisKillWorker(t *testing.T) {
	const vocab, dim, name = 3000, 8, "kill"
	if dir := os.Getenv("GATHER_REDIS_WORKER"); dir != "" {
		redisWorker(t, dir, name, vocab, dim)
		return
	}
	if testing.Short() {
		t.Skip("runs child workers")
	}
	cl, o := zeroTable(t, name, 0, vocab, dim)
	s, err := cluster.Open(context.Background(), o, name)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var other int
	var otherErr error
	wg.Go(func() {
		ids, grad := allIDs(vocab), filled(vocab*dim, -1)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if otherErr = serverStep(s, &optim.SparseSGD{LearnRate: 1, WeightDecay: 0}, ids, grad); otherErr != nil {
				return
			}
			other++
		}
	})
	const kills = 5
	acked := 0
	setup := func(dir string) {
		conf := strings.Join(cl.Addrs, ",") + "\n" + cl.Password
		if err := os.WriteFile(filepath.Join(dir, "cluster"), []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	killtest.Run(t, killtest.Config{Test: "TestRedisKillWorker", Env: "GATHER_REDIS_WORKER", Kills: kills, Seed: 17}, setup, func(k killtest.Kill) {
		acked += k.Step + 1
	})
	close(stop)
	wg.Wait()
	if otherErr != nil {
		t.Fatalf("the worker that was not killed: %v", otherErr)
	}
	lo, hi := other+acked, other+acked+kills
	spread := map[int]int{}
	for r, n := range countRows(t, o, name, vocab, dim) {
		if n < lo || n > hi {
			t.Fatalf("row %d took %d steps: the other worker's %d and the killed ones' %d acknowledged, at most %d in flight", r, n, other, acked, kills)
		}
		spread[n-lo]++
	}
	t.Logf("%d kills: the other worker took %d steps, the killed ones %d acknowledged; rows by steps in flight applied: %v", kills, other, acked, spread)
}

// redisWorker is TestRedisKillWorker's child: it steps every row of the
// table by -1 until it is killed, marking each step the store
// acknowledged.
func redisWorker(t *testing.T, dir, name string, vocab, dim int) {
	conf, err := os.ReadFile(filepath.Join(dir, "cluster"))
	if err != nil {
		t.Fatal(err)
	}
	addrs, password, _ := strings.Cut(string(conf), "\n")
	o := cluster.Options{Addrs: strings.Split(addrs, ","), Password: password, Timeout: 2 * time.Second}
	s, err := cluster.Open(context.Background(), o, name)
	if err != nil {
		t.Fatal(err)
	}
	ids, grad := allIDs(vocab), filled(vocab*dim, -1)
	for step := 0; ; step++ {
		if err := serverStep(s, &optim.SparseSGD{LearnRate: 1, WeightDecay: 0}, ids, grad); err != nil {
			t.Fatal(err)
		}
		if err := killtest.Mark(dir, "synced", step); err != nil {
			t.Fatal(err)
		}
	}
}

// A cluster that speaks TLS alone (clients and cluster bus): a store
// given Options.TLS writes, reads and steps its rows; one without
// TLS is refused.
func TestRedisTLS(t *testing.T) {
	cl := localredis.StartTLS(t, 3, 0)
	o := cluster.Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 2 * time.Second, TLS: cl.TLS}
	const vocab, dim = 2000, 4
	if err := cluster.Create(context.Background(), o, "tls", vocab, dim, tensor.Float32); err != nil {
		t.Fatal(err)
	}
	s, err := cluster.Open(context.Background(), o, "tls")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WriteRows(context.Background(), allIDs(vocab), make([]byte, vocab*dim*4)); err != nil {
		t.Fatal(err)
	}
	if err := serverStep(s, &optim.SparseSGD{LearnRate: 1}, allIDs(vocab), filled(vocab*dim, -1)); err != nil {
		t.Fatal(err)
	}
	for r, n := range countRows(t, o, "tls", vocab, dim) {
		if n != 1 {
			t.Fatalf("row %d took %d steps, not 1", r, n)
		}
	}
	o.TLS = nil
	if _, err := cluster.Open(context.Background(), o, "tls"); err == nil {
		t.Fatal("a client without TLS read the table")
	}
}
