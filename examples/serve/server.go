package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gathergrad/gather/serve"
)

// Limits of a request.
const (
	maxExamples = 4096
	maxBagIDs   = 1024    // ids in one bag
	maxIDs      = 1 << 16 // ids in a request, over its examples and features
)

// bodyLimit returns the largest body a request may have, for a model of
// dense dense features: the size of the largest batch within the limits
// above written as encoding/json writes it (each id at most 20 digits and
// a sign, each dense value at most 24 bytes), so that every such batch
// fits and a body past it is refused before it is read. A binary body of
// the same batch is smaller.
func bodyLimit(dense int) int64 {
	const envelope, perExample, perID, perValue = 64, 64 + 4*features, 21, 24
	return envelope + maxExamples*(perExample+int64(dense)*perValue) + maxIDs*perID
}

// A request is a batch of examples to score.
//
//	{"examples": [{"features": [[12, 7, 7, 40], [3, 1, 9], [5]], "dense": [0.1, -1.2, 0.4, 2]}]}
type request struct {
	Examples []example `json:"examples"`
}

// An example is one bag of ids per categorical feature and the dense
// features.
type example struct {
	Features [][]int64 `json:"features"`
	Dense    []float32 `json:"dense"`
}

// A response holds a probability of a click per example, in order.
type response struct {
	Probabilities []float64 `json:"probabilities"`
}

// A loaded model and the version its answers carry.
type loaded struct {
	m       *model
	version string
	stat    os.FileInfo // the file's, when it was read
}

// options configure a server.
type options struct {
	workers int // requests handled at once; 0 means GOMAXPROCS
	queue   int // requests waiting for a worker beyond those; 0 means 32 a worker, -1 none
}

// A server answers POST /predict with the model's probabilities, POST
// /reload by loading its model file again, GET /stats with its counts and
// the time of its model calls, and GET /metrics with the same in
// Prometheus's text format. It holds a model at a time: a request is
// answered by the model that was current when it arrived, whatever
// reload comes meanwhile, and its answer says which (the Model-Version
// header).
type server struct {
	path   string
	format serve.Format
	cur    atomic.Pointer[loaded]
	loads  atomic.Int64                // models loaded, the first part of a version
	reload sync.Mutex                  // one reload at a time
	tried  atomic.Pointer[os.FileInfo] // the file as the last reload found it

	admit chan struct{} // a slot per request admitted: workers + queue
	run   chan struct{} // a slot per request being handled

	// beforeModel, if set, runs before each model call (tests).
	beforeModel func()

	mu       sync.Mutex
	calls    []time.Duration // the last len(calls) model calls' times, a ring
	next     int
	count    int         // /predict requests answered 200
	reloads  int         // /reload requests answered 200
	failed   map[int]int // requests answered otherwise, by status
	hist     [len(latencyBuckets) + 1]int64
	histSum  float64
	reloaded [2]int // reloads that worked, that failed
}

// latencyBuckets are the upper bounds, in seconds, of the histogram of
// /predict's time from arrival to answer.
var latencyBuckets = [...]float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

// newServer returns a server of the model at path, its tables in format
// f.
func newServer(path string, f serve.Format, o options) (*server, error) {
	if o.workers <= 0 {
		o.workers = runtime.GOMAXPROCS(0)
	}
	if o.queue == 0 {
		o.queue = 32 * o.workers
	}
	o.queue = max(o.queue, 0)
	s := &server{path: path, format: f, admit: make(chan struct{}, o.workers+o.queue), run: make(chan struct{}, o.workers),
		calls: make([]time.Duration, 0, 4096), failed: map[int]int{}}
	l, err := s.load()
	if err != nil {
		return nil, err
	}
	s.cur.Store(l)
	return s, nil
}

// load reads the model file into a new model, beside the current one.
func (s *server) load() (*loaded, error) {
	for range 3 {
		before, err := os.Stat(s.path)
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(s.path)
		if err != nil {
			return nil, err
		}
		m, err := loadModel(s.path, s.format)
		if err != nil {
			return nil, err
		}
		after, err := os.Stat(s.path)
		if err != nil {
			return nil, err
		}
		if !os.SameFile(before, after) || !before.ModTime().Equal(after.ModTime()) || before.Size() != after.Size() {
			continue // replaced while read: the hash may not be of what was loaded
		}
		sum := sha256.Sum256(b)
		return &loaded{m: m, version: fmt.Sprintf("%d-%s", s.loads.Add(1), hex.EncodeToString(sum[:6])), stat: after}, nil
	}
	return nil, fmt.Errorf("%s changed three times while it was read", s.path)
}

// Reload loads the model file again and, if it loads, makes it the
// model of the requests that arrive from now on. A file that does not
// load is an error, and the current model stays.
func (s *server) Reload() (string, error) {
	s.reload.Lock()
	defer s.reload.Unlock()
	if st, err := os.Stat(s.path); err == nil {
		s.tried.Store(&st)
	}
	l, err := s.load()
	s.mu.Lock()
	if err != nil {
		s.reloaded[1]++
	} else {
		s.reloaded[0]++
	}
	s.mu.Unlock()
	if err != nil {
		return "", err
	}
	s.cur.Store(l)
	return l.version, nil
}

