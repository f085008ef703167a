// Command distributed measures training on a Redis Cluster: the store's
// part of a step (the rows of 4,096 distinct ids of a table of 64 float32
// values and a row-wise Adagrad sum read through a Shared cache, then
// their update applied on the servers by RowWiseAdagrad's Function)
// against the same round trips issued bare through go-redis (a pipelined
// GET of the keys, the same Function calls, one per hash tag, in one
// pipeline), in alternating rounds, medians; that step by 1 and by 2
// workers at once (rows a second over the cluster); and the
// examples/distributed job (its held-out loss against one process
// training in memory). It starts a local cluster of 3 masters unless
// given one (-redis), and prints one line a check reads:
//
//	distributed: step <ms> bare <ms> workers <n> heldout <loss> single <loss>
//
//	go run ./bench/distributed [-rounds 5] [-steps 20] [-workers 2] [-examples 200000]
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/cluster"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/localredis"
	"github.com/gathergrad/gather/optim"
	_ "github.com/gathergrad/gather/optim/clusterlua"
	"github.com/gathergrad/gather/table"
)

const (
	vocab = 1_000_000
	dim   = 64
	ids   = 4096
)

func main() {
	log.SetFlags(0)
	rounds := flag.Int("rounds", 5, "alternating rounds of ours and bare")
	steps := flag.Int("steps", 20, "steps a round")
	workers := flag.Int("workers", 2, "workers of the examples/distributed job")
	examples := flag.Int("examples", 200_000, "training examples of the job")
	addrs := flag.String("redis", "", "a Redis Cluster's nodes (host:port,...); none starts a local one of 3 masters")
	password := flag.String("password", "", "the cluster's password")
	flag.Parse()
	o := cluster.Options{Password: *password, Timeout: 10 * time.Second}
	if *addrs != "" {
		o.Addrs = strings.Split(*addrs, ",")
	} else {
		dir, err := os.MkdirTemp("", "gathergrad-bench-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(dir)
		cl, err := localredis.Launch(dir, 3, 0)
		if err != nil {
			log.Fatal(err)
		}
		defer cl.Stop()
		o.Addrs, o.Password = cl.Addrs, cl.Password
	}
	if err := run(o, *rounds, *steps, *workers, *examples); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func run(o cluster.Options, rounds, steps, workers, examples int) error {
	opt := optim.NewRowWiseAdagrad(0.01)
	cols := opt.Columns(dim)
	fmt.Printf("writing a table of %d rows of %d float32 values and an Adagrad sum\n", vocab, dim)
	if err := cluster.Create(context.Background(), o, "bench", vocab, dim, tensor.Float32, table.WithState(cols...), table.WithReplace()); err != nil {
		return err
	}
	ours, err := newWorker(o, opt, 1)
	if err != nil {
		return err
	}
	defer ours.close()
	// The first step loads the rule's Function, which bare then calls.
	if err := ours.step(); err != nil {
		return err
	}
	fn, err := cluster.Function(opt)
	if err != nil {
		return err
	}
	bare := newBare(o, fn)
	defer bare.c.Close()
	var tOurs, tBare []float64
	for round := range rounds {
		for range steps {
			ms, err := timed(func() error { return ours.step() })
			if err != nil {
				return err
			}
			tOurs = append(tOurs, ms)
			batch := ours.batch()
			ms, err = timed(func() error { return bare.step(batch) })
			if err != nil {
				return err
			}
			tBare = append(tBare, ms)
		}
		fmt.Printf("round %d: ours %.1f ms, bare %.1f ms (medians so far)\n", round+1, median(tOurs), median(tBare))
	}
	one, err := rowsPerSecond(o, opt, 1, rounds*steps/2)
	if err != nil {
		return err
	}
	two, err := rowsPerSecond(o, opt, 2, rounds*steps/2)
	if err != nil {
		return err
	}
	fmt.Printf("store's step of %d rows: ours %.1f ms, bare go-redis %.1f ms (%.2fx); rows a second: %.0f by 1 worker, %.0f by 2\n",
		ids, median(tOurs), median(tBare), median(tOurs)/median(tBare), one, two)
	held, single, err := job(o, workers, examples)
	if err != nil {
		return err
	}
	fmt.Printf("distributed: step %.2f bare %.2f workers %d heldout %.4f single %.4f\n", median(tOurs), median(tBare), workers, held, single)
	return nil
}

// A worker is the store's part of a training step: a Shared cache's
// fetch of a batch's rows, and the server's update of them.
type worker struct {
	s     *cluster.Store
	c     *table.Cached
	opt   *optim.RowWiseAdagrad
	r     *rand.Rand
	ids   []int64
	slots []int32
	g     *optim.RowGrad
}

func newWorker(o cluster.Options, opt *optim.RowWiseAdagrad, seed uint64) (*worker, error) {
	s, err := cluster.Open(context.Background(), o, "bench")
	if err != nil {
		return nil, err
	}
	c, err := table.NewCached(context.Background(), s, table.CacheOptions{Budget: 64 << 20, Shared: &table.SharedOptions{}})
	if err != nil {
		return nil, err
	}
	grad := make([]float32, ids*dim)
	for i := range grad {
		grad[i] = 1e-3
	}
	return &worker{s: s, c: c, opt: opt, r: rand.New(rand.NewPCG(seed, 7)), slots: make([]int32, ids),
		g: &optim.RowGrad{Rows: make([]int64, ids), Values: tensor.New(tensor.WithShape(ids, dim), tensor.WithBacking(grad))}}, nil
}

// batch returns the ids of the last step, in order.
func (w *worker) batch() []int64 { return w.ids }

func (w *worker) step() error {
	w.ids = w.ids[:0]
	seen := map[int64]bool{}
	for len(w.ids) < ids {
		id := w.r.Int64N(vocab)
		if !seen[id] {
			seen[id] = true
			w.ids = append(w.ids, id)
		}
	}
	slices.Sort(w.ids)
	w.c.NewBatch()
	if err := w.c.Fetch(context.Background(), w.ids, w.slots); err != nil {
		return err
	}
	copy(w.g.Rows, w.ids)
	return w.s.Step(context.Background(), w.opt, w.g) // the servers' step alone
}

func (w *worker) close() {
	w.c.Close(context.Background())
	w.s.Close()
}

// bare issues a step's round trips through go-redis alone: the keys'
// GETs in one pipeline, then RowWiseAdagrad's Function once per hash tag,
// in one pipeline.
type bare struct {
	c    *redis.ClusterClient
	fn   string // the Function of RowWiseAdagrad's rule
	grad []byte
	n    uint64
}

func newBare(o cluster.Options, fn string) *bare {
	g := make([]float32, dim)
	for i := range g {
		g[i] = 1e-3
	}
	return &bare{c: redis.NewClusterClient(&redis.ClusterOptions{Addrs: o.Addrs, Password: o.Password}), fn: fn,
		grad: slices.Clone(fileio.LittleEndianBytes(g))}
}

func (b *bare) step(batch []int64) error {
	ctx := context.Background()
	p := b.c.Pipeline()
	key := func(id int64) string {
		return "gg:bench:{" + strconv.FormatInt(id%1024, 10) + "}:" + strconv.FormatInt(id, 10)
	}
	for _, id := range batch {
		p.Get(ctx, key(id))
	}
	if _, err := p.Exec(ctx); err != nil {
		return err
	}
	groups := map[int64][]int64{}
	for _, id := range batch {
		groups[id%1024] = append(groups[id%1024], id)
	}
	b.n++
	p = b.c.Pipeline()
	for tag, g := range groups {
		keys := make([]string, 0, len(g)+1)
		args := []any{"bare", b.n, dim, 3, 0.01, 1e-8, 0.0}
		for _, id := range g {
			keys = append(keys, key(id))
			args = append(args, b.grad)
		}
		keys = append(keys, "gg:bench:{"+strconv.FormatInt(tag, 10)+"}:seen")
		p.FCall(ctx, b.fn, keys, args...)
	}
	_, err := p.Exec(ctx)
	return err
}

// rowsPerSecond runs n workers at once, each steps steps, and returns the
// rows they stepped a second, together.
func rowsPerSecond(o cluster.Options, opt *optim.RowWiseAdagrad, n, steps int) (float64, error) {
	ws := make([]*worker, n)
	for k := range ws {
		w, err := newWorker(o, opt, uint64(100+k))
		if err != nil {
			return 0, err
		}
		defer w.close()
		ws[k] = w
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for k, w := range ws {
		wg.Go(func() {
			for range steps {
				if errs[k] = w.step(); errs[k] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return float64(n*steps*ids) / time.Since(start).Seconds(), nil
}

// job runs examples/distributed on the cluster and returns the held-out
// losses of its workers' model and of the one trained in memory.
func job(o cluster.Options, workers, examples int) (float64, float64, error) {
	dir, err := os.MkdirTemp("", "gathergrad-job-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "distributed")
	if out, err := exec.Command("go", "build", "-o", bin, "./examples/distributed").CombinedOutput(); err != nil {
		return 0, 0, fmt.Errorf("building examples/distributed (run from the module's root): %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-workers", strconv.Itoa(workers), "-examples", strconv.Itoa(examples), "-redis", strings.Join(o.Addrs, ","))
	cmd.Env = append(os.Environ(), "GATHER_REDIS_PASSWORD="+o.Password)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	var held, single float64
	found := false
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		line := lines.Text()
		fmt.Println("  " + line)
		var n int
		if _, err := fmt.Sscanf(line, "held-out loss: %d workers %f, one process in memory %f", &n, &held, &single); err == nil {
			found = true
		}
	}
	if err := cmd.Wait(); err != nil {
		return 0, 0, fmt.Errorf("examples/distributed: %w", err)
	}
	if !found {
		return 0, 0, fmt.Errorf("examples/distributed printed no held-out loss")
	}
	return held, single, nil
}

func timed(f func() error) (float64, error) {
	start := time.Now()
	err := f()
	return float64(time.Since(start).Microseconds()) / 1e3, err
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
