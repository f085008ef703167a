package main

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/gathergrad/gather/serve"
)

// testModel loads the test model (writeModel) in float32.
func testModel(t testing.TB) *model {
	path, _ := writeModel(t)
	m, err := loadModel(path, serve.Float32)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// randomRequest returns n random examples for the test model.
func randomRequest(r *rand.Rand, n int) []example {
	ex := make([]example, n)
	for i := range ex {
		for _, v := range testVocab {
			bag := make([]int64, r.IntN(5))
			for j := range bag {
				bag[j] = r.Int64N(int64(v))
			}
			ex[i].Features = append(ex[i].Features, bag)
		}
		for range 4 {
			ex[i].Dense = append(ex[i].Dense, float32(r.NormFloat64()*1e3))
		}
	}
	return ex
}

// Bodies of the request's shape, as encoding/json writes them, compact
// or indented, keys in either order, read by fastBatch into the batch
// encoding/json and jsonBatch make; bodies of other shapes, or failing a
// check, are left to encoding/json, and answered with its errors.
func TestFastJSON(t *testing.T) {
	m := testModel(t)
	r := rand.New(rand.NewPCG(5, 5))
	for k := range 50 {
		ex := randomRequest(r, 1+r.IntN(70))
		b, err := json.Marshal(request{Examples: ex})
		if err != nil {
			t.Fatal(err)
		}
		switch k % 3 {
		case 1:
			b, _ = json.MarshalIndent(request{Examples: ex}, " ", "\t")
		case 2: // "dense" first, and spaces after the colons
			var parts []string
			for _, e := range ex {
				f, _ := json.Marshal(e.Features)
				d, _ := json.Marshal(e.Dense)
				parts = append(parts, `{"dense": `+string(d)+`, "features": `+string(f)+`}`)
			}
			b = []byte("\n{ \"examples\" : [" + strings.Join(parts, " ,\r\n") + "] }\n")
		}
		fast, ok := fastBatch(b, m)
		if !ok {
			t.Fatalf("request %d not read by fastBatch: %s", k, b)
		}
		slow, err := decodeJSON(b, m)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("request %d: fastBatch %+v, encoding/json %+v", k, fast, slow)
		}
	}
	for _, body := range []string{
		`{"Examples": [{"features": [[1], [2], [3]], "dense": [1, 2, 3, 4]}]}`, // another spelling
		`{"examples": [{"features": [[1], [2], [3]], "dense": [1, 2, 3, 4], "x": 1}]}`,
		`{"examples": [{"features": [[1.0], [2], [3]], "dense": [1, 2, 3, 4]}]}`,  // an id with a fraction
		`{"examples": [{"features": [[1], [2], [3]], "dense": [1, 2, 3, 1e39]}]}`, // beyond float32
		`{"examples": [{"features": [[1], [2], [3]], "dense": null}]}`,
		`{"examples": [{"features": [[1], [2], [9]], "dense": [1, 2, 3, 4]}]}`, // id 9 of a table of 5
		`{"examples": [{"features": [[1], [2]], "dense": [1, 2, 3, 4]}]}`,
		`{"examples": [{"features": [[1], [2], [3]], "dense": [1, 2, 3]}]}`,
		`{"examples": [{"features": [[01], [2], [3]], "dense": [1, 2, 3, 4]}]}`,
		`{"examples": [{"features": [[1], [2], [3]], "dense": [1, 2, 3, 4]}]} {}`,
		`{"examples": []}`,
		`{"examples": [{"features": [[-1], [2], [3]], "dense": [1, 2, 3, 4]}]}`,
		`{"examples": [{"features": [[99999999999999999999], [2], [3]], "dense": [1, 2, 3, 4]}]}`,
	} {
		if _, ok := fastBatch([]byte(body), m); ok {
			t.Errorf("fastBatch read %s", body)
		}
	}
}

// FuzzFastJSON: a batch fastBatch reads from any bytes is the batch
// encoding/json and jsonBatch make of them; never a panic.
func FuzzFastJSON(f *testing.F) {
	m := testModel(f)
	r := rand.New(rand.NewPCG(6, 6))
	for n := range 4 {
		b, _ := json.Marshal(request{Examples: randomRequest(r, 1+n)})
		f.Add(b)
	}
	f.Add([]byte(`{"examples": [{"dense": [0.5, -0, 1e-3, 2E+2], "features": [[-0], [], [4, 4]]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := fastBatch(b, m)
		if !ok {
			return
		}
		slow, err := decodeJSON(b, m)
		if err != nil {
			t.Fatalf("fastBatch read %q, encoding/json refused it: %v", b, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: fastBatch %+v, encoding/json %+v", b, fast, slow)
		}
	})
}
