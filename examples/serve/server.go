package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
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
// fits and a body past it is refused before it is read.
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

// A server answers POST /predict with the model's probabilities and GET
// /stats with its counts and the time of its model calls.
type server struct {
	m       *model
	maxBody int64
	mu      sync.Mutex
	calls   []time.Duration // the last len(calls) model calls' times, a ring
	next    int
	count   int         // requests answered 200
	failed  map[int]int // requests answered otherwise, by status
}

func newServer(m *model) *server {
	return &server{m: m, maxBody: bodyLimit(m.denseIn()), calls: make([]time.Duration, 0, 4096), failed: map[int]int{}}
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/predict":
		s.predict(w, r)
	case "/stats":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			s.fail(w, http.StatusMethodNotAllowed, "GET /stats")
			return
		}
		s.stats(w)
	default:
		s.fail(w, http.StatusNotFound, fmt.Sprintf("no %s here: POST /predict, GET /stats", r.URL.Path))
	}
}

func (s *server) predict(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.fail(w, http.StatusMethodNotAllowed, "POST a JSON batch of examples to /predict")
		return
	}
	tooLarge := fmt.Sprintf("the body is over %d bytes, the size of the largest batch (%d examples, %d ids)", s.maxBody, maxExamples, maxIDs)
	if r.ContentLength > s.maxBody {
		// Answered before the body is read, so that the client reads
		// the answer rather than an error from its write.
		w.Header().Set("Connection", "close")
		s.fail(w, http.StatusRequestEntityTooLarge, tooLarge)
		return
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.maxBody))
	dec.DisallowUnknownFields()
	var req request
	if err := dec.Decode(&req); err != nil {
		if mb := new(http.MaxBytesError); errors.As(err, &mb) {
			s.fail(w, http.StatusRequestEntityTooLarge, tooLarge)
			return
		}
		if errors.Is(err, io.EOF) {
			s.fail(w, http.StatusBadRequest, "empty body: POST a JSON batch of examples")
			return
		}
		s.fail(w, http.StatusBadRequest, "reading the request: "+err.Error())
		return
	}
	if dec.More() {
		s.fail(w, http.StatusBadRequest, "reading the request: more than one JSON value")
		return
	}
	b, err := s.batch(req.Examples)
	if err != nil {
		s.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	p := make([]float64, b.n)
	start := time.Now()
	if err := s.m.predict(p, b); err != nil {
		s.fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.record(time.Since(start))
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(response{Probabilities: p})
}

// batch checks the examples and flattens them for the model; an error
// names the field and the value.
func (s *server) batch(ex []example) (*batch, error) {
	if len(ex) == 0 || len(ex) > maxExamples {
		return nil, fmt.Errorf("examples: %d of them, not 1 to %d", len(ex), maxExamples)
	}
	b := &batch{n: len(ex), dense: make([]float32, 0, len(ex)*s.m.denseIn())}
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
			vocab := int64(s.m.tables[f].Rows())
			if k := slices.IndexFunc(bag, func(id int64) bool { return id < 0 || id >= vocab }); k >= 0 {
				return nil, fmt.Errorf("examples[%d].features[%d][%d] = %d: feature %d's ids lie in [0, %d)", i, f, k, bag[k], f, vocab)
			}
			b.offsets[f] = append(b.offsets[f], int64(len(b.ids[f])))
			b.ids[f] = append(b.ids[f], bag...)
		}
		if len(e.Dense) != s.m.denseIn() {
			return nil, fmt.Errorf("examples[%d].dense: %d values, not %d", i, len(e.Dense), s.m.denseIn())
		}
		b.dense = append(b.dense, e.Dense...)
	}
	return b, nil
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

// stats answers the number of requests answered 200 ("requests"), of
// those answered otherwise by status ("failed"), and the median and 99th
// percentile of the last model calls, in milliseconds.
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
	json.NewEncoder(w).Encode(map[string]any{"requests": n, "failed": failed, "model_p50_ms": q(0.5), "model_p99_ms": q(0.99)})
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
