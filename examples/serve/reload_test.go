package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gathergrad/gather/serve"
)

// postAs posts body with content type ct and returns the status, the
// probabilities (JSON or binary) and the model version of the answer.
func postAs(client *http.Client, url, ct string, body []byte) (int, []float64, string, error) {
	resp, err := client.Post(url, ct, bytes.NewReader(body))
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, "", err
	}
	v := resp.Header.Get("Model-Version")
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil, v, fmt.Errorf("%s", out)
	}
	if ct == binaryType {
		p := make([]float64, len(out)/8)
		for k := range p {
			p[k] = math.Float64frombits(binary.LittleEndian.Uint64(out[8*k:]))
		}
		return resp.StatusCode, p, v, nil
	}
	var r response
	err = json.Unmarshal(out, &r)
	return resp.StatusCode, r.Probabilities, v, err
}

// A binary request is answered with the JSON request's probabilities,
// bit for bit, by the same model version.
func TestBinaryEqualsJSON(t *testing.T) {
	path, _ := writeModel(t)
	for _, f := range []serve.Format{serve.Float32, serve.Int4} {
		ts := httptest.NewServer(newTestServer(t, path, f, options{}))
		r := rand.New(rand.NewPCG(4, 5))
		for _, n := range []int{1, 7, 300} {
			ex := randomExamples(r, n)
			js, _ := json.Marshal(request{Examples: ex})
			c1, p1, v1, err1 := postAs(http.DefaultClient, ts.URL+"/predict", "application/json", js)
			c2, p2, v2, err2 := postAs(http.DefaultClient, ts.URL+"/predict", binaryType, encodeBinary(ex))
			if c1 != 200 || c2 != 200 || err1 != nil || err2 != nil || v1 == "" || v1 != v2 || len(p1) != n || len(p2) != n {
				t.Fatalf("%v, %d examples: %d %v %q, %d %v %q", f, n, c1, err1, v1, c2, err2, v2)
			}
			for i := range p1 {
				if math.Float64bits(p1[i]) != math.Float64bits(p2[i]) {
					t.Fatalf("%v: example %d: JSON %v, binary %v", f, i, p1[i], p2[i])
				}
			}
		}
		// The binary path's errors name the field as the JSON path's do.
		bad := randomExamples(r, 3)
		bad[2].Features[1] = []int64{3, 77}
		code, _, _, err := postAs(http.DefaultClient, ts.URL+"/predict", binaryType, encodeBinary(bad))
		if code != 400 || err == nil || !strings.Contains(err.Error(), "examples[2].features[1][1] = 77") {
			t.Fatalf("a bad id: %d %v", code, err)
		}
		bad[2].Features[1] = []int64{3}
		for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			bad[1].Dense[3] = float32(v)
			code, _, _, err := postAs(http.DefaultClient, ts.URL+"/predict", binaryType, encodeBinary(bad))
			if want := fmt.Sprintf("examples[1].dense[3] = %v is not a finite number", v); code != 400 || err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("a dense value %v: %d %v, want 400 naming %q", v, code, err, want)
			}
		}
		code, _, _, err = postAs(http.DefaultClient, ts.URL+"/predict", binaryType, encodeBinary(bad)[:40])
		if code != 400 || err == nil || !strings.Contains(err.Error(), "bytes") {
			t.Fatalf("a short body: %d %v", code, err)
		}
		ts.Close()
	}
}

