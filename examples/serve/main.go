// Command serve answers HTTP requests with the click model that
// examples/distributed trains and saves (-save): its tables quantized on
// load to one of package serve's formats (float32, float16, FBGEMM's
// 8-bit or 4-bit rows), its MLP as trained. POST /predict takes a JSON
// batch of examples, one bag of ids per feature and the dense features,
// and answers their probabilities of a click:
//
//	curl -d '{"examples": [{"features": [[12, 7, 7, 40], [3, 1, 9], [5]], "dense": [0.1, -1.2, 0.4, 2]}]}' localhost:8080/predict
//	{"probabilities":[0.31]}
//
// A bad request is answered 400 with a message naming the field (and the
// id, for an id outside its feature's table), an empty body 400 "empty
// body". A request holds at most 4,096 examples and 65,536 ids (1,024 in
// a bag); its body may be as large as the largest such batch written
// compactly, and a larger one is answered 413, before it is read when
// its Content-Length says so. GET /stats answers the number of requests
// answered 200, those answered otherwise by status, and the median and
// 99th percentile of the model's time per request, JSON decoding
// excluded.
//
// Usage:
//
//	go run ./examples/distributed -workers 0 -save click.safetensors
//	go run ./examples/serve -model click.safetensors [-format int8-rowwise] [-addr localhost:8080]
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/gathergrad/gather/table"
)

func main() {
	log.SetFlags(0)
	path := flag.String("model", "click.safetensors", "the model examples/distributed -save wrote")
	format := flag.String("format", "int8-rowwise", "the tables' format: float32, float16, int8-rowwise or int4-rowwise")
	addr := flag.String("addr", "localhost:8080", "address to listen on")
	flag.Parse()
	f, err := table.ParseFormat(*format)
	if err != nil {
		log.Fatal(err)
	}
	m, err := loadModel(*path, f)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("serving %s: tables of %d, %v, %.1f MB; POST http://%s/predict\n", *path, m.emb, f, float64(m.rowBytes)/1e6, *addr)
	srv := &http.Server{Addr: *addr, Handler: newServer(m), ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