// Changed reports whether the model file is not the one last loaded or
// tried (a file replaced, or written since).
func (s *server) Changed() bool {
	st, err := os.Stat(s.path)
	if err != nil {
		return false
	}
	same := func(was os.FileInfo) bool {
		return os.SameFile(st, was) && st.ModTime().Equal(was.ModTime()) && st.Size() == was.Size()
	}
	if tried := s.tried.Load(); tried != nil && same(*tried) {
		return false
	}
	return !same(s.cur.Load().stat)
}

// Version returns the current model's version.
func (s *server) Version() string { return s.cur.Load().version }

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/predict":
		s.predict(w, r)
	case "/reload":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			s.fail(w, http.StatusMethodNotAllowed, "POST /reload")
			return
		}
		v, err := s.Reload()
		if err != nil {
			s.fail(w, http.StatusUnprocessableEntity, fmt.Sprintf("the model stays %s: %v", s.Version(), err))
			return
		}
		s.mu.Lock()
		s.reloads++
		s.mu.Unlock()
		w.Header().Set("Model-Version", v)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"version": v})
	case "/stats", "/metrics":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			s.fail(w, http.StatusMethodNotAllowed, "GET "+r.URL.Path)
			return
		}
		if r.URL.Path == "/stats" {
			s.stats(w)
		} else {
			s.metrics(w)
		}
	default:
		s.fail(w, http.StatusNotFound, fmt.Sprintf("no %s here: POST /predict, POST /reload, GET /stats, GET /metrics", r.URL.Path))
	}
}

func (s *server) predict(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.fail(w, http.StatusMethodNotAllowed, "POST a batch of examples to /predict")
		return
	}
	select {
	case s.admit <- struct{}{}:
		defer func() { <-s.admit }()
	default:
		w.Header().Set("Retry-After", "1") // net/http reads a small unread body after, keeping the connection
		s.fail(w, http.StatusServiceUnavailable, fmt.Sprintf("over capacity: %d requests handled and %d waiting", cap(s.run), cap(s.admit)-cap(s.run)))
		return
	}
	select {
	case s.run <- struct{}{}:
		defer func() { <-s.run }()
	case <-r.Context().Done():
		return // the client left while the request waited
	}
	l := s.cur.Load() // the model of this request, whatever reload comes
	w.Header().Set("Model-Version", l.version)
	maxBody := bodyLimit(l.m.denseIn())
	tooLarge := func() {
		s.fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes, the size of the largest batch (%d examples, %d ids)", maxBody, maxExamples, maxIDs))
	}
	if r.ContentLength > maxBody {
		// Answered before the body is read, so that the client reads
		// the answer rather than an error from its write.
		w.Header().Set("Connection", "close")
		tooLarge()
		return
	}
	body := http.MaxBytesReader(w, r.Body, maxBody)
	binary := r.Header.Get("Content-Type") == binaryType
	var b *batch
	var err error
	if binary {
		b, err = readBinary(body, l.m)
	} else {
		b, err = readJSON(body, l.m)
	}
	if mb := new(http.MaxBytesError); errors.As(err, &mb) {
		tooLarge()
		return
	}
	if err != nil {
		s.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	p := make([]float64, b.n)
	if s.beforeModel != nil {
		s.beforeModel()
	}
	called := time.Now()
	if err := l.m.predict(p, b); err != nil {
		s.fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.record(time.Since(called))
	if binary {
		w.Header().Set("Content-Type", binaryType)
		w.Write(encodeProbabilities(p))
	} else {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(response{Probabilities: p})
	}
	s.observe(time.Since(start))
}

// readJSON reads a JSON request for m. An error is the request's fault
// (400), or wraps the body's *http.MaxBytesError (413).
func readJSON(body io.Reader, m *model) (*batch, error) {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	var req request
	if err := dec.Decode(&req); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty body: POST a JSON batch of examples")
		}
		return nil, fmt.Errorf("reading the request: %w", err)
	}
	if dec.More() {
		return nil, errors.New("reading the request: more than one JSON value")
	}
	return jsonBatch(req.Examples, m)
}

// jsonBatch checks the examples and flattens them for m; an error names
// the field and the value.
func jsonBatch(ex []example, m *model) (*batch, error) {
	if len(ex) == 0 || len(ex) > maxExamples {
		return nil, fmt.Errorf("examples: %d of them, not 1 to %d", len(ex), maxExamples)
	}
	b := &batch{n: len(ex), dense: make([]float32, 0, len(ex)*m.denseIn())}
	ids := 0
	for i, e := range ex {
		if len(e.Features) != features {
			return nil, fmt.Errorf("examples[%d].features: %d bags, not %d (one per feature)", i, len(e.Features), features)
		}
		for f, bag := range e.Features {
			if len(bag) > maxBagIDs {
				return nil, fmt.Errorf("examples[%d].features[%d]: %d ids, over %d", i, f, len(bag), maxBagIDs)
			}
			if ids += len(bag); ids > maxIDs {
				return nil, fmt.Errorf("examples[%d].features[%d]: the request's ids pass %d", i, f, maxIDs)
			}
			if err := checkIDs(bag, m, i, f); err != nil {
				return nil, err
			}
			b.offsets[f] = append(b.offsets[f], int64(len(b.ids[f])))
			b.ids[f] = append(b.ids[f], bag...)
		}
		if len(e.Dense) != m.denseIn() {
			return nil, fmt.Errorf("examples[%d].dense: %d values, not %d", i, len(e.Dense), m.denseIn())
		}
		b.dense = append(b.dense, e.Dense...)
	}
	return b, nil
}