// FuzzPredictBinary posts any binary body: 200, 400 or 413, never a
// crash or a 500; a body answered 200 is answered alike as JSON.
func FuzzPredictBinary(f *testing.F) {
	path, _ := writeModel(f)
	s := newTestServer(f, path, serve.Int8, options{})
	r := rand.New(rand.NewPCG(1, 1))
	f.Add(encodeBinary(randomExamples(r, 2)))
	f.Add(encodeBinary(randomExamples(r, 1))[:20])
	f.Add([]byte(binaryMagic + "\x01\x00\x00\x00\x03\x00\x00\x00\x04\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/predict", bytes.NewReader(body))
		req.Header.Set("Content-Type", binaryType)
		s.ServeHTTP(w, req)
		if w.Code != 200 && w.Code != 400 && w.Code != 413 {
			t.Fatalf("%q: %d %s", body, w.Code, w.Body)
		}
		if w.Code != 200 {
			return
		}
		b, err := decodeBinary(body, s.Current().Model)
		if err != nil {
			t.Fatal(err)
		}
		ex := make([]example, b.n)
		for i := range ex {
			for f := range features {
				end := int64(len(b.ids[f]))
				if i+1 < b.n {
					end = b.offsets[f][i+1]
				}
				ex[i].Features = append(ex[i].Features, append([]int64{}, b.ids[f][b.offsets[f][i]:end]...))
			}
			ex[i].Dense = b.dense[i*4 : (i+1)*4]
		}
		js, err := json.Marshal(request{Examples: ex})
		if err != nil {
			t.Fatalf("a body answered 200 holds what JSON cannot carry: %v", err) // NaN or infinity
		}
		jw := httptest.NewRecorder()
		s.ServeHTTP(jw, httptest.NewRequest(http.MethodPost, "/predict", bytes.NewReader(js)))
		var resp response
		if jw.Code != 200 || json.Unmarshal(jw.Body.Bytes(), &resp) != nil || !bytes.Equal(encodeProbabilities(resp.Probabilities), w.Body.Bytes()) {
			t.Fatalf("JSON: %d %s; binary %x", jw.Code, jw.Body, w.Body.Bytes())
		}
	})
}

