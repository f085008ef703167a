// Package tabletest trains tables the same way in the tests of every
// home (table's, cluster's): a step of a batch of ids half from 20 hot
// rows, SparseAdam by Cached.Step.
package tabletest

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// The tables the steps train: Vocab rows of Dim values; Batch ids a step.
const Vocab, Dim, Batch = 2000, 4, 48

// Opt is the optimiser of Step.
var Opt = optim.NewSparseAdam(0.01)

// Step runs training step n on c: a batch of ids (half from 20 hot
// rows), a gradient drawn from n, SparseAdam by Cached.Step.
func Step(c *table.Cached, n int) error { return StepWith(c, n, Opt) }

// StepWith is Step with the optimiser opt.
func StepWith(c *table.Cached, n int, opt optim.Sparse) error {
	r := rand.New(rand.NewPCG(uint64(n), 5))
	ids := make([]int64, Batch)
	for k := range ids {
		if k%2 == 0 {
			ids[k] = int64(r.IntN(20))
		} else {
			ids[k] = int64(r.IntN(Vocab))
		}
	}
	c.NewBatch()
	slots := make([]int32, Batch)
	if err := c.Fetch(context.Background(), ids, slots); err != nil {
		return err
	}
	rows := slices.Clone(ids)
	slices.Sort(rows)
	rows = slices.Compact(rows)
	vals := make([]float32, len(rows)*Dim)
	for i := range vals {
		vals[i] = float32(r.NormFloat64())
	}
	g := &optim.RowGrad{Rows: rows, Values: tensor.New(tensor.WithShape(len(rows), Dim), tensor.WithBacking(vals))}
	return c.Step(context.Background(), opt, g)
}

// Trained returns a table in memory trained for steps steps by Step
// behind a cache of 64 rows, synced, and the cache.
func Trained(t testing.TB, steps int) (*table.MemoryStore, *table.Cached) {
	cols := Opt.Columns(Dim)
	w := tensor.New(tensor.WithShape(Vocab, Dim), tensor.WithBacking(make([]float32, Vocab*Dim)))
	for i := range w.Float32s() {
		w.Float32s()[i] = float32(i%97) / 7
	}
	store, err := table.NewMemoryStore("t", w, cols...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := table.NewCached(context.Background(), store, table.CacheOptions{Budget: 64 * (3*Dim*4 + 72)})
	if err != nil {
		t.Fatal(err)
	}
	for n := range steps {
		if err := Step(c, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return store, c
}
