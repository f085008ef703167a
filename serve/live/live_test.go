package live

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// loadNumber is a model: the number a file holds.
func loadNumber(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func write(t *testing.T, path, s string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// A Holder loads its file, reloads it into a new version, keeps the
// model when the file does not load, counts both, and is Changed only by
// a file it has not loaded or tried.
func TestHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model")
	write(t, path, "7")
	if _, err := NewHolder(path+".missing", loadNumber); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
	h, err := NewHolder(path, loadNumber)
	if err != nil {
		t.Fatal(err)
	}
	version := regexp.MustCompile(`^[0-9]+-[0-9a-f]{12}$`)
	first := h.Current()
	if first.Model != 7 || !version.MatchString(first.Version) || !strings.HasPrefix(first.Version, "1-") || h.Changed() {
		t.Fatalf("loaded %+v, Changed %v", first, h.Changed())
	}
	write(t, path, "8")
	if !h.Changed() {
		t.Fatal("a new file is not Changed")
	}
	v, err := h.Reload()
	if err != nil || v != h.Version() || !strings.HasPrefix(v, "2-") || h.Current().Model != 8 || first.Model != 7 {
		t.Fatalf("reload: %q %v, current %+v", v, err, h.Current())
	}
	write(t, path, "not a number")
	if _, err := h.Reload(); err == nil || h.Current().Model != 8 || h.Version() != v {
		t.Fatalf("a bad file: %v, current %+v", err, h.Current())
	}
	if h.Changed() {
		t.Fatal("the file that failed is Changed: a watch would retry it at every tick")
	}
	if ok, failed := h.Reloads(); ok != 1 || failed != 1 {
		t.Fatalf("reloads %d ok, %d failed", ok, failed)
	}
}

// Watch reloads on each signal and on each tick that finds the file
// changed, and stops with its context.
func TestHolderWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model")
	write(t, path, "1")
	h, err := NewHolder(path, loadNumber)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sig, tick := make(chan os.Signal), make(chan time.Time)
	logs := make(chan string, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Watch(ctx, sig, tick, func(f string, a ...any) { logs <- f })
	}()
	tick <- time.Now() // unchanged: nothing
	sig <- os.Interrupt
	if l := <-logs; !strings.HasPrefix(l, "reloaded") || h.Current().Model != 1 || !strings.HasPrefix(h.Version(), "2-") {
		t.Fatalf("on a signal: %q, %s", l, h.Version())
	}
	write(t, path, "2")
	tick <- time.Now()
	if l := <-logs; !strings.HasPrefix(l, "reloaded") || h.Current().Model != 2 {
		t.Fatalf("on a tick: %q", l)
	}
	cancel()
	<-done
	if len(logs) != 0 {
		t.Fatalf("more reloads than asked: %q", <-logs)
	}
}

// A Gate handles Workers requests, queues Queue more, refuses the next
// at once, and frees the place of a request whose client leaves.
func TestGate(t *testing.T) {
	g := NewGate(1, 1)
	if g.Workers() != 1 || g.Queue() != 1 {
		t.Fatalf("%d workers, queue %d", g.Workers(), g.Queue())
	}
	leave, err := g.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan func())
	go func() {
		l, err := g.Enter(context.Background())
		if err != nil {
			t.Error(err)
		}
		entered <- l
	}()
	for g.Admitted() < 2 {
		time.Sleep(time.Millisecond)
	}
	if g.Waiting() != 1 {
		t.Fatalf("%d waiting, want 1", g.Waiting())
	}
	if _, err := g.Enter(context.Background()); !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "1 requests handled and 1 waiting") {
		t.Fatalf("past the queue: %v", err)
	}
	leave()
	(<-entered)()
	if g.Admitted() != 0 {
		t.Fatalf("%d admitted after both left", g.Admitted())
	}
	// A waiting request whose context ends gives its place back.
	leave, _ = g.Enter(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Enter(ctx); !errors.Is(err, context.Canceled) || g.Admitted() != 1 {
		t.Fatalf("a client that left: %v, %d admitted", err, g.Admitted())
	}
	leave()
	if d := NewGate(0, 0); d.Workers() < 1 || d.Queue() != 32*d.Workers() || NewGate(2, -1).Queue() != 0 {
		t.Fatalf("defaults: %d workers, queue %d", d.Workers(), d.Queue())
	}
}

