package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/gathergrad/gather/serve"
	"github.com/gathergrad/gather/serve/live"
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

// options configure a server.
type options struct {
	workers int // requests handled at once; 0 means GOMAXPROCS
	queue   int // requests waiting for a worker beyond those; 0 means 32 a worker, -1 none
}

// A server answers POST /predict with the model's probabilities, POST
// /reload by loading its model file again, GET /stats with its counts and
// the time of its model calls, and GET /metrics with the same in
// Prometheus's text format. It holds a model at a time (live.Holder): a
// request is answered by the model that was current when it arrived,
// whatever reload comes meanwhile, and its answer says which (the
// Model-Version header).
type server struct {
	*live.Holder[*model]
	gate    *live.Gate
	metrics *live.Metrics

	lags lags // the deltas' (-deltas)

	// beforeModel, if set, runs before each model call (tests).
	beforeModel func()
}

// newServer returns a server of the model at path, its tables in format
// f.
func newServer(path string, f serve.Format, o options) (*server, error) {
	h, err := live.NewHolder(path, func(path string) (*model, error) { return loadModel(path, f) })
	if err != nil {
		return nil, err
	}
	gate := live.NewGate(o.workers, o.queue)
	gate.ExtendWhile(h.Busy) // a reload's or a delta's work does not turn requests away
	return &server{Holder: h, gate: gate, metrics: live.NewMetrics()}, nil
}

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
		s.metrics.Count(http.StatusOK)
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
			s.writeMetrics(w)
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
	leave, err := s.gate.Enter(r.Context())
	if errors.Is(err, live.ErrFull) {
		w.Header().Set("Retry-After", "1") // net/http reads a small unread body after, keeping the connection
		s.fail(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if err != nil {
		return // the client left while the request waited
	}
	defer leave()
	l := s.Current() // the model of this request, whatever reload comes
	w.Header().Set("Model-Version", l.Version)
	maxBody := bodyLimit(l.Model.denseIn())
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
	if binary {
		b, err = readBinary(body, l.Model)
	} else {
		b, err = readJSON(body, l.Model)
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
	if err := l.Model.predict(p, b); err != nil {
		s.fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.metrics.Call(time.Since(called))
	s.metrics.Count(http.StatusOK)
	if binary {
		w.Header().Set("Content-Type", binaryType)
		w.Write(encodeProbabilities(p))
	} else {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(response{Probabilities: p})
	}
	s.metrics.Observe(time.Since(start))
}

// readJSON reads a JSON request for m: a body of the request's exact
// shape through fastBatch, any other through encoding/json. An error is
// the request's fault (400), or wraps the body's *http.MaxBytesError
// (413).
func readJSON(body io.Reader, m *model) (*batch, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("reading the request: %w", err)
	}
	if fast, ok := fastBatch(b, m); ok {
		return fast, nil
	}
	return decodeJSON(b, m)
}

// decodeJSON reads a JSON request for m with encoding/json.
func decodeJSON(b []byte, m *model) (*batch, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
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

// stats answers the number of requests answered 200 by the model
// ("requests"), of those answered otherwise by status ("failed"), the
// median and 99th percentile of the last model calls in milliseconds,
// and the model's version.
func (s *server) stats(w http.ResponseWriter) {
	failed := map[string]int64{}
	for code, k := range s.metrics.Counts() {
		if code != http.StatusOK {
			failed[strconv.Itoa(code)] = k
		}
	}
	n, q := s.metrics.Calls(0.5, 0.99)
	ms := func(d time.Duration) float64 { return d.Seconds() * 1000 }
	w.Header().Set("Content-Type", "application/json")
	applied, refused := s.Updates()
	json.NewEncoder(w).Encode(map[string]any{"requests": n, "failed": failed, "model_p50_ms": ms(q[0]), "model_p99_ms": ms(q[1]), "version": s.Version(),
		"deltas_applied": applied, "deltas_refused": refused, "delta_lag_p99_ms": ms(s.lags.p99())})
}

// metrics answers in Prometheus's text format (version 0.0.4): requests
// by status (GET /stats and /metrics counted only when refused), the
// histogram of /predict's time, the requests waiting for a worker,
// reloads, and the model's version.
func (s *server) writeMetrics(w http.ResponseWriter) {
	ok, failed := s.Reloads()
	applied, refused := s.Updates()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.metrics.WriteText(w, "serve_requests_total", "serve_predict_seconds",
		live.Family{Name: "serve_queue_depth", Type: "gauge", Help: "Requests waiting for a worker.", Samples: []live.Sample{{Value: float64(s.gate.Waiting())}}},
		live.Family{Name: "serve_reloads_total", Type: "counter", Help: "Reloads of the model file, by result.",
			Samples: []live.Sample{{Labels: `{result="ok"}`, Value: float64(ok)}, {Labels: `{result="failed"}`, Value: float64(failed)}}},
		live.Family{Name: "serve_deltas_total", Type: "counter", Help: "Deltas of the model applied, by result (-deltas).",
			Samples: []live.Sample{{Labels: `{result="applied"}`, Value: float64(applied)}, {Labels: `{result="refused"}`, Value: float64(refused)}}},
		live.Family{Name: "serve_delta_lag_seconds", Type: "gauge", Help: "The 99th percentile of the last deltas' lag, from training to serving.",
			Samples: []live.Sample{{Labels: `{quantile="0.99"}`, Value: s.lags.p99().Seconds()}}},
		live.Family{Name: "serve_model_info", Type: "gauge", Help: "The model answering, by version.",
			Samples: []live.Sample{{Labels: fmt.Sprintf("{version=%q}", s.Version()), Value: 1}}})
}

// fail answers a request with code and msg, and counts it.
func (s *server) fail(w http.ResponseWriter, code int, msg string) {
	s.metrics.Count(code)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