// Under load from 4 clients (JSON and binary), the model file is replaced
// and reloaded 100 times, alternating two models: every request is
// answered 200, by one model whole (its answers equal that model's to
// float32 rounding, for the version its header names), and both models
// answer.
func TestReloadUnderLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "click.safetensors")
	vals := [2]map[string][]float32{writeModelTo(t, filepath.Join(dir, "a"), 1), writeModelTo(t, filepath.Join(dir, "b"), 9)}
	files := [2][]byte{}
	for k, name := range []string{"a", "b"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		files[k] = b
	}
	replace := func(k int) {
		tmp := filepath.Join(dir, "next")
		if err := os.WriteFile(tmp, files[k], 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	replace(0)
	s := newTestServer(t, path, serve.Float32, options{})
	ts := httptest.NewServer(s)
	defer ts.Close()
	ex := randomExamples(rand.New(rand.NewPCG(7, 7)), 32)
	var want [2][]float64
	for k := range want {
		for _, e := range ex {
			want[k] = append(want[k], reference(vals[k], e))
		}
	}
	js, _ := json.Marshal(request{Examples: ex})
	bodies := map[string][]byte{"application/json": js, binaryType: encodeBinary(ex)}
	var versions sync.Map // version -> model 0 or 1, told by its answers
	var answered, failed, mixed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			ct := "application/json"
			if c%2 == 1 {
				ct = binaryType
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, p, v, err := postAs(http.DefaultClient, ts.URL+"/predict", ct, bodies[ct])
				if code != 200 || err != nil {
					failed.Add(1)
					t.Errorf("%s: %d %v", ct, code, err)
					continue
				}
				answered.Add(1)
				k := -1
				for m := range want {
					if near(p, want[m]) {
						k = m
					}
				}
				if prev, loaded := versions.LoadOrStore(v, k); k < 0 || (loaded && prev.(int) != k) {
					mixed.Add(1)
					t.Errorf("version %s: answers of model %d (earlier %v): %v", v, k, prev, p[:3])
				}
			}
		})
	}
	for n := range 100 {
		replace((n + 1) % 2)
		resp, err := http.Post(ts.URL+"/reload", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("reload %d: %d", n, resp.StatusCode)
		}
		time.Sleep(2 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	seen := map[int]bool{}
	versions.Range(func(_, k any) bool { seen[k.(int)] = true; return true })
	if failed.Load() != 0 || mixed.Load() != 0 || !seen[0] || !seen[1] || answered.Load() < 100 {
		t.Fatalf("%d answered, %d failed, %d mixed, models seen %v", answered.Load(), failed.Load(), mixed.Load(), seen)
	}
	t.Logf("%d requests answered over 100 reloads, 0 failed, 0 mixed", answered.Load())
}

func near(p, want []float64) bool {
	if len(p) != len(want) {
		return false
	}
	for i := range p {
		if math.Abs(p[i]-want[i]) > 1e-5 {
			return false
		}
	}
	return true
}

// A model file that does not load leaves the old model answering: the
// reload is answered 422 naming the error and the version kept, and
// /metrics counts it.
func TestBadReload(t *testing.T) {
	path, _ := writeModel(t)
	s := newTestServer(t, path, serve.Int8, options{})
	ts := httptest.NewServer(s)
	defer ts.Close()
	before := s.Version()
	if err := os.WriteFile(path, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !s.Changed() {
		t.Fatal("a rewritten file is not Changed")
	}
	code, out := post(t, ts.URL+"/reload", nil)
	if code != http.StatusUnprocessableEntity || !strings.Contains(string(out), "the model stays "+before) || !strings.Contains(string(out), path) {
		t.Fatalf("a bad reload: %d %s", code, out)
	}
	if s.Changed() {
		t.Fatal("the file that failed is Changed still: a watch would retry it every tick")
	}
	body, _ := json.Marshal(request{Examples: randomExamples(rand.New(rand.NewPCG(1, 1)), 2)})
	c, p, v, err := postAs(http.DefaultClient, ts.URL+"/predict", "application/json", body)
	if c != 200 || err != nil || v != before || len(p) != 2 {
		t.Fatalf("after a bad reload: %d %v %q", c, err, v)
	}
	m := getMetrics(t, ts.URL)
	if m[`serve_reloads_total{result="failed"}`] != 1 || m[`serve_reloads_total{result="ok"}`] != 0 || m[`serve_model_info{version="`+before+`"}`] != 1 ||
		m[`serve_requests_total{code="422"}`] != 1 || m[`serve_requests_total{code="200"}`] != 1 {
		t.Fatalf("/metrics: %v", m)
	}
	// A /reload that works is a request answered 200.
	writeModelTo(t, path, 2)
	if code, out := post(t, ts.URL+"/reload", nil); code != 200 {
		t.Fatalf("a good reload: %d %s", code, out)
	}
	if m := getMetrics(t, ts.URL); m[`serve_requests_total{code="200"}`] != 2 || m[`serve_reloads_total{result="ok"}`] != 1 {
		t.Fatalf("/metrics after a good reload: %v", m)
	}
}

// getMetrics returns /metrics' samples by name and labels.
func getMetrics(t *testing.T, url string) map[string]float64 {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("/metrics' type %q", ct)
	}
	b, _ := io.ReadAll(resp.Body)
	m := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		k := strings.LastIndexByte(line, ' ')
		var v float64
		if _, err := fmt.Sscan(line[k+1:], &v); err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		m[line[:k]] = v
	}
	return m
}

