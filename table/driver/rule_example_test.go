package driver_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"math"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// The same rule steps rows wherever they live: a table in memory, and a
// store that steps its own rows under its lock (as a Redis Cluster steps
// them on its servers), to the same values.
func ExampleStepper() {
	adagrad := optim.NewRowWiseAdagrad(0.5)
	w := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float32{1, 1, 2, 2, 3, 3}))
	mem, err := optim.NewMemoryTable(w.Clone().(*tensor.Dense), adagrad)
	if err != nil {
		log.Fatal(err)
	}
	store, err := table.NewMemoryStore("t", w, adagrad.Columns(2)...)
	if err != nil {
		log.Fatal(err)
	}
	g := &driver.RowGrad{Rows: []int64{0, 2}, Values: tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, -1, 2, 0}))}
	for _, s := range []driver.Stepper{mem, store} {
		if err := s.Step(context.Background(), adagrad, g); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%T: %d step\n", s, s.Steps())
	}
	fmt.Println(mem.Weight.Float32s())
	c, err := table.NewCached(context.Background(), store, table.CacheOptions{Budget: 1 << 10})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())
	rows, err := c.Read(context.Background(), []int64{0, 1, 2})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rows.Float32s()) // each row's 2 values, then its sum
	// Output:
	// *optim.MemoryTable: 1 step
	// *table.MemoryStore: 1 step
	// [0.5 1.5 2 2 2.2928932 3]
	// [0.5 1.5 1 2 2 0 2.2928932 3 2]
}

// A rule's Columns are the state each row carries beside its values;
// driver.SameColumns compares two by name and width.
func ExampleSameColumns() {
	adam := optim.NewSparseAdam(0.01)
	fmt.Println(adam.Name(), adam.Columns(4))
	fmt.Println(driver.SameColumns(adam.Columns(4), optim.NewRowWiseAdagrad(0.1).Columns(4)))
	// Output:
	// sparse_adam [{exp_avg 4 0} {exp_avg_sq 4 0}]
	// false
}

// clippedSGD is a rule written outside the module: SGD whose gradient
// is clipped to [-Clip, Clip] value by value. It checks what the
// module's own rules check, with package driver's checks.
type clippedSGD struct{ LearnRate, Clip float64 }

func (clippedSGD) Name() string                    { return "clipped_sgd" }
func (clippedSGD) Columns(dim int) []driver.Column { return nil }

func (o clippedSGD) Check(t int64, g *driver.RowGrad, dim int) error {
	if err := driver.CheckRates("clipped sgd", o.LearnRate, 0); err != nil {
		return err
	}
	return driver.CheckGrad("clipped sgd", g, dim, true)
}

func (o clippedSGD) StepRows(r driver.Rows, g *driver.RowGrad) error {
	if err := driver.CheckRates("clipped sgd", o.LearnRate, 0); err != nil {
		return err
	}
	sg, dim, err := driver.CheckRows("clipped sgd", r, g, o.Columns, true)
	if err != nil {
		return err
	}
	if r.Weight.Dtype() != tensor.Float32 {
		return fmt.Errorf("clipped sgd: a float32 table only, not %v", r.Weight.Dtype())
	}
	w, v := r.Weight.Float32s(), sg.Values.Float32s()
	for k, row := range sg.Rows { // slots, where a cache holds the rows
		for i := range dim {
			w[int(row)*dim+i] -= float32(o.LearnRate) * max(-float32(o.Clip), min(float32(o.Clip), v[k*dim+i]))
		}
	}
	return nil
}

// A rule of one's own steps rows in memory and in a store alike, and its
// checks refuse what the module's rules refuse, naming the value.
func ExampleRule() {
	w := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float32{1, 1, 2, 2, 3, 3}))
	mem, err := optim.NewMemoryTable(w.Clone().(*tensor.Dense), clippedSGD{})
	if err != nil {
		log.Fatal(err)
	}
	store, err := table.NewMemoryStore("t", w)
	if err != nil {
		log.Fatal(err)
	}
	g := &driver.RowGrad{Rows: []int64{0, 2}, Values: tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{5, -1, 0.5, -7}))}
	for _, s := range []driver.Stepper{mem, store} {
		if err := s.Step(context.Background(), clippedSGD{LearnRate: 0.1, Clip: 2}, g); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(mem.Weight.Float32s())
	raw := make([]byte, 2*store.RowBytes())
	if err := store.ReadRows(context.Background(), []int64{0, 2}, raw); err != nil {
		log.Fatal(err)
	}
	got := make([]float32, 4) // rows 0 and 2, little-endian float32s
	for i := range got {
		got[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	fmt.Println(got)

	err = mem.Step(context.Background(), clippedSGD{LearnRate: -1}, g)
	fmt.Println(errors.Is(err, gather.ErrOption), err)
	bad := &driver.RowGrad{Rows: []int64{1}, Values: tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float32{float32(math.NaN()), 0}))}
	err = mem.Step(context.Background(), clippedSGD{LearnRate: 0.1, Clip: 1}, bad)
	fmt.Println(errors.Is(err, optim.ErrNotFinite), err)
	// Output:
	// [0.8 1.1 2 2 2.95 3.2]
	// [0.8 1.1 2.95 3.2]
	// true clipped sgd: learning rate -1 must be finite and at least 0: option does not apply
	// true clipped sgd: the gradient of row 1 holds NaN at column 0; nothing was updated: value is not finite
}
