// Command stream trains a click model one pass over a stream of raw
// 64-bit user and item ids that drifts: ids arrive, live a while and
// fade, as a recommender's do. It trains three models side by side on the
// same batches, differing in how an id finds its row:
//
//   - dynamic: a table.IDMap of a fixed number of rows, which gives a new
//     id a row (starting it afresh) and takes back the rows of the ids
//     used longest ago when full;
//   - hashed: the hashing trick, the row of an id is id mod rows, shared
//     by every id that falls there;
//   - unbounded: an IDMap with a row for every id of the stream, the
//     ceiling.
//
// Each step scores the batch before training on it (progressive
// validation); the progress lines give each model's AUC and normalized
// entropy over the latest examples. The last line sums the run up:
//
//	dynamic: auc <a> ne <n> hashed-auc <a> hashed-ne <n> unbounded-auc <a> remap-ns <ns> step-ratio <r>
//
// the AUC and NE of the last quarter of the stream, the time to remap a
// batch of 4,096 ids that all hold rows (ns an id), and the dynamic
// model's step with its ids remapped over the same step without (its
// ids pre-numbered).
//
// With -fresh it measures instead what serving a model that keeps
// training is worth: for each publish interval given, the dynamic model
// trains a -warm of steps, is saved, and a server in another process (this
// program again) loads it; then the stream comes at -rate batches a
// second for -duration, each batch answered by the server first and then
// trained on, and every interval the rows training changed, the id maps'
// new ids and the linear maps are published as a delta
// (checkpoint.WriteDeltas) that the server applies while it answers
// (serve.Table.Apply, serve.IDs.Apply, live.Holder.Update). A checker then
// rebuilds every version from the files and scores each batch again with
// the version its answer named: an answer that differs in a bit is torn.
// A line a run, then
//
//	fresh: lag-p99 <s> apply-ms-per-1k <ms> auc-1s <a> auc-10s <a> auc-60s <a> auc-never <a> torn <n>
//
// the AUC of the server's answers with each interval (never: the saved
// model alone); for the first interval, the 99th percentile of the time
// from a delta's rows being taken (right after a step) to their being
// served, and the server's time to apply deltas to its tables and id maps
// (once the file is read) per 1,000 rows; torn answers over all runs.
//
//	go run ./examples/stream [-steps 2000] [-batch 1024] [-live 40000] [-churn 200] [-rows 50000] [-admit 1] [-dim 8]
//	go run ./examples/stream -fresh 1s,10s,60s,never [-duration 3m] [-rate 50] [-warm 500] [-dim 64] [-churn 30]
//
// With -redis the stream is a live one in a Redis on this machine
// (a local Redis Cluster, redis-server on the PATH): impressions and, later, clicks written at
// -events a second, labelled by feed.Join within -window, the dynamic
// model trained from them through feed.OpenStream (runOnline says what
// its line reports):
//
//	go run ./examples/stream -redis [-events 50000] [-redis-for 30s] [-window 1s] [-delay 500ms] [-pack 64] [-publish 1s] [-serve now,10s,never] [-prom]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"github.com/gathergrad/gather/table"
)

func main() {
	log.SetFlags(0)
	var c config
	flag.IntVar(&c.steps, "steps", 2000, "batches in the stream")
	flag.IntVar(&c.batch, "batch", 1024, "examples a batch")
	flag.IntVar(&c.live, "live", 40_000, "item ids live at a time (users: half)")
	flag.IntVar(&c.churn, "churn", 200, "item ids replaced each batch (users: half)")
	flag.IntVar(&c.rows, "rows", 50_000, "rows of the dynamic and hashed item tables (users: half)")
	flag.IntVar(&c.admit, "admit", 1, "sightings before the dynamic table gives an id a row")
	flag.IntVar(&c.every, "every", 200, "steps between progress lines")
	flag.IntVar(&c.dim, "dim", 8, "values a row")
	fresh := flag.String("fresh", "", "measure freshness instead: deltas published every one of these intervals in turn (durations, or never), say 1s,10s,60s,never")
	var f freshConfig
	flag.DurationVar(&f.duration, "duration", 3*time.Minute, "with -fresh, the stream's time a run")
	flag.Float64Var(&f.rate, "rate", 50, "with -fresh, batches a second")
	flag.IntVar(&f.warm, "warm", 500, "with -fresh, steps trained before the served model is saved")
	online := flag.Bool("redis", false, "train from a live Redis Stream on this machine instead (redis-server on the PATH)")
	var oc onlineConfig
	flag.IntVar(&oc.rate, "events", 50_000, "with -redis, impressions a second")
	flag.DurationVar(&oc.duration, "redis-for", 30*time.Second, "with -redis, how long the stream runs")
	flag.DurationVar(&oc.window, "window", time.Second, "with -redis, how long after its impression a click counts")
	flag.DurationVar(&oc.delay, "delay", 500*time.Millisecond, "with -redis, the longest delay of a click after its impression")
	flag.BoolVar(&oc.prom, "prom", false, "with -redis, print the run's metrics in Prometheus's text format after its line")
	flag.DurationVar(&oc.publish, "publish", time.Second, "with -redis, how often the trainer writes the rows it changed as a delta")
	flag.IntVar(&oc.pack, "pack", 64, "with -redis, joined examples an entry of the trainers' stream (as lines; 1: an entry each)")
	serveEvery := flag.String("serve", "now,10s,never", "with -redis, a server process for each of these intervals of applying the deltas (now: each as it appears; never: the saved model alone)")
	flag.Parse()
	if dir := os.Getenv(serveEnv); dir != "" { // a server process of -fresh or -redis
		every, err := parseEvery(os.Getenv(everyEnv))
		if err == nil {
			err = serveProcess(dir, every, os.Stdin, os.Stdout)
		}
		if err != nil {
			log.Fatal(err)
		}
		return
	}
	var err error
	if *online {
		oc.serve = strings.Split(*serveEvery, ",")
		err = runOnline(os.Stdout, c, oc)
	} else if *fresh != "" {
		if f.intervals, err = parseIntervals(*fresh); err == nil {
			err = runFresh(os.Stdout, c, f)
		}
	} else {
		err = run(os.Stdout, c)
	}
	if err != nil {
		log.Fatal(err)
	}
}