// Past its workers and queue, the server answers 503 with Retry-After at
// once, and every request is answered: those admitted 200 once the model
// runs again. /metrics counts both and the queue.
func TestOverload(t *testing.T) {
	path, _ := writeModel(t)
	s := newTestServer(t, path, serve.Int8, options{workers: 1, queue: 2})
	hold := make(chan struct{})
	s.beforeModel = func() { <-hold }
	ts := httptest.NewServer(s)
	defer ts.Close()
	defer close(hold) // first, so that Close finds no handler waiting
	body, _ := json.Marshal(request{Examples: randomExamples(rand.New(rand.NewPCG(1, 1)), 4)})
	codes := make(chan int, 8)
	for range 3 { // one runs (and waits in the model), two queue
		go func() {
			resp, err := http.Post(ts.URL+"/predict", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				codes <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); s.gate.Admitted() < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests admitted, want 3", s.gate.Admitted())
		}
	}
	if m := getMetrics(t, ts.URL); m["serve_queue_depth"] != 2 {
		t.Fatalf("queue depth %v, want 2", m["serve_queue_depth"])
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for range 5 {
		start := time.Now()
		resp, err := client.Post(ts.URL+"/predict", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("over capacity: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || time.Since(start) > 5*time.Second {
			t.Fatalf("over capacity: %d, Retry-After %q, after %v", resp.StatusCode, resp.Header.Get("Retry-After"), time.Since(start))
		}
	}
	for range 3 {
		hold <- struct{}{}
	}
	for range 3 {
		if c := <-codes; c != 200 {
			t.Fatalf("an admitted request: %d", c)
		}
	}
	m := getMetrics(t, ts.URL)
	if m[`serve_requests_total{code="503"}`] != 5 || m[`serve_requests_total{code="200"}`] != 3 || m["serve_predict_seconds_count"] != 3 || m["serve_queue_depth"] != 0 {
		t.Fatalf("/metrics: %v", m)
	}
}

// Shutdown stops taking requests and returns once the one in flight is
// answered, 200.
func TestShutdownDrains(t *testing.T) {
	path, _ := writeModel(t)
	s := newTestServer(t, path, serve.Int8, options{})
	started, hold := make(chan struct{}), make(chan struct{})
	s.beforeModel = func() { close(started); <-hold }
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s}
	go srv.Serve(l)
	body, _ := json.Marshal(request{Examples: randomExamples(rand.New(rand.NewPCG(1, 1)), 4)})
	code := make(chan int, 1)
	go func() {
		c, _, _, err := postAs(http.DefaultClient, "http://"+l.Addr().String()+"/predict", "application/json", body)
		if err != nil {
			t.Error(err)
		}
		code <- c
	}()
	<-started
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with a request in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(hold)
	if c := <-code; c != 200 {
		t.Fatalf("the request in flight: %d", c)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + l.Addr().String() + "/stats"); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("a request after Shutdown: %v", err)
	}
}

// encodeBinary writes examples as a binary request; its dense width is
// that of the first example.
func encodeBinary(ex []example) []byte {
	dense := 0
	if len(ex) > 0 {
		dense = len(ex[0].Dense)
	}
	b := []byte(binaryMagic)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ex)))
	b = binary.LittleEndian.AppendUint32(b, features)
	b = binary.LittleEndian.AppendUint32(b, uint32(dense))
	for f := range features {
		for _, e := range ex {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(e.Features[f])))
		}
		for _, e := range ex {
			for _, id := range e.Features[f] {
				b = binary.LittleEndian.AppendUint64(b, uint64(id))
			}
		}
	}
	for _, e := range ex {
		for _, v := range e.Dense {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	return b
}

// The reload loop of main: a tick reloads a changed file once (not an
// unchanged one, nor a bad one again), a signal reloads at once.
func TestReloads(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m")
	writeModelTo(t, path, 1)
	s := newTestServer(t, path, serve.Int8, options{})
	ctx, cancel := context.WithCancel(context.Background())
	hup, tick := make(chan os.Signal), make(chan time.Time)
	logs := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		s.Watch(ctx, hup, tick, func(f string, a ...any) { logs <- fmt.Sprintf(f, a...) })
		close(done)
	}()
	// A tick is received before Watch looks at the file: a second send
	// returns only once it has, so that the file is not written under it.
	ticks := func() { tick <- time.Now(); tick <- time.Now() }
	v1 := s.Version()
	ticks() // unchanged: nothing
	writeModelTo(t, path, 2)
	tick <- time.Now()
	if l := <-logs; !strings.Contains(l, "reloaded") || s.Version() == v1 {
		t.Fatalf("a changed file: %q, version %s", l, s.Version())
	}
	if err := os.WriteFile(path, []byte("bad"), 0o644); err != nil {
		t.Fatal(err)
	}
	tick <- time.Now()
	if l := <-logs; !strings.Contains(l, "still serving") {
		t.Fatalf("a bad file: %q", l)
	}
	ticks() // the same bad file: not tried again
	writeModelTo(t, path, 3)
	hup <- syscall.SIGHUP
	if l := <-logs; !strings.Contains(l, "reloaded") {
		t.Fatalf("SIGHUP: %q", l)
	}
	cancel()
	<-done
	if len(logs) != 0 {
		t.Fatalf("more reloads than asked: %q", <-logs)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	m := getMetrics(t, ts.URL)
	if m[`serve_reloads_total{result="ok"}`] != 2 || m[`serve_reloads_total{result="failed"}`] != 1 {
		t.Fatalf("/metrics: %v", m)
	}
}

// While the model is being updated (a reload or a delta: the Holder is
// Busy), the gate admits a second queue: requests past the workers and
// the queue wait and are answered 200 once the model runs again, rather
// than 503; past the second queue too, they are 503.
func TestOverloadDuringUpdate(t *testing.T) {
	path, _ := writeModel(t)
	s := newTestServer(t, path, serve.Int8, options{workers: 1, queue: 2})
	hold := make(chan struct{})
	s.beforeModel = func() { <-hold }
	ts := httptest.NewServer(s)
	defer ts.Close()
	defer close(hold)
	body, _ := json.Marshal(request{Examples: randomExamples(rand.New(rand.NewPCG(1, 1)), 4)})
	codes := make(chan int, 8)
	post := func() {
		resp, err := http.Post(ts.URL+"/predict", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			codes <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes <- resp.StatusCode
	}
	waitAdmitted := func(n int) {
		for deadline := time.Now().Add(10 * time.Second); s.gate.Admitted() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d requests admitted, want %d", s.gate.Admitted(), n)
			}
		}
	}
	for range 3 { // one runs, two queue
		go post()
	}
	waitAdmitted(3)
	updating, release, updated := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		updated <- s.Update("v-update", func(cur *model) (*model, error) {
			close(updating)
			<-release
			return cur, nil
		})
	}()
	<-updating
	for range 2 { // the second queue
		go post()
	}
	waitAdmitted(5)
	resp, err := http.Post(ts.URL+"/predict", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("past both queues: %d, want 503", resp.StatusCode)
	}
	close(release)
	if err := <-updated; err != nil {
		t.Fatal(err)
	}
	for range 5 {
		hold <- struct{}{}
	}
	for range 5 {
		if c := <-codes; c != 200 {
			t.Fatalf("an admitted request: %d", c)
		}
	}
}