// checkIDs checks that bag, feature f's of example i, names rows of its
// table.
func checkIDs(bag []int64, m *model, i, f int) error {
	vocab := int64(m.tables[f].Rows())
	if k := slices.IndexFunc(bag, func(id int64) bool { return id < 0 || id >= vocab }); k >= 0 {
		return fmt.Errorf("examples[%d].features[%d][%d] = %d: feature %d's ids lie in [0, %d)", i, f, k, bag[k], f, vocab)
	}
	return nil
}

// record adds a model call's time to the ring.
func (s *server) record(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count++
	if len(s.calls) < cap(s.calls) {
		s.calls = append(s.calls, d)
		return
	}
	s.calls[s.next] = d
	s.next = (s.next + 1) % len(s.calls)
}

// observe adds an answered request's time, arrival to answer, to the
// histogram.
func (s *server) observe(d time.Duration) {
	sec := d.Seconds()
	k, _ := slices.BinarySearch(latencyBuckets[:], sec)
	s.mu.Lock()
	s.hist[k]++
	s.histSum += sec
	s.mu.Unlock()
}

// stats answers the number of requests answered 200 ("requests"), of
// those answered otherwise by status ("failed"), the median and 99th
// percentile of the last model calls in milliseconds, and the model's
// version.
func (s *server) stats(w http.ResponseWriter) {
	s.mu.Lock()
	calls := slices.Clone(s.calls)
	n := s.count
	failed := map[string]int{}
	for code, k := range s.failed {
		failed[strconv.Itoa(code)] = k
	}
	s.mu.Unlock()
	slices.Sort(calls)
	q := func(p float64) float64 {
		if len(calls) == 0 {
			return 0
		}
		return calls[int(p*float64(len(calls)-1))].Seconds() * 1000
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"requests": n, "failed": failed, "model_p50_ms": q(0.5), "model_p99_ms": q(0.99), "version": s.Version()})
}

// metrics answers in Prometheus's text format (version 0.0.4): requests
// by status, the histogram of /predict's time, the requests waiting for
// a worker, reloads, and the model's version.
func (s *server) metrics(w http.ResponseWriter) {
	s.mu.Lock()
	codes := map[int]int{http.StatusOK: s.count + s.reloads}
	for c, k := range s.failed {
		codes[c] = k
	}
	hist, sum, reloaded := s.hist, s.histSum, s.reloaded
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	fmt.Fprint(w, "# HELP serve_requests_total Requests answered, by status (GET /stats and /metrics are counted only when refused).\n# TYPE serve_requests_total counter\n")
	for _, c := range slices.Sorted(func(yield func(int) bool) {
		for c := range codes {
			if !yield(c) {
				return
			}
		}
	}) {
		fmt.Fprintf(w, "serve_requests_total{code=\"%d\"} %d\n", c, codes[c])
	}
	fmt.Fprint(w, "# HELP serve_predict_seconds Time from a /predict request's arrival to its answer, of those answered 200.\n# TYPE serve_predict_seconds histogram\n")
	var cum int64
	for k, le := range latencyBuckets {
		cum += hist[k]
		fmt.Fprintf(w, "serve_predict_seconds_bucket{le=\"%g\"} %d\n", le, cum)
	}
	cum += hist[len(latencyBuckets)]
	fmt.Fprintf(w, "serve_predict_seconds_bucket{le=\"+Inf\"} %d\nserve_predict_seconds_sum %g\nserve_predict_seconds_count %d\n", cum, sum, cum)
	fmt.Fprintf(w, "# HELP serve_queue_depth Requests waiting for a worker.\n# TYPE serve_queue_depth gauge\nserve_queue_depth %d\n", max(0, len(s.admit)-len(s.run)))
	fmt.Fprintf(w, "# HELP serve_reloads_total Reloads of the model file, by result.\n# TYPE serve_reloads_total counter\n"+
		"serve_reloads_total{result=\"ok\"} %d\nserve_reloads_total{result=\"failed\"} %d\n", reloaded[0], reloaded[1])
	fmt.Fprintf(w, "# HELP serve_model_info The model answering, by version.\n# TYPE serve_model_info gauge\nserve_model_info{version=%q} 1\n", s.Version())
}

// fail answers a request with code and msg, and counts it.
func (s *server) fail(w http.ResponseWriter, code int, msg string) {
	s.mu.Lock()
	s.failed[code]++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
