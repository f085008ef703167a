package nn

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/cluster"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/localredis"
	"github.com/gathergrad/gather/internal/vmtest"
	"github.com/gathergrad/gather/optim"
	_ "github.com/gathergrad/gather/optim/clusterlua"
	"github.com/gathergrad/gather/serve"
	"github.com/gathergrad/gather/table"
)

// A collection of Shared tables on a Redis Cluster steps them all in one
// pipelined round trip per master (of 3), where a Step a table takes one
// per table and master, and trains them to the bits of the same
// collection in memory.
func TestCollectionOnCluster(t *testing.T) {
	cl := localredis.Start(t, 3, 0)
	o := cluster.Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 5 * time.Second}
	ctx := context.Background()
	const tables, vocab, dim, steps = 4, 300, 4, 6
	spec := collSpec{tableOf: []int{0, 1, 2, 3}, modes: []BagMode{BagSum, BagMean, BagSum, BagSum},
		vocab: []int{vocab, vocab, vocab, vocab}, pad: []int{-1, -1, -1, -1}, dim: dim, dtype: tensor.Float32}
	mem := newCollModel(t, spec, true, tables*collPer)

	// The same tables on the cluster: each starts as mem's does.
	g := gorgonia.NewGraph()
	var feats []Feature
	var stores []*cluster.Store
	for k, e := range mem.tables {
		name := fmt.Sprintf("coll%d", k)
		require.NoError(t, cluster.Create(ctx, o, name, vocab, dim, tensor.Float32))
		s, err := cluster.Open(ctx, o, name)
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		w, err := e.Home().(Weights).Weight()
		require.NoError(t, err)
		ids := make([]int64, vocab)
		for i := range ids {
			ids[i] = int64(i)
		}
		require.NoError(t, s.WriteRows(ctx, ids, fileio.LittleEndianBytes(w.Float32s())))
		c, err := table.NewCached(ctx, s, table.CacheOptions{Budget: 1 << 20, Shared: &table.SharedOptions{}})
		require.NoError(t, err)
		emb, err := CachedEmbedding(ctx, g, c)
		require.NoError(t, err)
		t.Cleanup(func() { emb.Close(ctx) })
		feats = append(feats, Feature{Key: fmt.Sprintf("f%d", k), Table: emb, Mode: spec.modes[k]})
		stores = append(stores, s)
	}
	coll, err := NewCollection(feats, CollectionOptions{})
	require.NoError(t, err)
	values := tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(tables*collPer))
	offsets := tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(tables*collBatch+1))
	pooled, err := coll.Bag(gorgonia.NodeFromAny(g, values, gorgonia.WithName("values")), gorgonia.NodeFromAny(g, offsets, gorgonia.WithName("offsets")), nil)
	require.NoError(t, err)
	coef := mem.g.ByName("coef")[0].Value().(*tensor.Dense)
	cn := gorgonia.NodeFromAny(g, coef.Clone().(*tensor.Dense), gorgonia.WithName("coef"))
	loss := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(pooled, cn))))
	_, err = gorgonia.Grad(loss, coll.GradNodes()...)
	require.NoError(t, err)
	vm := vmtest.New(t, g)
	defer vm.Close()

	pipes := func() uint64 {
		var n uint64
		for _, s := range stores {
			n += s.Stats().StepPipelines
		}
		return n
	}
	// Table 0's deltas go through the cluster to a server: another
	// process's store reads each (ReadDelta) and applies it to the table
	// it serves, which then holds the cluster's rows, bit for bit.
	feats[0].Table.TrackChanges()
	all := make([]int64, vocab)
	for i := range all {
		all[i] = int64(i)
	}
	reader, err := cluster.Open(ctx, o, "coll0")
	require.NoError(t, err)
	defer reader.Close()
	clusterRows := func(s *cluster.Store) []float32 {
		buf := make([]byte, vocab*s.RowBytes())
		require.NoError(t, s.ReadRows(ctx, all, buf))
		return fileio.Float32s(buf)
	}
	served, err := serve.Quantize(clusterRows(reader), dim, serve.Float32)
	require.NoError(t, err)
	served = served.At(9).Named(feats[0].Table.Name())
	_, err = reader.ReadDelta(ctx, 9, 1)
	assert.ErrorIs(t, err, cluster.ErrNoDelta, "before it is published")

	r := rand.New(rand.NewPCG(4, 4))
	o1, o2 := &optim.SparseSGD{LearnRate: 0.3}, &optim.SparseSGD{LearnRate: 0.3}
	for step := range steps {
		lengths, vals, _ := collBatchOf(spec, r)
		mem.set(spec, lengths, vals, nil)
		mem.step(t, o1)
		copy(values.Int64s(), vals)
		off := offsets.Int64s()
		for k, n := range lengths {
			off[k+1] = off[k] + n
		}
		require.NoError(t, vm.RunAll())
		before := pipes()
		require.NoError(t, coll.Step(ctx, o2))
		if step > 0 { // the first loads the Function and calls again
			assert.Equal(t, uint64(3), pipes()-before, "step %d: one pipeline to each master for the %d tables", step, tables)
		}
		vm.Reset()
		require.Equal(t, floatsOf(mem.out.Value().(tensor.Tensor)), floatsOf(pooled.Value().(tensor.Tensor)), "step %d", step)

		d, err := feats[0].Table.Delta(ctx, 9, uint64(step+1))
		require.NoError(t, err)
		require.NotEmpty(t, d.Rows)
		require.NoError(t, stores[0].PublishDelta(ctx, d, time.Minute))
		got, err := reader.ReadDelta(ctx, 9, uint64(step+1))
		require.NoError(t, err)
		served, err = served.Apply(got)
		require.NoError(t, err)
		out := make([]float32, vocab*dim)
		require.NoError(t, served.Lookup(out, all))
		require.Equal(t, clusterRows(reader), out, "step %d: the served table with the cluster's deltas", step)
	}
	want := mem.rows(t)
	for k, s := range stores {
		ids := make([]int64, vocab)
		for i := range ids {
			ids[i] = int64(i)
		}
		buf := make([]byte, vocab*s.RowBytes())
		require.NoError(t, s.ReadRows(ctx, ids, buf))
		got := make([]float64, vocab*dim)
		for i := range got {
			got[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:])))
		}
		require.Equal(t, want[k], got, "table %d", k)
	}
}