type config struct {
	steps, batch, live, churn, rows, admit, every, dim int
}

func run(w io.Writer, c config) error {
	if c.steps < 1 || c.batch < 1 || c.live < 2 || c.churn < 0 || c.rows < 2 || c.admit < 1 || c.every < 1 || c.dim < 1 {
		return fmt.Errorf("stream: steps %d, batch %d, live %d, churn %d, rows %d, admit %d, every %d, dim %d: each must be positive (live and rows at least 2)",
			c.steps, c.batch, c.live, c.churn, c.rows, c.admit, c.every, c.dim)
	}
	window := max(c.steps*c.batch/4, c.batch)
	distinct := c.live + c.churn*c.steps // an upper bound on the stream's item ids
	fmt.Fprintf(w, "stream: %d batches of %d; %d items live at a time, %d new a batch (at most %d in all), half as many users; tables of %d rows (users %d)\n",
		c.steps, c.batch, c.live, c.churn, distinct, c.rows, c.rows/2)
	var models []*model
	for _, k := range []kind{dynamic, hashed, unbounded} {
		rows, admit := [2]int{c.rows / 2, c.rows}, c.admit
		if k == unbounded {
			rows, admit = [2]int{distinct/2 + 1, distinct}, 1
		}
		m, err := newModel(k, c.batch, c.dim, rows, admit, window)
		if err != nil {
			return fmt.Errorf("%v model: %w", k, err)
		}
		defer m.close()
		models = append(models, m)
	}
	s := newClickStream(1, c.live, c.churn)
	ids := [2][]int64{make([]int64, c.batch), make([]int64, c.batch)}
	clicks := make([]float32, c.batch)
	start := time.Now()
	for step := range c.steps {
		s.next(ids[0], ids[1], clicks)
		for _, m := range models {
			if err := m.step(int64(step), ids, clicks); err != nil {
				return fmt.Errorf("%v model, step %d: %w", m.kind, step, err)
			}
		}
		if (step+1)%c.every == 0 || step+1 == c.steps {
			fmt.Fprintf(w, "step %d/%d %.0fs", step+1, c.steps, time.Since(start).Seconds())
			for _, m := range models {
				r := m.metric.Window()
				fmt.Fprintf(w, " | %v auc %.4f ne %.4f", m.kind, r.AUC, r.NE)
			}
			fmt.Fprintf(w, " |%s\n", models[0].stats())
		}
	}
	d, h, u := models[0].metric.Window(), models[1].metric.Window(), models[2].metric.Window()
	ns, err := remapNs(ids[1])
	if err != nil {
		return err
	}
	dm := models[0]
	ratio := float64(dm.mapTime+dm.stepTime) / float64(dm.stepTime)
	fmt.Fprintf(w, "dynamic: auc %.4f ne %.4f hashed-auc %.4f hashed-ne %.4f unbounded-auc %.4f remap-ns %.1f step-ratio %.3f\n",
		d.AUC, d.NE, h.AUC, h.NE, u.AUC, ns, ratio)
	return nil
}

// remapNs returns the median time, in ns an id, of remapping a batch of
// 4,096 distinct ids (from ids, then made up) that all hold rows.
func remapNs(ids []int64) (float64, error) {
	batch := slices.Compact(slices.Sorted(slices.Values(ids)))
	for k := int64(0); len(batch) < 4096; k++ {
		batch = append(batch, -1-k)
	}
	batch = batch[:4096]
	m, err := table.NewIDMap("remap", driver.IDMapOptions{Rows: 1 << 16})
	if err != nil {
		return 0, err
	}
	rows := make([]int64, len(batch))
	var times []float64
	for step := range 101 {
		t := time.Now()
		if _, err := m.Map(context.Background(), batch, rows, int64(step), nil); err != nil {
			return 0, err
		}
		if step > 0 { // the first admits them
			times = append(times, float64(time.Since(t).Nanoseconds())/float64(len(batch)))
		}
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}
