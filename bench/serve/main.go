// Command serve load-tests examples/serve: it builds and starts the
// server in another process on a loopback port with a click model (one
// that examples/distributed -workers 0 trains, unless -model names one),
// measures the server's own time per model call on 200 requests sent one
// at a time, then sends requests of -batch random examples from
// -concurrency clients for -duration and prints
//
//	model: p50 <ms> (in the server, JSON excluded, one request at a time)
//	serve: p50 <ms> p99 <ms> rps <n> concurrency <c> batch <b>
//
// Usage:
//
//	go run ./bench/serve [-format int8-rowwise] [-concurrency 8] [-batch 64] [-duration 10s]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gathergrad/gather/checkpoint"
)

func main() {
	log.SetFlags(0)
	model := flag.String("model", "", "the model to serve (default: train one with examples/distributed -workers 0)")
	format := flag.String("format", "int8-rowwise", "the tables' format")
	conc := flag.Int("concurrency", 8, "clients sending at once")
	batch := flag.Int("batch", 64, "examples per request")
	dur := flag.Duration("duration", 10*time.Second, "how long to load the server")
	flag.Parse()
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
	infos, _, err := checkpoint.Inspect(*model)
	if err != nil {
		log.Fatal(err)
	}
	var vocab []int64
	for f := 0; ; f++ {
		k := slices.IndexFunc(infos, func(e checkpoint.TensorInfo) bool { return e.Name == fmt.Sprintf("feature%d.weight", f) })
		if k < 0 {
			break
		}
		vocab = append(vocab, int64(infos[k].Shape[0]))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	srv := exec.Command(bin, "-model", *model, "-format", *format, "-addr", addr)
	srv.Stdout, srv.Stderr = os.Stderr, os.Stderr
	if err := srv.Start(); err != nil {
		log.Fatal(err)
	}
	defer srv.Process.Kill()
	base := "http://" + addr
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(base + "/stats"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Since(start) > 30*time.Second {
			log.Fatal("the server did not answer within 30 s")
		}
	}
	// Request bodies of random examples: ids drawn by a Zipf law, as the
	// training data's are.
	r := rand.New(rand.NewPCG(1, 2))
	bodies := make([][]byte, 64)
	for k := range bodies {
		type example struct {
			Features [][]int64 `json:"features"`
			Dense    []float32 `json:"dense"`
		}
		ex := make([]example, *batch)
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
		bodies[k], _ = json.Marshal(map[string]any{"examples": ex})
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *conc}}
	send := func(body []byte) time.Duration {
		start := time.Now()
		resp, err := client.Post(base+"/predict", "application/json", bytes.NewReader(body))
		if err != nil {
			log.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			log.Fatalf("the server answered %d", resp.StatusCode)
		}
		return time.Since(start)
	}
	for k := range 200 {
		send(bodies[k%len(bodies)])
	}
	resp, err := http.Get(base + "/stats")
	if err != nil {
		log.Fatal(err)
	}
	var st struct {
		P50 float64 `json:"model_p50_ms"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	var (
		mu    sync.Mutex
		lat   []time.Duration
		wg    sync.WaitGroup
		until = time.Now().Add(*dur)
	)
	for c := range *conc {
		wg.Go(func() {
			var mine []time.Duration
			for k := c; time.Now().Before(until); k++ {
				mine = append(mine, send(bodies[k%len(bodies)]))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(lat)
	ms := func(q float64) float64 { return lat[int(q*float64(len(lat)-1))].Seconds() * 1000 }
	fmt.Printf("model: p50 %.3f (in the server, JSON excluded, one request at a time)\n", st.P50)
	fmt.Printf("serve: p50 %.3f p99 %.3f rps %.0f concurrency %d batch %d\n", ms(0.5), ms(0.99), float64(len(lat))/dur.Seconds(), *conc, *batch)
}