// At half of its capacity, with 100 reloads of its model file, the server
// answers every request 200.
func TestReloadsUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("a run of several seconds under load")
	}
	path, _ := writeModel(t)
	s := newTestServer(t, path, serve.Int8, options{})
	ts := httptest.NewServer(s)
	defer ts.Close()
	body, _ := json.Marshal(request{Examples: randomExamples(rand.New(rand.NewPCG(1, 1)), 64)})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 10 * time.Second}
	post := func() (int, error) {
		resp, err := client.Post(ts.URL+"/predict", "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// Capacity: requests a second answered by as many clients as workers,
	// one request each at a time, for a second.
	var done atomic.Int64
	stop := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	for range s.gate.Workers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if c, err := post(); err == nil && c == 200 {
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	rate := float64(done.Load()) / 2 // half of capacity
	if rate < 10 {
		t.Fatalf("a capacity of %d requests a second", done.Load())
	}
	const reloads, run = 100, 2 * time.Second
	codes := map[int]int{}
	var mu sync.Mutex
	var sent, failed atomic.Int64
	reloadDone := make(chan struct{})
	go func() {
		defer close(reloadDone)
		for range reloads {
			time.Sleep(run / reloads)
			if _, err := s.Reload(); err != nil {
				t.Error(err)
			}
		}
	}()
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	end := time.Now().Add(run)
	for time.Now().Before(end) {
		<-tick.C
		sent.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := post()
			if err != nil {
				failed.Add(1)
				return
			}
			mu.Lock()
			codes[c]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	<-reloadDone
	if ok, bad := s.Reloads(); ok < reloads || bad != 0 {
		t.Fatalf("reloads: %d ok, %d failed", ok, bad)
	}
	if failed.Load() != 0 || codes[200] != int(sent.Load()) {
		t.Fatalf("at %.0f requests a second (half of capacity) with %d reloads: %d sent, answers %v, %d failed", rate, reloads, sent.Load(), codes, failed.Load())
	}
	t.Logf("at %.0f requests a second with %d reloads: %d sent, all 200", rate, reloads, sent.Load())
}
