package table_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// A table file made, mapped, and protected while it is open.
func ExampleCreate() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "items.safetensors")
	if err := table.Create(path, "items", 100_000, 16, tensor.Float32, table.WithSeed(1)); err != nil {
		log.Fatal(err)
	}
	f, err := table.Open(path, "items")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	w, err := f.Weight()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(w.Shape())
	err = table.Create(path, "items", 10, 16, tensor.Float32, table.WithReplace())
	fmt.Println(errors.Is(err, table.ErrInUse))
	err = checkpoint.Write(path, nil, nil)
	fmt.Println(errors.Is(err, table.ErrInUse))
	// Output:
	// (100000, 16)
	// true
	// true
}

// A cache of 2 rows in front of a store of 5 in memory, used directly:
// fetch a batch's rows, read them in their slots, step them by a rule
// (SGD with learning rate 1), sync them back.
func ExampleNewCached() {
	w := tensor.New(tensor.WithShape(5, 2), tensor.WithBacking([]float64{0, 0, 1, 1, 2, 2, 3, 3, 4, 4}))
	store, err := table.NewMemoryStore("t", w)
	if err != nil {
		log.Fatal(err)
	}
	c, err := table.NewCached(context.Background(), store, table.CacheOptions{Budget: 2 * (2*8 + 72)})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())
	slots := make([]int32, 2)
	for _, batch := range [][]int64{{1, 3}, {3, 4}} {
		c.NewBatch()
		if err := c.Fetch(context.Background(), batch, slots); err != nil {
			log.Fatal(err)
		}
		g := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(2, 2))
		for k, s := range slots {
			v := c.Weight().Float64s()[2*int(s):] // the row, in the cache
			g.Float64s()[2*k] = -9 * v[0]         // a step to 10 times its first value
		}
		if err := c.Step(context.Background(), &optim.SparseSGD{LearnRate: 1}, &optim.RowGrad{Rows: batch, Values: g}); err != nil {
			log.Fatal(err)
		}
	}
	err = c.Fetch(context.Background(), []int64{0, 1, 2}, make([]int32, 3))
	fmt.Println(errors.Is(err, table.ErrCapacity))
	if err := c.Sync(context.Background()); err != nil {
		log.Fatal(err)
	}
	rows, err := c.Read(context.Background(), []int64{0, 1, 2, 3, 4})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rows.Float64s())
	// Output:
	// true
	// [0 0 10 1 2 2 300 3 40 4]
}

// A table in memory, with its optimiser's state, written to a table file
// and loaded back into another store.
func ExampleExport() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cols := []driver.Column{{Name: "sum", Width: 1}} // optim.RowWiseAdagrad's
	w := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6}))
	store, err := table.NewMemoryStore("t", w, cols...)
	if err != nil {
		log.Fatal(err)
	}
	path := filepath.Join(dir, "t.safetensors")
	if err := table.Export(context.Background(), path, store, 7); err != nil {
		log.Fatal(err)
	}
	other, err := table.NewMemoryStore("t", tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(3, 2)), cols...)
	if err != nil {
		log.Fatal(err)
	}
	steps, err := table.Import(context.Background(), other, path)
	if err != nil {
		log.Fatal(err)
	}
	c, err := table.NewCached(context.Background(), other, table.CacheOptions{Budget: 1 << 10})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())
	rows, err := c.Read(context.Background(), []int64{0, 2})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(steps, rows.Float32s())
	// Output:
	// 7 [1 2 0 5 6 0]
}

