// Command serve load-tests examples/serve as a user would see it. It
// builds the server and starts it in another process on a loopback port
// with a click model (one that examples/distributed -workers 0 trains,
// unless -model names one), and beside it, in a third process, the floor:
// a bare net/http handler that reads the same body and answers as many
// bytes without the model. The client (this program, run again), the
// server and the floor are each pinned to a CPU of their own (client 0,
// server 1, floor 2; on two CPUs the floor shares the server's, which is
// idle while the floor is measured): each one's GOMAXPROCS is 1. Then:
//
//   - the model's own time: 200 requests one at a time (the server's
//     /stats, decoding excluded);
//   - capacity, in open loop: the highest arrival rate the server answers
//     with no 503, no request lost, and a p99 that does not grow with the
//     run's length (the second half's p99 at most 1.5x the first's plus
//     1 ms), and at which the floor does the same (past it, the client is
//     the limit), found by raising the rate by a quarter from half of what
//     16 closed-loop clients get answered until a run fails, then halving
//     the step three times, and run once more at the rate found (a tenth
//     lower while that fails); JSON and binary bodies apart;
//   - open loops at 25%, 50% and 80% of that capacity, the floor at the
//     same rates: each request sent at its intended time by a goroutine of
//     its own, its latency counted from that time (no coordinated
//     omission);
//   - the 80% run again while a delta of -delta-rows rows a table (and the
//     dense layers) is published once a second, which the server applies
//     as it answers (-deltas);
//   - overload: 150% of capacity, every answer (200 or 503) and its time;
//   - reloads: 100 POST /reload spread over a run at 50% of capacity.
//
// It prints
//
//	pinned: client <cpus> server <cpus> floor <cpus>
//	model: p50 <ms>
//	serve: capacity <rps> p99-25% <ms> p99-50% <ms> p99-80% <ms> floor-p99-25% <ms> floor-p99-50% <ms> floor-p99-80% <ms> ratio-80% <x> deltas-p99-80% <ms> deltas-ratio-80% <x> deltas-applied <n>
//	serve-binary: capacity <rps> p99-80% <ms> floor-p99-80% <ms> ratio-80% <x>
//	serve-more: closed-capacity <rps> overload-p99 <ms> overload-200 <n> overload-503 <n> overload-lost <n> reload-failed <n>
//
// ratio-80% is the p99 at 80% over the floor's at the same rate;
// reload-failed counts requests not answered 200 during the reloads and
// reloads that failed; overload-lost, requests with no answer in 10 s.
//
// Usage:
//
//	go run ./bench/serve [-format int8-rowwise] [-batch 64] [-duration 5s] [-delta-rows 10000] [-capacity RPS]
//
// With -capacity it takes that capacity and runs only the server, the
// floor and the server with deltas at 80% of it, printing
//
//	serve-at: capacity <rps> (given) p99-80% <ms> floor-p99-80% <ms> deltas-p99-80% <ms> deltas-applied <n>
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// pinnedEnv marks the client process, pinned to CPU 0: its value is the
// number of CPUs the command started with.
const pinnedEnv = "GATHERGRAD_BENCH_SERVE_CLIENT"

