package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/cluster"
	"github.com/gathergrad/gather/feed"
	"github.com/gathergrad/gather/metrics"
	"github.com/gathergrad/gather/serve/live"
)

// onlineConfig is what -redis runs: events a second for how long, the
// join's window and the longest delay of a click after its impression.
type onlineConfig struct {
	rate     int
	duration time.Duration
	window   time.Duration
	delay    time.Duration
	prom     bool // the Prometheus text of the run after its line
	publish  time.Duration
	pack     int // joined examples an entry: 1, an entry each; more, as lines (feed's Lines)
	// serve holds each server process's interval of applying deltas
	// (everyEnv's values: now, as each appears; a duration; never).
	serve []string
}

// The streams of -redis, one hash tag: impressions, clicks and the
// joined examples the trainer reads.
const (
	impStream = "{clicks}:impressions"
	clkStream = "{clicks}:clicks"
	outStream = "{clicks}:examples"
)

// onlineSchema is the joined examples as the trainer reads them.
var onlineSchema = feed.Schema{Columns: []feed.Column{
	{Name: "label", Role: feed.Label},
	{Name: "user", Role: feed.Sparse, IDs: feed.Int},
	{Name: "item", Role: feed.Sparse, IDs: feed.Int},
	{Name: "t", Role: feed.Skip},
}}

