// Command distributed trains a click model (three pooled embedding tables
// and a small MLP, logistic loss) with several worker processes sharing
// one Redis Cluster: the tables' rows and the dense learnables live on
// the cluster, each worker trains on its shard of the examples, and the
// servers apply every worker's updates (SparseAdam, by the Functions of
// package table), each atomic and applied once.
//
// Without -redis it starts a local cluster of three masters (Debian's
// redis-server: sudo apt-get install -y redis-server) in a temporary
// directory, and stops it at the end. Then it trains the same model in
// one process, in memory, on the same examples, and ends with the two
// held-out losses and how far apart they are, in the form
//
//	held-out loss: 2 workers <loss>, one process in memory <loss> (<d>% apart)
//
// (the README gives the figures of a run). With -workers 0 it trains in
// memory only, and needs no Redis; -half float16 (or bfloat16) holds the
// in-memory model's tables in half precision, its updates rounded
// stochastically (-nearest: to nearest).
//
// The model trained in memory is then served in each of package serve's
// formats (its tables quantized, the MLP as trained): the command prints
// the held-out loss and the bytes per row of each. -save writes that
// model to a safetensors file (each table as "feature<f>.weight", the MLP
// as "dense.*", "top1.*" and "top2.*"), which examples/serve answers
// requests with; -save-every N writes it every N steps too, as it trains,
// each write atomic, so that examples/serve -watch serves a model that
// keeps training. With -deltas DIR (and -save, -workers 0) it saves the
// model first and then publishes, every -delta-every steps, the rows the
// tables' steps changed and the dense layers into DIR, which
// examples/serve -deltas DIR applies as they come.
//
// Usage:
//
//	go run ./examples/distributed [-workers 2] [-examples 200000] [-redis host:port,... -password P] [-save click.safetensors [-save-every 100]] [-half float16 [-nearest]]
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"github.com/gathergrad/gather/cluster"
	_ "github.com/gathergrad/gather/optim/clusterlua"
)

// workerEnv is set in the workers' environment (a test binary runs main
// when it sees it).
const workerEnv = "GATHER_DISTRIBUTED_WORKER"

type config struct {
	workers, examples, heldOut, batch int
	staleness, maxAge                 int
	lr                                float64
	seed                              uint64
	name                              string
	redis                             cluster.Options
	cacheMB                           int
	save                              string
	saveEvery                         int           // steps between saves of the in-memory model, 0 for none
	deltas                            string        // the directory of the deltas published between saves, "" for none
	deltaEvery                        int           // steps between deltas
	half                              driver.Format // the in-memory tables' values, 0 for float32
	nearest                           bool          // round them to nearest, not stochastically
}

