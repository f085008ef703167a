package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// Training on raw 64-bit ids through a table.IDMap (every id admitted at
// once, rows for all of them) is bit for bit training a fixed table on
// the same ids numbered in order of first appearance, each row starting
// from table.InitialRow of its id: the map gives rows in that order, and
// the default row (the padding row) is never read.
func TestRawIDsEqualNumbered(t *testing.T) {
	const rows, dim, batch, steps, seed = 40, 4, 16, 25, 5
	r := rand.New(rand.NewPCG(11, 12))
	raw := make([]int64, 30)
	for k := range raw {
		raw[k] = int64(r.Uint64()) // any value, negative too
	}
	stream := make([][]int64, steps)
	for s := range stream {
		for range batch {
			stream[s] = append(stream[s], raw[min(r.IntN(len(raw)), r.IntN(len(raw)))]) // the first ids more often
		}
	}
	type model struct {
		emb *Embedding
		ids *tensor.Dense
		vm  interface {
			RunAll() error
			Reset()
		}
	}
	build := func(name string) model {
		g := gorgonia.NewGraph()
		emb, err := NewEmbedding(g, name, rows+1, dim, tensor.Float32, WithSparse(), WithPadding(rows))
		require.NoError(t, err)
		w, err := emb.Weight()
		require.NoError(t, err)
		w.Zero()
		ids := tensor.New(tensor.WithShape(batch), tensor.Of(tensor.Int))
		n := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(batch), gorgonia.WithName("ids"), gorgonia.WithValue(ids))
		h, err := emb.Lookup(n)
		require.NoError(t, err)
		_, err = gorgonia.Grad(gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.Square(h)))), emb.GradNodes()...)
		require.NoError(t, err)
		vm := gorgonia.NewTapeMachine(g)
		t.Cleanup(func() { vm.Close() })
		return model{emb, ids, vm}
	}
	step := func(m model, ids []int64, opt optim.Sparse) {
		for k, id := range ids {
			m.ids.Ints()[k] = int(id)
		}
		require.NoError(t, m.vm.RunAll())
		require.NoError(t, m.emb.Step(opt))
		m.vm.Reset()
	}

	// The raw ids, mapped.
	a := build("a")
	wa, _ := a.emb.Weight()
	m, err := table.NewIDMap("a", table.IDMapOptions{Rows: rows})
	require.NoError(t, err)
	mapped := make([]int64, batch)
	optA := optim.NewSparseAdam(0.05)
	var fresh []table.Assignment
	for s, ids := range stream {
		fresh, err = m.Map(ids, mapped, int64(s), fresh[:0])
		require.NoError(t, err)
		for _, f := range fresh {
			table.InitialRow(wa.Float32s()[f.Row*dim:(f.Row+1)*dim], seed, f.ID)
		}
		step(a, mapped, optA)
	}

	// The same ids numbered in order of first appearance.
	b := build("b")
	wb, _ := b.emb.Weight()
	number := map[int64]int64{}
	optB := optim.NewSparseAdam(0.05)
	for _, ids := range stream {
		for _, id := range ids {
			if _, ok := number[id]; !ok {
				number[id] = int64(len(number))
				table.InitialRow(wb.Float32s()[number[id]*dim:(number[id]+1)*dim], seed, id)
			}
		}
	}
	numbered := make([]int64, batch)
	for _, ids := range stream {
		for k, id := range ids {
			numbered[k] = number[id]
		}
		step(b, numbered, optB)
	}

	for i, v := range wa.Float32s() {
		require.Equal(t, math.Float32bits(wb.Float32s()[i]), math.Float32bits(v), "value %d", i)
	}
	require.Equal(t, len(number), m.Stats().Used)
}