// A float16 table with row-wise Adagrad's state: its file holds two bytes
// a value; the cache shows the values as float32, and rounds each row a
// step changes back to float16.
func ExampleWithHalf() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "items.safetensors")
	sum := driver.Column{Name: "sum", Width: 1} // optim.NewRowWiseAdagrad(0.1).Columns(8)
	err = table.Create(path, "items", 1000, 8, tensor.Float32, table.WithSeed(1), table.WithHalf(driver.Float16), table.WithState(sum))
	if err != nil {
		log.Fatal(err)
	}
	infos, _, err := checkpoint.Inspect(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(infos[0].Name, infos[0].Format, infos[0].Shape) // 8 values of 2 bytes and a float32 sum
	c, err := table.OpenCached(context.Background(), path, table.CacheOptions{Budget: 1 << 20}, table.FileOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())
	slots := make([]int32, 1)
	if err := c.Fetch(context.Background(), []int64{7}, slots); err != nil {
		log.Fatal(err)
	}
	g := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(1, 8))
	g.Float32s()[0] = 1e-4 // a step too small for float16's spacing near this value
	if err := c.Step(context.Background(), optim.NewRowWiseAdagrad(1e-3), &optim.RowGrad{Rows: []int64{7}, Values: g}); err != nil {
		log.Fatal(err)
	}
	w := c.Weight().Float32s()[int(slots[0])*8:][:8]
	fmt.Println(c.Schema().Format, w[0] == float16Of(w[0]))
	// Output:
	// items.rows U8 [1000 20]
	// float16 true
}

// float16Of returns v rounded to float16, as float32.
func float16Of(v float32) float32 {
	x := []float32{v}
	table.RoundValues(driver.Float16, x)
	return x[0]
}

// A bfloat16 table in memory: two bytes a value in the store, float32 in
// the cache.
func ExampleNewHalfMemoryStore() {
	w := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1, 1.0 / 3, -2.5, 1000.1, 0, 3e-5}))
	s, err := table.NewHalfMemoryStore("t", w, driver.BFloat16)
	if err != nil {
		log.Fatal(err)
	}
	c, err := table.NewCached(context.Background(), s, table.CacheOptions{Budget: 1 << 10})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())
	rows, err := c.Read(context.Background(), []int64{0, 1})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.RowBytes(), "bytes a row:", rows.Float32s())
	// Output:
	// 6 bytes a row: [1 0.33398438 -2.5 1000 0 3.0040741e-05]
}

// A table file's layout, as its metadata records it (LayoutKey): the
// values of a row and the optimiser state after them.
func ExampleParseLayout() {
	dim, cols, err := driver.ParseLayout("weight:64,exp_avg:64,exp_avg_sq:64")
	fmt.Println(dim, cols, err)
	_, _, err = driver.ParseLayout("weight:64,sum")
	fmt.Println(errors.Is(err, checkpoint.ErrFormat))
	// Output:
	// 64 [{exp_avg 64 0} {exp_avg_sq 64 0}] <nil>
	// true
}

// Raw 64-bit ids mapped to the rows of a table of 3 (and a default row,
// 3): an id gets a row at its second sighting, keeps it while used, and
// the id used longest ago loses its row to a new one; an id evicted that
// comes back has been seen enough, and takes a row at once. Each row
// given afresh starts from the values of its id.
func ExampleNewIDMap() {
	m, err := table.NewIDMap("users", driver.IDMapOptions{Rows: 3, AdmitAfter: 2})
	if err != nil {
		log.Fatal(err)
	}
	batches := [][]int64{{-7, 1 << 60, -7}, {42, 1 << 60}, {42, 9, 9}, {5, 5, -7}}
	for step, ids := range batches {
		rows := make([]int64, len(ids))
		fresh, err := m.Map(context.Background(), ids, rows, int64(step), nil)
		if err != nil {
			log.Fatal(err)
		}
		for _, a := range fresh {
			v := make([]float32, 4) // the row's values, in the table
			table.InitialRow(v, 1, a.ID)
		}
		fmt.Println(rows, fresh)
	}
	st, _ := m.Stats(context.Background())
	fmt.Printf("%+v\n", st)
	// Output:
	// [3 3 0] [{0 -7}]
	// [3 1] [{1 1152921504606846976}]
	// [2 3 0] [{2 42} {0 9}]
	// [3 1 2] [{1 5} {2 -7}]
	// {Used:3 Admitted:6 Evicted:3 Expired:0 Rejected:0 Pending:5 Dropped:0}
}