// runOnline trains the dynamic model from a live Redis Stream on this
// machine (a local Redis Cluster of 3 masters, cluster.StartLocal): a producer writes the click stream's impressions (a request
// id, the user, the item, the time) at o.rate a second and each click
// up to o.delay after its impression; a feed.Join labels them within
// o.window; the trainer reads the labelled examples through a consumer
// group (feed.OpenStream), trains on each full batch and acknowledges it,
// and every o.publish writes the rows training changed as a delta. Server
// processes (serveProcess, one for each of o.serve) load the model saved
// before the stream starts and apply the deltas, each at its interval;
// each batch is scored by every server before it is trained. The last
// line:
//
//	online: events-per-s <e> trained-per-s <t> lag-p99 <n> event-to-trained-p99 <s> event-to-served-p99 <s> auc <a> auc-served-<iv> <a> ...
//
// the impressions written and the examples trained a second, the 99th
// percentile of the group's lag (entries not yet read, XINFO GROUPS)
// sampled at each batch, of the time from an impression to the step that
// trained it (the window included), of the time from an impression to
// the first server's serving the delta that holds its step, the AUC of
// the trainer's predictions made before training (progressive
// validation) and that of each server's answers, by its interval (now:
// each delta as it appears; never: the saved model alone). With o.prom the run's
// metrics follow in Prometheus's text format (serve/live's WriteText):
// the event-to-trained histogram, batches, events and examples trained,
// the consumer lag and the join's counts.
func runOnline(w io.Writer, c config, o onlineConfig) error {
	if o.rate < 1 || o.duration <= 0 || o.window <= 0 || o.delay < 0 || o.delay > o.window || o.publish <= 0 || len(o.serve) == 0 {
		return fmt.Errorf("stream: -rate %d, -duration %v, -window %v, -delay %v, -publish %v, -serve %q: rate and durations positive, the delay within the window, a server at least",
			o.rate, o.duration, o.window, o.delay, o.publish, o.serve)
	}
	for _, iv := range o.serve {
		if _, err := parseEvery(iv); err != nil {
			return fmt.Errorf("stream: -serve %q: %w", o.serve, err)
		}
	}
	dir, err := os.MkdirTemp("", "stream-redis")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := cluster.StartLocal(dir, 3)
	if err != nil {
		return fmt.Errorf("stream: starting a local Redis Cluster: %w", err)
	}
	defer srv.Stop()
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: srv.Options.Addrs, Password: srv.Options.Password})
	defer rc.Close()
	m, err := newModel(dynamic, c.batch, c.dim, [2]int{c.rows / 2, c.rows}, c.admit, max(4*c.batch, 10_000))
	if err != nil {
		return err
	}
	defer m.close()
	// The model as it starts is the servers' base; each delta after it
	// holds the rows changed since the last.
	const base = 1
	if err := checkpoint.Save(filepath.Join(dir, "base.safetensors"), map[string]string{"base": strconv.Itoa(base)},
		m.embs[0], m.embs[1], m.maps[0], m.maps[1], checkpoint.Nodes(m.dense...)); err != nil {
		return err
	}
	for _, e := range m.embs {
		e.TrackChanges()
	}
	servers := make([]*server, len(o.serve))
	quality := make([]*metrics.Binary, len(o.serve))
	for k, iv := range o.serve {
		if servers[k], err = startServer(dir, iv); err != nil {
			return err
		}
		defer servers[k].kill()
		if quality[k], err = metrics.NewBinary(metrics.Options{Window: int(o.duration.Seconds()+1) * o.rate}); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()
	fmt.Fprintf(w, "stream: a local Redis Cluster at %s (the streams on one master: one hash tag); %d impressions a second for %v, clicks up to %v later, joined within %v; batches of %d\n",
		strings.Join(srv.Options.Addrs, ", "), o.rate, o.duration, o.delay, o.window, c.batch)

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	var produced int64
	var joined feed.JoinStats
	wg.Add(2)
	go func() { defer wg.Done(); errs <- produce(ctx, rc, c, o, &produced) }()
	go func() { defer wg.Done(); errs <- join(ctx, rc, o, &joined) }()
	met := live.NewMetrics() // the event-to-trained times, and a batch a "request"

	so := feed.StreamOptions{Stream: outStream, Group: "trainers", Consumer: "trainer-1", Batch: c.batch, Linger: o.duration}
	if o.pack > 1 {
		so.Lines = "lines"
	}
	s, err := feed.OpenStream(context.Background(), rc, onlineSchema, so)
	if err != nil {
		return err
	}
	defer s.Close()
	ids := [2][]int64{make([]int64, c.batch), make([]int64, c.batch)}
	clicks := make([]float32, c.batch)
	p := make([]float32, c.batch)
	var lags, ages []float64
	// olds holds each batch's oldest event: its time (Unix ms) and the
	// delta that holds its step.
	type old struct{ ms, seq int64 }
	var olds []old
	trained, deltas := 0, int64(0)
	start := time.Now()
	last := start
	for step := int64(0); ; step++ {
		b, err := s.Next(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			return err
		}
		if b.Real < c.batch {
			break // the run's end (Linger is the run's length): the graph takes full batches
		}
		for k := range c.batch {
			ids[0][k], ids[1][k] = b.Sparse.Values[k], b.Sparse.Values[c.batch+k]
			clicks[k] = b.Labels[k]
		}
		for k, srv := range servers {
			if _, err := srv.ask(p, ids); err != nil {
				return err
			}
			if err := quality[k].Update(p, clicks); err != nil {
				return err
			}
		}
		if err := m.step(step, ids, clicks); err != nil {
			return err
		}
		if err := s.Ack(ctx); err != nil && ctx.Err() == nil {
			return err
		}
		now := time.Now()
		for _, id := range s.IDs() {
			if at, err := rc.XRange(ctx, outStream, id, id).Result(); err == nil && len(at) == 1 {
				if ms, err := strconv.ParseInt(eventTime(at[0]), 10, 64); err == nil {
					ages = append(ages, now.Sub(time.UnixMilli(ms)).Seconds())
					olds = append(olds, old{ms, deltas + 1})
					met.Observe(now.Sub(time.UnixMilli(ms)))
				}
			}
			break // one example a batch: the oldest
		}
		if lag, _, err := s.Lag(ctx); err == nil {
			lags = append(lags, float64(lag))
		}
		trained += b.Real
		met.Count(200)
		if time.Since(last) >= o.publish {
			deltas++
			if err := publish(dir, m, base, uint64(deltas)); err != nil {
				return err
			}
			last = time.Now()
		}
	}
	elapsed := time.Since(start).Seconds()
	cancel()
	wg.Wait()
	for range 2 {
		if err := <-errs; err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	reps := make([]serverReport, len(servers))
	for k, srv := range servers {
		if reps[k], err = srv.finish(); err != nil {
			return err
		}
		if reps[k].Refused != 0 {
			return fmt.Errorf("stream: the server applying deltas every %q refused %d", o.serve[k], reps[k].Refused)
		}
	}
	// An event is served once the first server serves the delta holding
	// its step; one in a delta it never served is left out.
	var served []float64
	for _, e := range olds {
		if e.seq <= int64(len(reps[0].ServedNs)) {
			served = append(served, time.Duration(reps[0].ServedNs[e.seq-1]-e.ms*1e6).Seconds())
		}
	}
	r := m.metric.Window()
	fmt.Fprintf(w, "online: events-per-s %.0f trained-per-s %.0f lag-p99 %.0f event-to-trained-p99 %.3f event-to-served-p99 %.3f auc %.4f",
		float64(produced)/elapsed, float64(trained)/elapsed, p99(lags), p99(ages), p99(served), r.AUC)
	for k, iv := range o.serve {
		fmt.Fprintf(w, " auc-served-%s %.4f", iv, quality[k].Window().AUC)
	}
	fmt.Fprintln(w)
	if !o.prom {
		return nil
	}
	lag := 0.0
	if len(lags) > 0 {
		lag = lags[len(lags)-1]
	}
	return met.WriteText(w, "stream_batches_total", "stream_event_to_trained_seconds",
		live.Family{Name: "stream_events_total", Type: "counter", Help: "Impressions written to the stream.", Samples: []live.Sample{{Value: float64(produced)}}},
		live.Family{Name: "stream_trained_total", Type: "counter", Help: "Examples trained.", Samples: []live.Sample{{Value: float64(trained)}}},
		live.Family{Name: "stream_consumer_lag", Type: "gauge", Help: "Entries of the examples stream not yet read by the trainers' group (XINFO GROUPS), at the last batch.", Samples: []live.Sample{{Value: lag}}},
		live.Family{Name: "stream_joined_total", Type: "counter", Help: "The join's examples and clicks, by kind.", Samples: []live.Sample{
			{Labels: `{kind="positive"}`, Value: float64(joined.Positives)}, {Labels: `{kind="negative"}`, Value: float64(joined.Negatives)},
			{Labels: `{kind="late"}`, Value: float64(joined.Late)}, {Labels: `{kind="unknown"}`, Value: float64(joined.Unknown)}}})
}

// produce writes the click stream's impressions at o.rate a second, in
// ticks of 10 ms, and each click once its delay (drawn up to o.delay)
// has passed, until ctx ends; it counts the impressions in *n.
func produce(ctx context.Context, rc redis.UniversalClient, c config, o onlineConfig, n *int64) error {
	s := newClickStream(1, c.live, c.churn)
	const tick = 10 * time.Millisecond
	per := max(1, o.rate/100)
	users, items, clicks := make([]int64, per), make([]int64, per), make([]float32, per)
	type due struct {
		at  time.Time
		req int64
	}
	var later []due
	t := time.NewTicker(tick)
	defer t.Stop()
	req := int64(0)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-t.C:
			s.next(users, items, clicks)
			p := rc.Pipeline()
			for k := range per {
				p.XAdd(ctx, &redis.XAddArgs{Stream: impStream, Values: []any{"request", req, "user", users[k], "item", items[k], "t", now.UnixMilli()}})
				if clicks[k] == 1 {
					later = append(later, due{now.Add(time.Duration(s.r.Int64N(int64(o.delay) + 1))), req})
				}
				req++
			}
			slices.SortFunc(later, func(a, b due) int { return a.at.Compare(b.at) })
			k := 0
			for ; k < len(later) && !later[k].at.After(now); k++ {
				p.XAdd(ctx, &redis.XAddArgs{Stream: clkStream, Values: []any{"request", later[k].req}})
			}
			later = later[k:]
			if _, err := p.Exec(ctx); err != nil {
				return err
			}
			*n += int64(per)
		}
	}
}

