package main

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gathergrad/gather/serve"
)

// BenchmarkPredict is the server's own work for a request of 64 examples
// (1-4 ids a bag, as bench/serve sends): the handler from the body read to
// the answer written, with no network, in JSON and in binary.
func BenchmarkPredict(b *testing.B) {
	path, _ := writeModel(b)
	s := newTestServer(b, path, serve.Int8, options{})
	r := rand.New(rand.NewPCG(1, 2))
	ex := make([]example, 64)
	for i := range ex {
		for _, v := range testVocab {
			bag := make([]int64, 1+r.IntN(4))
			for j := range bag {
				bag[j] = r.Int64N(int64(v))
			}
			ex[i].Features = append(ex[i].Features, bag)
		}
		for range 4 {
			ex[i].Dense = append(ex[i].Dense, float32(r.NormFloat64()))
		}
	}
	js, err := json.Marshal(request{Examples: ex})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name, ct string
		body     []byte
	}{{"json", "application/json", js}, {"binary", binaryType, encodeBinary(ex)}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/predict", bytes.NewReader(c.body))
				req.Header.Set("Content-Type", c.ct)
				w := httptest.NewRecorder()
				s.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