// Metrics counts by status, places times in the histogram's buckets,
// gives the model calls' quantiles, and writes Prometheus's text format.
func TestMetrics(t *testing.T) {
	m := NewMetrics()
	m.Count(200)
	m.Count(200)
	m.Count(503)
	m.Observe(300 * time.Microsecond)
	m.Observe(3 * time.Second)
	for k := range 5 {
		m.Call(time.Duration(k+1) * time.Millisecond)
	}
	if n, q := m.Calls(0.5, 1); n != 5 || q[0] != 3*time.Millisecond || q[1] != 5*time.Millisecond {
		t.Fatalf("calls %d, median and largest %v", n, q)
	}
	if n, q := NewMetrics().Calls(0.5); n != 0 || q[0] != 0 {
		t.Fatalf("no calls: %d, %v", n, q)
	}
	if c := m.Counts(); c[200] != 2 || c[503] != 1 || len(c) != 2 {
		t.Fatalf("counts %v", c)
	}
	var b bytes.Buffer
	err := m.WriteText(&b, "x_requests_total", "x_seconds", Family{Name: "x_reloads_total", Type: "counter", Help: "Reloads.",
		Samples: []Sample{{`{result="ok"}`, 2}, {`{result="failed"}`, 0}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# TYPE x_requests_total counter\nx_requests_total{code=\"200\"} 2\nx_requests_total{code=\"503\"} 1\n",
		"x_seconds_bucket{le=\"0.00025\"} 0\nx_seconds_bucket{le=\"0.0005\"} 1\n",
		"x_seconds_bucket{le=\"2.5\"} 1\nx_seconds_bucket{le=\"+Inf\"} 2\nx_seconds_sum 3.0003\nx_seconds_count 2\n",
		"# HELP x_reloads_total Reloads.\n# TYPE x_reloads_total counter\nx_reloads_total{result=\"ok\"} 2\nx_reloads_total{result=\"failed\"} 0\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("the text lacks\n%s\nit is\n%s", want, b.String())
		}
	}
}

// A Gate extended while busy reports true admits a second queue then,
// and refuses past it; not busy, or with the extension ended, it
// refuses past its one queue.
func TestGateExtend(t *testing.T) {
	g := NewGate(1, 1)
	busy := false
	g.ExtendWhile(func() bool { return busy })
	ctx := context.Background()
	leave, err := g.Enter(ctx) // the worker
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan func(), 2)
	go func() { // the queue
		l, err := g.Enter(ctx)
		if err != nil {
			t.Error(err)
		}
		queued <- l
	}()
	for g.Admitted() < 2 {
		time.Sleep(time.Millisecond)
	}
	if _, err := g.Enter(ctx); !errors.Is(err, ErrFull) {
		t.Fatalf("not busy, past the queue: %v", err)
	}
	busy = true
	go func() { // the second queue
		l, err := g.Enter(ctx)
		if err != nil {
			t.Error(err)
		}
		queued <- l
	}()
	for g.Admitted() < 3 {
		time.Sleep(time.Millisecond)
	}
	if _, err := g.Enter(ctx); !errors.Is(err, ErrFull) {
		t.Fatalf("busy, past the second queue: %v", err)
	}
	leave()
	(<-queued)()
	(<-queued)()
	if g.Admitted() != 0 {
		t.Fatalf("%d admitted after every request left", g.Admitted())
	}
	g.ExtendWhile(nil)
	leave, _ = g.Enter(ctx)
	go func() { l, _ := g.Enter(ctx); queued <- l }()
	for g.Admitted() < 2 {
		time.Sleep(time.Millisecond)
	}
	if _, err := g.Enter(ctx); !errors.Is(err, ErrFull) {
		t.Fatalf("the extension ended, busy, past the queue: %v", err)
	}
	leave()
	(<-queued)()
}
