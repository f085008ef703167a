// Command serve load-tests examples/serve as a user would see it. It
// builds the server and starts it in another process on a loopback port
// with a click model (one that examples/distributed -workers 0 trains,
// unless -model names one), and beside it, in a third process, the floor:
// a bare net/http handler that reads the same body and answers as many
// bytes without the model. Then, from this process:
//
//   - the model's own time: 200 requests one at a time (the server's
//     /stats, decoding excluded);
//   - capacity: the requests a second 16 clients in a closed loop get
//     answered, JSON and binary bodies;
//   - open loops at fixed arrival rates (25%, 50% and 80% of capacity;
//     the floor at the same rates): each request sent at its intended
//     time by a goroutine of its own, its latency counted from that time,
//     so that a stall delays every request it holds up (no coordinated
//     omission);
//   - overload: 150% of capacity, every answer (200 or 503) and its time;
//   - reloads: 100 POST /reload spread over a run at 50% of capacity.
//
// It prints
//
//	model: p50 <ms>
//	serve: capacity <rps> p50 <ms> p99 <ms> at 80% floor-p99 <ms> binary-p99 <ms> reload-failed <n>
//	serve-more: binary-capacity <rps> binary-floor-p99 <ms> p99-25% <ms> p99-50% <ms> overload-p99 <ms> overload-200 <n> overload-503 <n> overload-lost <n> floor-p99-at-capacity <ms>
//
// reload-failed counts requests not answered 200 during the reloads and
// reloads that failed; overload-lost, requests with no answer in 10 s.
//
// Usage:
//
//	go run ./bench/serve [-format int8-rowwise] [-batch 64] [-duration 5s]
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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gathergrad/gather/checkpoint"
)

func main() {
	log.SetFlags(0)
	model := flag.String("model", "", "the model to serve (default: train one with examples/distributed -workers 0)")
	format := flag.String("format", "int8-rowwise", "the tables' format")
	batch := flag.Int("batch", 64, "examples per request")
	dur := flag.Duration("duration", 5*time.Second, "how long each rate runs")
	floor := flag.String("floor", "", "run as the floor server on this address (the command starts it so)")
	flag.Parse()
	if *floor != "" {
		serveFloor(*floor, *batch)
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
		*model = filepath.Join(dir, "click.safetensors")
		run("go", "run", "./examples/distributed", "-workers", "0", "-save", *model)
	}
	bin := filepath.Join(dir, "serve")
	run("go", "build", "-o", bin, "./examples/serve")
	vocab, err := vocabOf(*model)
	if err != nil {
		log.Fatal(err)
	}
	addr, floorAddr := freeAddr(), freeAddr()
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	for _, cmd := range []*exec.Cmd{
		exec.Command(bin, "-model", *model, "-format", *format, "-addr", addr),
		exec.Command(self, "-floor", floorAddr, "-batch", fmt.Sprint(*batch)),
	} {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			log.Fatal(err)
		}
		defer cmd.Process.Kill()
	}
	base, floorBase := "http://"+addr, "http://"+floorAddr
	waitUp(base + "/stats")
	waitUp(floorBase + "/")

	jsonBodies, binBodies := bodies(vocab, *batch)
	c := newClient()
	for k := range 200 {
		if code, err := c.send(base+"/predict", jsonType, jsonBodies[k%len(jsonBodies)]); code != 200 {
			log.Fatalf("the server answered %d (%v)", code, err)
		}
	}
	fmt.Printf("model: p50 %.3f (in the server, decoding excluded, one request at a time)\n", modelP50(base))

	capJSON := c.capacity(base+"/predict", jsonType, jsonBodies, *dur/2)
	capBin := c.capacity(base+"/predict", binType, binBodies, *dur/2)
	at := func(url, ct string, bs [][]byte, rate float64) result {
		return c.openLoop(url, ct, bs, rate, *dur, nil)
	}
	r25 := at(base+"/predict", jsonType, jsonBodies, 0.25*capJSON)
	r50 := at(base+"/predict", jsonType, jsonBodies, 0.5*capJSON)
	r80 := at(base+"/predict", jsonType, jsonBodies, 0.8*capJSON)
	f80 := at(floorBase, jsonType, jsonBodies, 0.8*capJSON)
	fCap := at(floorBase, jsonType, jsonBodies, capJSON)
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
	for _, r := range []result{r25, r50, r80, f80, fCap, b80, fb80, rl} {
		if r.codes[200] != r.sent {
			log.Printf("a run at %.0f/s: %d of %d answered 200 (%v), %d lost", r.rate, r.codes[200], r.sent, r.codes, r.lost)
		}
	}
	failed := int64(rl.sent-rl.codes[200]) + reloadFailed.Load()
	fmt.Printf("serve: capacity %.0f p50 %.3f p99 %.3f at 80%% floor-p99 %.3f binary-p99 %.3f reload-failed %d\n",
		capJSON, r80.q(0.5), r80.q(0.99), f80.q(0.99), b80.q(0.99), failed)
	fmt.Printf("serve-more: binary-capacity %.0f binary-floor-p99 %.3f p99-25%% %.3f p99-50%% %.3f overload-p99 %.3f overload-200 %d overload-503 %d overload-lost %d floor-p99-at-capacity %.3f\n",
		capBin, fb80.q(0.99), r25.q(0.99), r50.q(0.99), over.q(0.99), over.codes[200], over.codes[503], over.lost, fCap.q(0.99))
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

// vocabOf returns the rows of each feature's table in the model file.
func vocabOf(path string) ([]int64, error) {
	infos, _, err := checkpoint.Inspect(path)
	if err != nil {
		return nil, err
	}
	var vocab []int64
	for f := 0; ; f++ {
		k := slices.IndexFunc(infos, func(e checkpoint.TensorInfo) bool { return e.Name == fmt.Sprintf("feature%d.weight", f) })
		if k < 0 {
			return vocab, nil
		}
		vocab = append(vocab, int64(infos[k].Shape[0]))
	}
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

func modelP50(base string) float64 {
	resp, err := http.Get(base + "/stats")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		P50 float64 `json:"model_p50_ms"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		log.Fatal(err)
	}
	return st.P50
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
	lat        []float64
	codes      map[int]int
	sent, lost int
}

func (r result) q(p float64) float64 {
	if len(r.lat) == 0 {
		return math.NaN()
	}
	return r.lat[int(p*float64(len(r.lat)-1))]
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
		})
	}
	close(stop)
	wg.Wait()
	slices.Sort(r.lat)
	return r
}
