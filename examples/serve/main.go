// Command serve answers HTTP requests with the click model that
// examples/distributed trains and saves (-save): its tables quantized on
// load to one of package serve's formats (float32, float16, FBGEMM's
// 8-bit or 4-bit rows), its MLP as trained. POST /predict takes a batch
// of examples, one bag of ids per feature and the dense features, and
// answers their probabilities of a click, as JSON:
//
//	curl -d '{"examples": [{"features": [[12, 7, 7, 40], [3, 1, 9], [5]], "dense": [0.1, -1.2, 0.4, 2]}]}' localhost:8080/predict
//	{"probabilities":[0.31]}
//
// or, with Content-Type application/octet-stream, as little-endian
// arrays (see readBinary), which cost no number parsing. A bad request is
// answered 400 with a message naming the field (and the id, for an id
// outside its feature's table). A request holds at most 4,096 examples
// and 65,536 ids (1,024 in a bag); its body may be as large as the
// largest such batch written compactly in JSON, and a larger one is
// answered 413, before it is read when its Content-Length says so.
//
// A model that keeps training: the server loads the model file again on
// POST /reload, on SIGHUP, and (with -watch) when the file changes, as
// examples/distributed -save-every rewrites it. It loads the new model
// beside the old, then switches: a request is answered whole by the
// model current when it arrived, and every answer names its model in the
// Model-Version header (<n>-<first bytes of the file's SHA-256>). A file
// that does not load leaves the old model answering; /reload answers
// 422 with the error.
//
// With -deltas DIR it also applies, as each is ready, the deltas
// examples/distributed -deltas publishes after the model file (the rows
// training changed and the dense layers, every -delta-every steps): each
// between requests (serve.Table.Apply, live.Holder.Update), the version
// naming it (<version>+<delta>); a delta that does not follow the model
// reloads the file. GET /stats and /metrics count the deltas applied and
// refused.
//
// Overload: -workers requests are handled at once and -queue more wait;
// past them a request is answered 503 with Retry-After at once. SIGINT or
// SIGTERM stops taking requests and answers those in flight before it
// exits. GET /stats answers counts and the model's time per request in
// JSON; GET /metrics the same in Prometheus's text format (requests by
// status, a histogram of /predict's time, queue depth, reloads, the
// model's version).
//
// Usage:
//
//	go run ./examples/distributed -workers 0 -save click.safetensors
//	go run ./examples/serve -model click.safetensors [-format int8-rowwise] [-addr localhost:8080] [-watch 1s] [-deltas DIR] [-workers N] [-queue N]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gathergrad/gather/table/driver"
)

func main() {
	log.SetFlags(0)
	path := flag.String("model", "click.safetensors", "the model examples/distributed -save wrote")
	format := flag.String("format", "int8-rowwise", "the tables' format: float32, float16, bfloat16, int8-rowwise or int4-rowwise")
	addr := flag.String("addr", "localhost:8080", "address to listen on")
	watch := flag.Duration("watch", 0, "how often to look for a new model file (0: only on POST /reload or SIGHUP)")
	workers := flag.Int("workers", 0, "requests handled at once (0: GOMAXPROCS)")
	queue := flag.Int("queue", 0, "requests waiting beyond those before a 503 (0: 32 a worker, -1: none)")
	deltas := flag.String("deltas", "", "apply the deltas examples/distributed -deltas publishes into this directory as they come")
	poll := flag.Duration("delta-poll", 100*time.Millisecond, "with -deltas, how often to look for the next delta")
	flag.Parse()
	f, err := driver.ParseFormat(*format)
	if err != nil {
		log.Fatal(err)
	}
	s, err := newServer(*path, f, options{workers: *workers, queue: *queue})
	if err != nil {
		log.Fatal(err)
	}
	m := s.Current().Model
	fmt.Printf("serving %s (version %s): tables of %d, %v, %.1f MB; POST http://%s/predict\n", *path, s.Version(), m.emb, f, float64(m.rowBytes)/1e6, *addr)
	srv := &http.Server{Addr: *addr, Handler: s, ReadHeaderTimeout: 10 * time.Second}

	stop, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	var tick <-chan time.Time
	if *watch > 0 {
		t := time.NewTicker(*watch)
		defer t.Stop()
		tick = t.C
	}
	go s.Watch(stop, hup, tick, log.Printf)
	if *deltas != "" {
		go s.followDeltas(stop, *deltas, *poll, log.Printf)
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		<-stop.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			log.Printf("shutdown: %v", err)
		}
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	<-drained // Shutdown returns once the requests in flight are answered
}
