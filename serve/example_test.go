package serve_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gathergrad/gather/table/driver"

	"github.com/gathergrad/gather/serve"
	"github.com/gathergrad/gather/table"
)

// A float32 table quantized to FBGEMM's 8-bit rows, then a mean bag of
// two of its rows and a lookup.
func ExampleQuantize() {
	w := []float32{
		0, 0.5, 1, 1.5, // row 0
		-1, 0, 1, 2, // row 1
		4, 4, 4, 4, // row 2
	}
	tb, err := serve.Quantize(w, 4, serve.Int8)
	if err != nil {
		panic(err)
	}
	fmt.Println(tb.Format(), tb.Rows(), "rows of", serve.Int8.RowBytes(4), "bytes")
	mean := make([]float32, 4)
	if err := tb.Bag(mean, []int64{0, 1}, []int64{0}, serve.BagOptions{Mode: driver.BagMean}); err != nil {
		panic(err)
	}
	fmt.Printf("%.3f\n", mean)
	row := make([]float32, 4)
	if err := tb.Lookup(row, []int64{2}); err != nil {
		panic(err)
	}
	fmt.Println(row)
	// Output:
	// int8-rowwise 3 rows of 12 bytes
	// [-0.500 0.250 1.000 1.750]
	// [4 4 4 4]
}

// A table saved as a 4-bit file and served mapped from it.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "serve")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	w := make([]float32, 1000*16)
	for i := range w {
		w[i] = float32(i%16) / 8
	}
	tb, err := serve.Quantize(w, 16, serve.Int4)
	if err != nil {
		panic(err)
	}
	path := filepath.Join(dir, "emb.safetensors")
	if err := tb.Save(path, "emb"); err != nil {
		panic(err)
	}
	mapped, err := serve.Open(path, "emb")
	if err != nil {
		panic(err)
	}
	defer mapped.Close()
	sums := make([]float32, 2*16)
	// Two bags: rows 1, 2 and 3, and row 999.
	if err := mapped.Bag(sums, []int64{1, 2, 3, 999}, []int64{0, 3}, serve.BagOptions{}); err != nil {
		panic(err)
	}
	fmt.Println(mapped.Format(), mapped.Rows(), sums[:4], sums[16:20])
	// Output:
	// int4-rowwise 1000 [0 0.375 0.75 1.125] [0 0.125 0.25 0.375]
}

// A table trained on raw ids is served with its id map: the ids that
// held rows read them, any other id the padding row (zeros).
func ExampleNewIDs() {
	m, err := table.NewIDMap("item", driver.IDMapOptions{Rows: 2})
	if err != nil {
		log.Fatal(err)
	}
	rows := make([]int64, 2)
	if _, err := m.Map(context.Background(), []int64{-500, 1 << 40}, rows, 0, nil); err != nil { // as training did
		log.Fatal(err)
	}
	// The trained table: 2 rows and the padding row, 3 values each.
	tb, err := serve.Quantize([]float32{1, 1, 1, 2, 2, 2, 0, 0, 0}, 3, serve.Float32)
	if err != nil {
		log.Fatal(err)
	}
	ids := serve.NewIDs(m)
	raw := []int64{1 << 40, 7, -500}
	got := make([]int64, len(raw))
	if err := ids.Rows(got, raw); err != nil {
		log.Fatal(err)
	}
	out := make([]float32, 3*len(raw))
	if err := tb.Lookup(out, got); err != nil {
		log.Fatal(err)
	}
	fmt.Println(got, out)
	// Output:
	// [1 2 0] [2 2 2 0 0 0 1 1 1]
}

// A served table brought up to date by a delta of the rows training
// changed, without reloading the model: the table answering keeps its
// rows until the new one replaces it.
func ExampleTable_Apply() {
	tb, err := serve.Quantize([]float32{1, 1, 2, 2, 3, 3}, 2, serve.Float32)
	if err != nil {
		log.Fatal(err)
	}
	v0 := tb.At(7).Named("t") // version 7 of the model, before any delta, of the table its deltas call "t"
	d := &driver.Delta{Table: "t", Base: 7, Seq: 1, Dim: 2, Rows: []int64{1}, Values: []float32{20, 21}}
	v1, err := v0.Apply(d) // what nn.Embedding.Delta returns, or checkpoint.ReadDelta reads
	if err != nil {
		log.Fatal(err)
	}
	old, cur := make([]float32, 6), make([]float32, 6)
	v0.Lookup(old, []int64{0, 1, 2})
	v1.Lookup(cur, []int64{0, 1, 2})
	fmt.Println(old, cur)
	_, err = v1.Apply(&driver.Delta{Table: "t", Base: 7, Seq: 3, Dim: 2})
	fmt.Println(errors.Is(err, serve.ErrDelta)) // delta 2 is missing: reload the model
	// Output:
	// [1 1 2 2 3 3] [1 1 20 21 3 3]
	// true
}
