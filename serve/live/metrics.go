package live

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"
)

// Buckets are the upper bounds, in seconds, of Metrics' histogram of the
// time from a request's arrival to its answer.
var Buckets = [...]float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

// callRing is how many of the latest model calls Metrics keeps the times
// of.
const callRing = 4096

// Metrics counts what a server answered: requests by status, a
// histogram of the answered requests' times, and the times of the last
// 4,096 model calls, for their quantiles. It writes them in Prometheus's
// text format (WriteText). Metrics is safe for concurrent use.
type Metrics struct {
	mu      sync.Mutex
	codes   map[int]int64
	hist    [len(Buckets) + 1]int64
	histSum float64
	calls   []time.Duration // a ring
	next    int
	n       int64 // model calls
}

// NewMetrics returns Metrics with nothing counted.
func NewMetrics() *Metrics {
	return &Metrics{codes: map[int]int64{}, calls: make([]time.Duration, 0, callRing)}
}

// Count counts a request answered with the HTTP status code.
func (m *Metrics) Count(code int) {
	m.mu.Lock()
	m.codes[code]++
	m.mu.Unlock()
}

// Observe adds a request's time, from its arrival to its answer, to the
// histogram.
func (m *Metrics) Observe(d time.Duration) {
	sec := d.Seconds()
	k, _ := slices.BinarySearch(Buckets[:], sec)
	m.mu.Lock()
	m.hist[k]++
	m.histSum += sec
	m.mu.Unlock()
}

// Call adds a model call's time.
func (m *Metrics) Call(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n++
	if len(m.calls) < cap(m.calls) {
		m.calls = append(m.calls, d)
		return
	}
	m.calls[m.next] = d
	m.next = (m.next + 1) % len(m.calls)
}

// Counts returns the requests counted, by status.
func (m *Metrics) Counts() map[int]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.codes)
}

// Calls returns how many model calls were made, and for each p of ps
// (0 <= p <= 1) the p-quantile of the last 4,096 calls' times (0 before
// the first): the time of rank ⌊p·(n-1)⌋ of the n kept, in increasing
// order.
func (m *Metrics) Calls(ps ...float64) (int64, []time.Duration) {
	m.mu.Lock()
	calls := slices.Clone(m.calls)
	n := m.n
	m.mu.Unlock()
	slices.Sort(calls)
	q := make([]time.Duration, len(ps))
	for k, p := range ps {
		if len(calls) > 0 {
			q[k] = calls[int(p*float64(len(calls)-1))]
		}
	}
	return n, q
}

// A Family is metrics WriteText writes beside its own: a name, a type
// ("counter" or "gauge"), a help text and the samples, each with its
// labels as Prometheus writes them (`{result="ok"}`, or "").
type Family struct {
	Name, Type, Help string
	Samples          []Sample
}

// A Sample is one value of a Family.
type Sample struct {
	Labels string
	Value  float64
}

// WriteText writes the metrics in Prometheus's text format (version
// 0.0.4): the counter requests (say "serve_requests_total") by code, the
// histogram seconds (say "serve_predict_seconds") of the observed times,
// then each family of more. Serve it with the Content-Type
// "text/plain; version=0.0.4; charset=utf-8".
func (m *Metrics) WriteText(w io.Writer, requests, seconds string, more ...Family) error {
	m.mu.Lock()
	codes, hist, sum := maps.Clone(m.codes), m.hist, m.histSum
	m.mu.Unlock()
	p := &printer{w: w}
	p.printf("# HELP %s Requests answered, by status.\n# TYPE %s counter\n", requests, requests)
	for _, c := range slices.Sorted(maps.Keys(codes)) {
		p.printf("%s{code=\"%d\"} %d\n", requests, c, codes[c])
	}
	p.printf("# HELP %s Time from a request's arrival to its answer.\n# TYPE %s histogram\n", seconds, seconds)
	var cum int64
	for k, le := range Buckets {
		cum += hist[k]
		p.printf("%s_bucket{le=\"%g\"} %d\n", seconds, le, cum)
	}
	cum += hist[len(Buckets)]
	p.printf("%s_bucket{le=\"+Inf\"} %d\n%s_sum %g\n%s_count %d\n", seconds, cum, seconds, sum, seconds, cum)
	for _, f := range more {
		p.printf("# HELP %s %s\n# TYPE %s %s\n", f.Name, f.Help, f.Name, f.Type)
		for _, x := range f.Samples {
			p.printf("%s%s %g\n", f.Name, x.Labels, x.Value)
		}
	}
	return p.err
}

// printer writes to w until a write fails, and keeps the error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}