// join labels the impressions with their clicks (feed.Join) every 10 ms
// until ctx ends, leaving its counts in *st.
func join(ctx context.Context, rc redis.UniversalClient, o onlineConfig, st *feed.JoinStats) error {
	jo := feed.JoinOptions{Impressions: impStream, Clicks: clkStream, Out: outStream, Window: o.window, Count: 10_000}
	if o.pack > 1 {
		jo.Lines, jo.Pack = []string{"label", "user", "item", "t"}, o.pack // onlineSchema's columns
	}
	j, err := feed.NewJoin(rc, jo)
	if err != nil {
		return err
	}
	defer func() { *st = j.Stats() }()
	for ctx.Err() == nil {
		if _, err := j.Step(ctx); err != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return ctx.Err()
}

// eventTime returns the impression time ("t", Unix ms) of a joined
// entry's example, its first line's with -pack.
func eventTime(m redis.XMessage) string {
	if lines, ok := m.Values["lines"].(string); ok {
		first, _, _ := strings.Cut(lines, "\n")
		return first[strings.LastIndexByte(first, '\t')+1:]
	}
	return fmt.Sprint(m.Values["t"])
}

// p99 returns the 99th percentile of xs, 0 for none.
func p99(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[min(len(xs)-1, len(xs)*99/100)]
}