func main() {
	log.SetFlags(0)
	model := flag.String("model", "", "the model to serve (default: train one with examples/distributed -workers 0)")
	format := flag.String("format", "int8-rowwise", "the tables' format")
	batch := flag.Int("batch", 64, "examples per request")
	dur := flag.Duration("duration", 5*time.Second, "how long each rate runs")
	deltaRows := flag.Int("delta-rows", 10_000, "rows of each table a delta changes (at most the table's)")
	given := flag.Float64("capacity", 0, "take this JSON capacity (requests a second) rather than search for it, and run the 80% runs alone (for an A/B at one rate)")
	floor := flag.String("floor", "", "run as the floor server on this address (the command starts it so)")
	flag.Parse()
	if *floor != "" {
		serveFloor(*floor, *batch)
		return
	}
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	cpus := runtime.NumCPU()
	if n, err := strconv.Atoi(os.Getenv(pinnedEnv)); err == nil {
		cpus = n // the client's NumCPU is 1
	} else if cpus >= 2 {
		// Run again as the client, pinned to CPU 0.
		cmd := exec.Command(self, os.Args[1:]...)
		cmd.Env = append(os.Environ(), pinnedEnv+"="+strconv.Itoa(cpus))
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if _, err := startPinned(cmd, 0); err != nil {
			log.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			log.Fatal(err)
		}
		return
	}
	dir, err := os.MkdirTemp("", "bench-serve-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	run := func(name string, args ...string) {
		cmd := exec.Command(name, args...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			log.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
		}
	}
	if *model == "" {
		*model = filepath.Join(dir, "trained.safetensors")
		run("go", "run", "./examples/distributed", "-workers", "0", "-save", *model)
	}
	bin := filepath.Join(dir, "serve")
	run("go", "build", "-o", bin, "./examples/serve")
	pub, err := newPublisher(*model, filepath.Join(dir, "click.safetensors"), filepath.Join(dir, "deltas"), *deltaRows)
	if err != nil {
		log.Fatal(err)
	}
	addr, floorAddr := freeAddr(), freeAddr()
	serverCPU, floorCPU := 1, 2
	if cpus < 3 {
		floorCPU = 1
	}
	if cpus < 2 {
		serverCPU, floorCPU = -1, -1 // not pinned
	}
	var pids []int
	for _, c := range []struct {
		cmd *exec.Cmd
		cpu int
	}{
		{exec.Command(bin, "-model", pub.model, "-format", *format, "-addr", addr, "-deltas", pub.dir, "-delta-poll", "10ms"), serverCPU},
		{exec.Command(self, "-floor", floorAddr, "-batch", fmt.Sprint(*batch)), floorCPU},
	} {
		c.cmd.Stdout, c.cmd.Stderr = os.Stderr, os.Stderr
		if _, err := startPinned(c.cmd, c.cpu); err != nil {
			log.Fatal(err)
		}
		defer c.cmd.Process.Kill()
		pids = append(pids, c.cmd.Process.Pid)
	}
	base, floorBase := "http://"+addr, "http://"+floorAddr
	waitUp(base + "/stats")
	waitUp(floorBase + "/")
	fmt.Printf("pinned: client %s server %s floor %s (of %d CPUs)\n", allowedCPUs(os.Getpid()), allowedCPUs(pids[0]), allowedCPUs(pids[1]), cpus)

	jsonBodies, binBodies := bodies(pub.vocab, *batch)
	c := newClient()
	for k := range 200 {
		if code, err := c.send(base+"/predict", jsonType, jsonBodies[k%len(jsonBodies)]); code != 200 {
			log.Fatalf("the server answered %d (%v)", code, err)
		}
	}
	fmt.Printf("model: p50 %.3f (in the server, decoding excluded, one request at a time)\n", stat(base, "model_p50_ms"))

	at := func(url, ct string, bs [][]byte, rate float64) result {
		return c.openLoop(url, ct, bs, rate, *dur, nil)
	}
	if *given > 0 {
		r80 := at(base+"/predict", jsonType, jsonBodies, 0.8**given)
		f80 := at(floorBase, jsonType, jsonBodies, 0.8**given)
		d80 := c.openLoop(base+"/predict", jsonType, jsonBodies, 0.8**given, *dur, pub.everySecond(int(dur.Seconds())+1))
		fmt.Printf("serve-at: capacity %.0f (given) p99-80%% %.3f floor-p99-80%% %.3f deltas-p99-80%% %.3f deltas-applied %.0f\n",
			*given, r80.q(0.99), f80.q(0.99), d80.q(0.99), stat(base, "deltas_applied"))
		return
	}
	closed := c.capacity(base+"/predict", jsonType, jsonBodies, *dur/2)
	capJSON := c.openCapacity(base+"/predict", floorBase, jsonType, jsonBodies, closed/2, *dur)
	var r, f [3]result
	for k, share := range []float64{0.25, 0.5, 0.8} {
		r[k] = at(base+"/predict", jsonType, jsonBodies, share*capJSON)
		f[k] = at(floorBase, jsonType, jsonBodies, share*capJSON)
	}
	applied := stat(base, "deltas_applied")
	d80 := c.openLoop(base+"/predict", jsonType, jsonBodies, 0.8*capJSON, *dur, pub.everySecond(int(dur.Seconds())+1))
	applied = stat(base, "deltas_applied") - applied

	capBin := c.openCapacity(base+"/predict", floorBase, binType, binBodies, closed, *dur)
	b80 := at(base+"/predict", binType, binBodies, 0.8*capBin)
	fb80 := at(floorBase, binType, binBodies, 0.8*capBin)
	over := at(base+"/predict", jsonType, jsonBodies, 1.5*capJSON)

	// 100 reloads over a run at half of capacity.
	var reloadFailed atomic.Int64
	reloads := func(stop <-chan struct{}) {
		tick := time.NewTicker(*dur / 100)
		defer tick.Stop()
		for range 100 {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			resp, err := http.Post(base+"/reload", "", nil)
			if err != nil {
				reloadFailed.Add(1)
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				reloadFailed.Add(1)
			}
		}
	}
	rl := c.openLoop(base+"/predict", jsonType, jsonBodies, 0.5*capJSON, *dur, reloads)
	for _, x := range []result{r[0], r[1], r[2], f[0], f[1], f[2], d80, b80, fb80, rl} {
		if x.codes[200] != x.sent {
			log.Printf("a run at %.0f/s: %d of %d answered 200 (%v), %d lost", x.rate, x.codes[200], x.sent, x.codes, x.lost)
		}
	}
	failed := int64(rl.sent-rl.codes[200]) + reloadFailed.Load()
	p99 := func(x result) float64 { return x.q(0.99) }
	fmt.Printf("serve: capacity %.0f p99-25%% %.3f p99-50%% %.3f p99-80%% %.3f floor-p99-25%% %.3f floor-p99-50%% %.3f floor-p99-80%% %.3f ratio-80%% %.2f deltas-p99-80%% %.3f deltas-ratio-80%% %.2f deltas-applied %.0f\n",
		capJSON, p99(r[0]), p99(r[1]), p99(r[2]), p99(f[0]), p99(f[1]), p99(f[2]), p99(r[2])/p99(f[2]), p99(d80), p99(d80)/p99(f[2]), applied)
	fmt.Printf("serve-binary: capacity %.0f p99-80%% %.3f floor-p99-80%% %.3f ratio-80%% %.2f\n", capBin, p99(b80), p99(fb80), p99(b80)/p99(fb80))
	fmt.Printf("serve-more: closed-capacity %.0f overload-p99 %.3f overload-200 %d overload-503 %d overload-lost %d reload-failed %d\n",
		closed, p99(over), over.codes[200], over.codes[503], over.lost, failed)
}

