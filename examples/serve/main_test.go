package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/serve"
)

var testVocab = [features]int{500, 50, 5}

// writeModel writes a click model of random weights in the layout
// examples/distributed -save writes, and returns its path and tensors.
func writeModel(t testing.TB) (string, map[string][]float32) {
	path := filepath.Join(t.TempDir(), "click.safetensors")
	return path, writeModelTo(t, path, 1)
}

// writeModelTo writes the model of seed to path (atomically) and returns
// its tensors.
func writeModelTo(t testing.TB, path string, seed uint64) map[string][]float32 {
	r := rand.New(rand.NewPCG(seed, 2))
	vals := map[string][]float32{}
	ts := map[string]tensor.Tensor{}
	add := func(name string, shape ...int) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * 0.5)
		}
		vals[name] = v
		ts[name] = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
	}
	for f, n := range testVocab {
		add(fmt.Sprintf("feature%d.weight", f), n, 8)
	}
	add("dense.weight", 16, 4)
	add("dense.bias", 16)
	add("top1.weight", 32, 3*8+16)
	add("top1.bias", 32)
	add("top2.weight", 1, 32)
	add("top2.bias", 1)
	if err := checkpoint.Write(path, ts, nil); err != nil {
		t.Fatal(err)
	}
	return vals
}