func main() {
	log.SetFlags(0)
	var c config
	var addrs string
	worker := flag.Int("worker", -1, "run as this worker (the command starts its workers with it)")
	flag.IntVar(&c.workers, "workers", 2, "worker processes")
	flag.IntVar(&c.examples, "examples", 200_000, "training examples, over all workers")
	flag.IntVar(&c.heldOut, "heldout", 20_000, "held-out examples")
	flag.IntVar(&c.batch, "batch", 256, "examples per step")
	flag.IntVar(&c.staleness, "staleness", 2, "steps a worker may run ahead of the slowest")
	flag.IntVar(&c.maxAge, "maxage", 1, "batches a worker's cached row is served before it is read again")
	flag.IntVar(&c.cacheMB, "cache-mb", 64, "each worker's cache of rows, per table, in MB")
	flag.Float64Var(&c.lr, "lr", 0.01, "Adam's learning rate, for the tables and the dense layers")
	flag.Uint64Var(&c.seed, "seed", 1, "seed of the data and the initial weights")
	flag.StringVar(&c.name, "name", "click", "prefix of the tables' names on the cluster")
	flag.StringVar(&addrs, "redis", "", "addresses of a Redis Cluster's nodes (host:port,...); none starts a local one")
	flag.StringVar(&c.redis.Username, "user", "", "the cluster's ACL user")
	flag.StringVar(&c.redis.Password, "password", os.Getenv("GATHER_REDIS_PASSWORD"), "the cluster's password (or $GATHER_REDIS_PASSWORD)")
	flag.StringVar(&c.save, "save", "", "write the model trained in memory to this safetensors file")
	flag.IntVar(&c.saveEvery, "save-every", 0, "with -save, also write the model every this many steps as it trains (examples/serve -watch serves each)")
	flag.StringVar(&c.deltas, "deltas", "", "with -save and -workers 0, publish the rows training changed into this directory (examples/serve -deltas applies them)")
	flag.IntVar(&c.deltaEvery, "delta-every", 10, "with -deltas, steps between deltas")
	half := flag.String("half", "", "hold the in-memory model's tables in float16 or bfloat16")
	flag.BoolVar(&c.nearest, "nearest", false, "with -half, round the tables' updates to nearest instead of stochastically")
	flag.Parse()
	switch *half {
	case "":
	case "float16":
		c.half = driver.Float16
	case "bfloat16":
		c.half = driver.BFloat16
	default:
		log.Fatalf("-half takes float16 or bfloat16, not %q", *half)
	}
	c.redis.Timeout, c.redis.Retry = 10*time.Second, time.Minute
	if addrs != "" {
		c.redis.Addrs = strings.Split(addrs, ",")
	}
	// Whole steps on every worker: the single process then trains on
	// exactly the examples the workers share.
	c.examples -= c.examples % (max(c.workers, 1) * c.batch)
	if c.workers < 0 || c.examples < 1 || c.heldOut < 1 {
		log.Fatalf("needs zero workers or more, %d examples a step over them, and held-out examples", max(c.workers, 1)*c.batch)
	}
	var err error
	if *worker >= 0 {
		err = runWorker(c, *worker)
	} else {
		_, _, err = run(c)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// run starts (or joins) the cluster, writes the model to it, runs the
// workers, and compares their model with one trained in memory: it
// returns both held-out losses.
func run(c config) (workers, single float64, err error) {
	train := examples(c.seed, 1, c.examples)
	held := examples(c.seed, 2, c.heldOut)
	if c.workers == 0 {
		fmt.Printf("%d examples, %d held out; one process in memory\n", c.examples, c.heldOut)
		inMemory, err := trainInMemory(c, train)
		if err != nil {
			return 0, 0, err
		}
		s := inMemory.heldOutLoss(held)
		fmt.Printf("held-out loss: one process in memory %.5f\n", s)
		return s, s, served(c, inMemory, held)
	}
	if len(c.redis.Addrs) == 0 {
		dir, err := os.MkdirTemp("", "gathergrad-redis-")
		if err != nil {
			return 0, 0, err
		}
		defer os.RemoveAll(dir)
		cl, err := cluster.StartLocal(dir, 3)
		if err != nil {
			return 0, 0, fmt.Errorf("%w (or give a cluster with -redis)", err)
		}
		defer cl.Stop()
		c.redis.Addrs, c.redis.Password = cl.Options.Addrs, cl.Options.Password
		fmt.Printf("a local Redis Cluster of 3 masters at %s\n", strings.Join(cl.Options.Addrs, ", "))
	}
	if err := create(c); err != nil {
		return 0, 0, err
	}
	fmt.Printf("%d examples, %d held out; %d workers, %d examples a step each\n", c.examples, c.heldOut, c.workers, c.batch)
	start := time.Now()
	if err := startWorkers(c); err != nil {
		return 0, 0, err
	}
	wall := time.Since(start)
	onCluster, err := clusterWeights(c)
	if err != nil {
		return 0, 0, err
	}
	start = time.Now()
	inMemory, err := trainInMemory(c, train)
	if err != nil {
		return 0, 0, err
	}
	fmt.Printf("trained in %.1f s by %d workers, %.1f s by one process in memory\n", wall.Seconds(), c.workers, time.Since(start).Seconds())
	d, s := onCluster.heldOutLoss(held), inMemory.heldOutLoss(held)
	fmt.Printf("held-out loss: %d workers %.4f, one process in memory %.4f (%.1f%% apart)\n", c.workers, d, s, 100*math.Abs(d-s)/s)
	return d, s, served(c, inMemory, held)
}

// startWorkers runs the workers as processes of this command, their
// output prefixed with their number, and waits for them.
func startWorkers(c config) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, c.workers)
	for w := range c.workers {
		cmd := exec.Command(self, "-worker", strconv.Itoa(w), "-workers", strconv.Itoa(c.workers),
			"-examples", strconv.Itoa(c.examples), "-batch", strconv.Itoa(c.batch),
			"-staleness", strconv.Itoa(c.staleness), "-maxage", strconv.Itoa(c.maxAge), "-cache-mb", strconv.Itoa(c.cacheMB),
			"-lr", strconv.FormatFloat(c.lr, 'g', -1, 64), "-seed", strconv.FormatUint(c.seed, 10),
			"-name", c.name, "-redis", strings.Join(c.redis.Addrs, ","), "-user", c.redis.Username)
		cmd.Env = append(os.Environ(), "GATHER_REDIS_PASSWORD="+c.redis.Password, workerEnv+"=1")
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		cmd.Stderr = cmd.Stdout
		if err := cmd.Start(); err != nil {
			return err
		}
		wg.Go(func() {
			lines := bufio.NewScanner(out)
			for lines.Scan() {
				fmt.Printf("worker %d: %s\n", w, lines.Text())
			}
			if err := cmd.Wait(); err != nil {
				errs[w] = fmt.Errorf("worker %d: %w", w, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