const (
	jsonType = "application/json"
	binType  = "application/octet-stream"
)

// serveFloor answers every request as the server would, in size, without
// the model: it reads the body and writes batch probabilities.
func serveFloor(addr string, batch int) {
	p := make([]float64, batch)
	for i := range p {
		p[i] = 0.123456789012345 + float64(i)*1e-9
	}
	js, _ := json.Marshal(map[string][]float64{"probabilities": p})
	js = append(js, '\n')
	bin := make([]byte, 8*batch)
	log.Fatal(http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Header.Get("Content-Type") == binType {
			w.Header().Set("Content-Type", binType)
			w.Write(bin)
			return
		}
		w.Header().Set("Content-Type", jsonType)
		w.Write(js)
	})))
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitUp(url string) {
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			return
		}
		if time.Since(start) > 30*time.Second {
			log.Fatalf("%s did not answer within 30 s", url)
		}
	}
}

// stat returns the number field name of the server's GET /stats.
func stat(base, name string) float64 {
	resp, err := http.Get(base + "/stats")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var st map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		log.Fatal(err)
	}
	v, ok := st[name].(float64)
	if !ok {
		log.Fatalf("/stats has no number %q: %v", name, st[name])
	}
	return v
}

// bodies returns 64 requests of batch random examples, ids drawn by a
// Zipf law as the training data's are, as JSON and as binary bodies
// (examples/serve's readBinary).
func bodies(vocab []int64, batch int) (js, bin [][]byte) {
	r := rand.New(rand.NewPCG(1, 2))
	type example struct {
		Features [][]int64 `json:"features"`
		Dense    []float32 `json:"dense"`
	}
	for range 64 {
		ex := make([]example, batch)
		for i := range ex {
			for _, v := range vocab {
				z := rand.NewZipf(r, 1.05, 2, uint64(v-1))
				bag := make([]int64, 1+r.IntN(4))
				for j := range bag {
					bag[j] = int64(z.Uint64())
				}
				ex[i].Features = append(ex[i].Features, bag)
			}
			for range 4 {
				ex[i].Dense = append(ex[i].Dense, float32(r.NormFloat64()))
			}
		}
		b, _ := json.Marshal(map[string]any{"examples": ex})
		js = append(js, b)
		u32 := binary.LittleEndian.AppendUint32
		p := u32(u32(u32([]byte("GGB1"), uint32(batch)), uint32(len(vocab))), 4)
		for f := range vocab {
			for _, e := range ex {
				p = u32(p, uint32(len(e.Features[f])))
			}
			for _, e := range ex {
				for _, id := range e.Features[f] {
					p = binary.LittleEndian.AppendUint64(p, uint64(id))
				}
			}
		}
		for _, e := range ex {
			for _, v := range e.Dense {
				p = u32(p, math.Float32bits(v))
			}
		}
		bin = append(bin, p)
	}
	return js, bin
}

type client struct{ hc *http.Client }

func newClient() *client {
	return &client{hc: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxIdleConns: 1024}}}
}