// newTestServer is newServer, failing t on error.
func newTestServer(t testing.TB, path string, f serve.Format, o options) *server {
	s, err := newServer(path, f, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// reference scores one example in float64 from the float32 weights.
func reference(v map[string][]float32, e example) float64 {
	var z []float64
	for f, bag := range e.Features {
		for j := range 8 {
			s := 0.0
			for _, id := range bag {
				s += float64(v[fmt.Sprintf("feature%d.weight", f)][int(id)*8+j])
			}
			if len(bag) > 0 {
				s /= float64(len(bag))
			}
			z = append(z, s)
		}
	}
	layer := func(name string, in []float64, relu bool) []float64 {
		w, b := v[name+".weight"], v[name+".bias"]
		out := make([]float64, len(b))
		for o := range out {
			s := float64(b[o])
			for j, x := range in {
				s += float64(w[o*len(in)+j]) * x
			}
			if relu {
				s = max(s, 0)
			}
			out[o] = s
		}
		return out
	}
	var d []float64
	for _, x := range e.Dense {
		d = append(d, float64(x))
	}
	h := layer("top1", append(z, layer("dense", d, true)...), true)
	return 1 / (1 + math.Exp(-layer("top2", h, false)[0]))
}

func randomExamples(r *rand.Rand, n int) []example {
	ex := make([]example, n)
	for i := range ex {
		for _, v := range testVocab {
			bag := make([]int64, r.IntN(5)) // empty bags too
			for k := range bag {
				bag[k] = r.Int64N(int64(v))
			}
			ex[i].Features = append(ex[i].Features, bag)
		}
		for range 4 {
			ex[i].Dense = append(ex[i].Dense, float32(r.NormFloat64()))
		}
	}
	return ex
}

func post(t testing.TB, url string, body []byte) (int, []byte) {
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// Through a real HTTP client, 8 goroutines at once: the probabilities
// are the model's (float32 tables to float32 rounding, 8-bit within
// 0.02), and /stats counts the requests.
func TestPredict(t *testing.T) {
	path, vals := writeModel(t)
	for _, c := range []struct {
		f   serve.Format
		tol float64
	}{{serve.Float32, 1e-5}, {serve.Int8, 0.02}} {
		ts := httptest.NewServer(newTestServer(t, path, c.f, options{}))
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 3))
				for range 5 {
					ex := randomExamples(r, 64)
					body, _ := json.Marshal(request{Examples: ex})
					code, out := post(t, ts.URL+"/predict", body)
					var resp response
					if code != http.StatusOK || json.Unmarshal(out, &resp) != nil || len(resp.Probabilities) != len(ex) {
						t.Errorf("%v: %d %s", c.f, code, out)
						return
					}
					for i, e := range ex {
						if want := reference(vals, e); math.Abs(resp.Probabilities[i]-want) > c.tol {
							t.Errorf("%v: example %d: %v, want %v", c.f, i, resp.Probabilities[i], want)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		resp, err := http.Get(ts.URL + "/stats")
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Requests int     `json:"requests"`
			P50      float64 `json:"model_p50_ms"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || st.Requests != 40 || st.P50 <= 0 {
			t.Fatalf("stats: %+v, %v", st, err)
		}
		resp.Body.Close()
		ts.Close()
	}
}

// Bad requests are answered 400 (or 405, 413, 404) with a message naming
// the field, and the server goes on answering.
func TestBadRequests(t *testing.T) {
	path, _ := writeModel(t)
	srv := newTestServer(t, path, serve.Int4, options{})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	ok := `{"features": [[1], [2], [3]], "dense": [0, 0, 0, 0]}`
	maxBody := bodyLimit(4)
	limit := fmt.Sprintf("over %d bytes", maxBody)
	for _, c := range []struct {
		body string
		code int
		want string
	}{
		{`{"examples": [` + ok + `]}`, 200, "probabilities"},
		{`{"examples": [{"features": [[1], [2], [5]], "dense": [0, 0, 0, 0]}]}`, 400, "examples[0].features[2][0] = 5: feature 2's ids lie in [0, 5)"},
		{`{"examples": [` + ok + `, {"features": [[1, -1], [2], [3]], "dense": [0, 0, 0, 0]}]}`, 400, "examples[1].features[0][1] = -1"},
		{`{"examples": [{"features": [[1], [2]], "dense": [0, 0, 0, 0]}]}`, 400, "examples[0].features: 2 bags, not 3"},
		{`{"examples": [{"features": [[1], [2], [3]], "dense": [0, 0]}]}`, 400, "examples[0].dense: 2 values, not 4"},
		{`{"examples": [{"features": [[1], [2], [3]], "dense": [0, 0, 0, 0], "extra": 1}]}`, 400, `unknown field "extra"`},
		{`{"examples": [{"features": [["a"], [2], [3]], "dense": [0, 0, 0, 0]}]}`, 400, "features"}, // encoding/json's words vary by Go version
		{`{"examples": []}`, 400, "examples: 0 of them"},
		{`{"examples": [` + ok + `]} {}`, 400, "more than one JSON value"},
		{`{"examples": [`, 400, "reading the request"},
		{`{"examples": [{"features": [[` + strings.Repeat("1,", 2000) + `1], [2], [3]], "dense": [0, 0, 0, 0]}]}`, 400, "examples[0].features[0]: 2001 ids, over 1024"},
		{`{"examples": [` + strings.Repeat(ok+",", 4096) + ok + `]}`, 400, "examples: 4097 of them"},
		{`{"examples": "` + strings.Repeat("x", int(maxBody)) + `"}`, 413, limit},
		{``, 400, "empty body"},
		{`{"examples": [` + strings.Repeat(`{"features": [[`+strings.Repeat("1,", 1000)+`1], [2], [3]], "dense": [0, 0, 0, 0]},`, 66) + ok + `]}`, 400, "examples[65].features[0]: the request's ids pass 65536"},
	} {
		code, out := post(t, ts.URL+"/predict", []byte(c.body))
		var msg struct{ Error string }
		if code != 200 && json.Unmarshal(out, &msg) == nil {
			out = []byte(msg.Error)
		}
		if code != c.code || !strings.Contains(string(out), c.want) {
			t.Errorf("%.60s: %d %s, want %d naming %q", c.body, code, out, c.code, c.want)
		}
	}
	resp, err := http.Get(ts.URL + "/predict")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /predict: %d", resp.StatusCode)
	}
	if code, _ := post(t, ts.URL+"/stats", []byte("{}")); code != http.StatusMethodNotAllowed {
		t.Fatalf("POST /stats: %d, want 405", code)
	}

	// A body four times the limit, its length given: the client reads
	// the 413, with no error from its write.
	code, out := post(t, ts.URL+"/predict", bytes.Repeat([]byte(" "), 4*int(maxBody)))
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(string(out), limit) {
		t.Fatalf("an oversized body: %d %s", code, out)
	}

	// A client that asks before sending its body (Expect: 100-continue,
	// as curl does for a large one) gets the 413 without sending it.
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", 1<<30)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(status, "413") {
		t.Fatalf("a 1 GB body announced: the server answered %q (%v), want 413 before the body", status, err)
	}

	// /stats counts the failed requests, by status.
	resp, err = http.Get(ts.URL + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Requests int            `json:"requests"`
		Failed   map[string]int `json:"failed"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.Requests != 1 || st.Failed["400"] != 13 || st.Failed["413"] != 3 || st.Failed["405"] != 2 {
		t.Fatalf("/stats: %+v, want 1 answered, 13 400s, 3 413s, 2 405s", st)
	}
}

// The body limit admits the largest batch within the request limits,
// written as encoding/json writes it, with the longest ids and values.
func TestBodyLimitFitsLargestBatch(t *testing.T) {
	const dense = 4
	ex := make([]example, maxExamples)
	left := maxIDs
	for i := range ex {
		ex[i].Features = make([][]int64, features)
		for f := range features {
			n := min(maxBagIDs, left/((maxExamples-i)*features-f))
			left -= n
			bag := make([]int64, n)
			for k := range bag {
				bag[k] = math.MinInt64
			}
			ex[i].Features[f] = bag
		}
		ex[i].Dense = make([]float32, dense)
		for k := range ex[i].Dense {
			ex[i].Dense[k] = -math.SmallestNonzeroFloat32 * 3
		}
	}
	if left != 0 {
		t.Fatalf("%d ids left over", left)
	}
	b, err := json.Marshal(request{Examples: ex})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) > bodyLimit(dense) {
		t.Fatalf("the largest batch takes %d bytes, over the limit of %d", len(b), bodyLimit(dense))
	}
	t.Logf("the largest batch takes %d bytes of %d", len(b), bodyLimit(dense))
}

// A file that is not such a model is an error naming it and the tensor.
func TestLoadMismatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.safetensors")
	ts := map[string]tensor.Tensor{"feature0.weight": tensor.New(tensor.WithShape(4, 2), tensor.WithBacking(make([]float32, 8)))}
	if err := checkpoint.Write(path, ts, nil); err != nil {
		t.Fatal(err)
	}
	_, err := loadModel(path, serve.Int8)
	if !errors.Is(err, checkpoint.ErrMismatch) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `"feature1.weight"`) {
		t.Fatalf("want ErrMismatch naming the file and feature1.weight, got %v", err)
	}
}

// FuzzPredict posts any body: the answer is 200, 400 or 413, never a
// crash or a 500.
func FuzzPredict(f *testing.F) {
	path, _ := writeModel(f)
	s := newTestServer(f, path, serve.Int8, options{})
	f.Add([]byte(`{"examples": [{"features": [[1], [2], [3]], "dense": [0, 0, 0, 0]}]}`))
	f.Add([]byte(`{"examples": [{"features": [[1e30], [2], [3]], "dense": [1e39, 0, 0, 0]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/predict", bytes.NewReader(body)))
		if w.Code != 200 && w.Code != 400 && w.Code != 413 {
			t.Fatalf("%q: %d %s", body, w.Code, w.Body)
		}
	})
}