// send posts body and returns the status (0 for none) once the answer is
// read.
func (c *client) send(url, ct string, body []byte) (int, error) {
	resp, err := c.hc.Post(url, ct, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

// capacity returns the requests a second 16 clients in a closed loop get
// answered 200 over d.
func (c *client) capacity(url, ct string, bodies [][]byte, d time.Duration) float64 {
	var n atomic.Int64
	var wg sync.WaitGroup
	until := time.Now().Add(d)
	start := time.Now()
	for k := range 16 {
		wg.Go(func() {
			for i := k; time.Now().Before(until); i++ {
				if code, _ := c.send(url, ct, bodies[i%len(bodies)]); code == 200 {
					n.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds()
}

// A result is what an open loop saw: each answer's time from its
// intended send, in ms, and the answers by status.
type result struct {
	rate       float64
	lat        []float64    // sorted
	halves     [2][]float64 // the latencies of the requests due in the run's first and second half, sorted
	codes      map[int]int
	sent, lost int
}

func (r result) q(p float64) float64 { return quantile(r.lat, p) }

// quantile returns quantile p of the sorted lat, NaN for none.
func quantile(lat []float64, p float64) float64 {
	if len(lat) == 0 {
		return math.NaN()
	}
	return lat[int(p*float64(len(lat)-1))]
}

// holds reports whether the server held the run's rate: every request
// answered 200 and the second half's p99 at most 1.5 times the first's
// plus 1 ms (a queue that grows makes it grow with the run's length).
func (r result) holds() bool {
	first, second := quantile(r.halves[0], 0.99), quantile(r.halves[1], 0.99)
	return r.codes[200] == r.sent && r.sent > 0 && second <= 1.5*first+1
}

// openCapacity returns the highest rate, from start, the server holds in
// open loop over runs of d (result.holds) and the client can drive the
// floor at (the floor holds it too): the rate rises by a quarter
// until a run fails, then the step between the last that held and the
// first that failed is halved three times.
func (c *client) openCapacity(url, floor, ct string, bodies [][]byte, start float64, d time.Duration) float64 {
	held := func(rate float64) bool {
		r := c.openLoop(url, ct, bodies, rate, d, nil)
		ok := r.holds()
		log.Printf("capacity search: %.0f/s %s (p99 %.3f then %.3f ms; %v, %d lost)", rate, map[bool]string{true: "held", false: "not held"}[ok],
			quantile(r.halves[0], 0.99), quantile(r.halves[1], 0.99), r.codes, r.lost)
		if ok { // a rate the client cannot drive the floor at is the client's limit
			f := c.openLoop(floor, ct, bodies, rate, d, nil)
			if ok = f.holds(); !ok {
				log.Printf("capacity search: %.0f/s not held by the floor: the client's limit (p99 %.3f then %.3f ms)", rate,
					quantile(f.halves[0], 0.99), quantile(f.halves[1], 0.99))
			}
		}
		return ok
	}
	lo, hi := 0.0, start
	for held(hi) {
		lo, hi = hi, hi*1.25
	}
	if lo == 0 { // start did not hold: come down
		for hi /= 1.25; !held(hi) && hi > 1; hi /= 1.25 {
		}
		lo, hi = hi, hi*1.25
	}
	for range 3 {
		if mid := (lo + hi) / 2; held(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	// Once more at the rate found, lower by a tenth each time it fails
	// (three times at most): the host's speed drifts.
	for range 3 {
		if held(lo) {
			break
		}
		lo /= 1.1
	}
	return lo
}

// openLoop sends requests at rate a second for d, each at its intended
// time t0 + k/rate from a goroutine of its own, and records every
// answer's time from that intended time. beside, if not nil, runs
// meanwhile and is told to stop at the end.
func (c *client) openLoop(url, ct string, bodies [][]byte, rate float64, d time.Duration, beside func(stop <-chan struct{})) result {
	r := result{rate: rate, codes: map[int]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	stop := make(chan struct{})
	if beside != nil {
		wg.Go(func() { beside(stop) })
	}
	gap := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for k := 0; ; k++ {
		due := start.Add(time.Duration(k) * gap)
		if due.Sub(start) >= d {
			break
		}
		time.Sleep(time.Until(due))
		r.sent++
		wg.Go(func() {
			code, _ := c.send(url, ct, bodies[k%len(bodies)])
			ms := time.Since(due).Seconds() * 1000
			mu.Lock()
			defer mu.Unlock()
			if code == 0 {
				r.lost++
				return
			}
			r.codes[code]++
			r.lat = append(r.lat, ms)
			if h := min(int(2*due.Sub(start)/d), 1); code == 200 {
				r.halves[h] = append(r.halves[h], ms)
			}
		})
	}
	close(stop)
	wg.Wait()
	slices.Sort(r.lat)
	slices.Sort(r.halves[0])
	slices.Sort(r.halves[1])
	return r
}
