package nn

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/cluster"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/localredis"
	"github.com/gathergrad/gather/optim"
	_ "github.com/gathergrad/gather/optim/clusterlua"
	"github.com/gathergrad/gather/table"
)

// Training raw ids on a Redis Cluster through a map that lives there
// (NewRawIDs of a cluster.IDMap: every id admitted at once, rows for all of them) is
// bit for bit training a fixed table in memory on the same ids numbered
// in order of first appearance, each row starting from table.InitialRow
// of its id, with SparseAdam: each raw id's values and Adam state equal
// those of its number. (Rows differ: the map's are its tags'.) A step
// takes the round trips of numbered ids. Two workers then train the
// table at once, the map shared.
func TestSharedRawIDsEqualNumbered(t *testing.T) {
	cl := localredis.Start(t, 3, 0)
	o := cluster.Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 5 * time.Second}
	ctx := context.Background()
	const dim, batch, steps, seed, distinct = 4, 16, 25, 5, 30
	const rows = 8 * 1024 // 8 rows a tag: no tag fills with 30 ids
	stream := rawStream(11, distinct, steps, batch)

	wb, number, eb, optB := trainNumbered(t, stream, distinct, dim, seed)

	cols := optim.NewSparseAdam(0.05).Columns(dim)
	require.NoError(t, cluster.Create(ctx, o, "raw", rows+1, dim, tensor.Float32, table.WithState(cols...)))
	mo := driver.IDMapOptions{Rows: rows}
	worker := func() (rawModel, *RawIDs, *cluster.IDMap, *cluster.Store) {
		s, err := cluster.Open(ctx, o, "raw")
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		m, err := cluster.NewIDMap(ctx, s, mo, driver.RowInit{Seed: seed, Std: 1})
		require.NoError(t, err)
		c, err := table.NewCached(ctx, s, table.CacheOptions{Budget: 1 << 20, Shared: &table.SharedOptions{}})
		require.NoError(t, err)
		g := gorgonia.NewGraph()
		emb, err := CachedEmbedding(ctx, g, c, WithPadding(rows))
		require.NoError(t, err)
		t.Cleanup(func() { emb.Close(ctx) })
		raw, err := NewRawIDs(emb, m, m.RowInit())
		require.NoError(t, err)
		return newRawModel(t, g, emb, batch), raw, m, s
	}
	a, raw, m, s := worker()
	optA := optim.NewSparseAdam(0.05)
	var pipes uint64
	for step, ids := range stream {
		require.NoError(t, raw.Map(ctx, ids, a.ids, int64(step)))
		a.step(t, optA)
		if step == 0 { // the first step loads the Functions, and calls again
			pipes = s.Stats().Pipelines
		}
	}
	// A step is one pipeline to each master (of 3) to map and read, one
	// to step: the map has no round trip of its own.
	require.LessOrEqual(t, s.Stats().Pipelines-pipes, uint64(2*3*(steps-1)))
	st, err := m.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, driver.IDMapStats{Used: len(number), Admitted: uint64(len(number))}, st)

	// Each raw id's row, values and state, against its number's.
	all := make([]int64, 0, len(number))
	for id := range number {
		all = append(all, id)
	}
	at := make([]int64, len(all))
	_, err = m.Map(ctx, all, at, steps, nil)
	require.NoError(t, err)
	got := make([]byte, len(all)*s.RowBytes())
	require.NoError(t, s.ReadRows(ctx, at, got))
	state, err := optim.State(eb.Home().(Weights), optB).State()
	require.NoError(t, err)
	width := s.RowBytes() / 4
	for k, id := range all {
		row := fileio.Float32s(got)[k*width : (k+1)*width]
		n := int(number[id])
		for j := range dim {
			require.Equal(t, math.Float32bits(wb.Float32s()[n*dim+j]), math.Float32bits(row[j]), "id %d value %d", id, j)
		}
		off := dim
		for _, col := range cols {
			v := state["b."+col.Name].(*tensor.Dense).Float32s()
			for j := range col.Width {
				require.Equal(t, math.Float32bits(v[n*col.Width+j]), math.Float32bits(row[off+j]), "id %d %s[%d]", id, col.Name, j)
			}
			off += col.Width
		}
	}

	// Two workers at once on new ids: one row each, every step applied.
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := range 2 {
		a, raw, _, _ := worker()
		opt := optim.NewSparseAdam(0.05)
		more := rawStream(uint64(20+w), distinct, 10, batch)
		wg.Go(func() {
			for step, ids := range more {
				if err := raw.Map(ctx, ids, a.ids, int64(steps+1+step)); err != nil {
					errs <- err
					return
				}
				if err := a.vm.RunAll(); err != nil {
					errs <- err
					return
				}
				if err := a.emb.Step(context.Background(), opt); err != nil {
					errs <- err
					return
				}
				a.vm.Reset()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st, err = m.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, st.Admitted, uint64(st.Used))
	require.Zero(t, st.Evicted+st.Rejected)

	// A table that is not a Shared cache of the map's store is refused.
	s2, err := cluster.Open(ctx, o, "raw")
	require.NoError(t, err)
	defer s2.Close()
	c2, err := table.NewCached(ctx, s2, table.CacheOptions{Budget: 1 << 20})
	require.NoError(t, err)
	e2, err := CachedEmbedding(ctx, gorgonia.NewGraph(), c2, WithPadding(rows))
	require.NoError(t, err)
	defer e2.Close(ctx)
	_, err = NewRawIDs(e2, m, m.RowInit())
	require.ErrorIs(t, err, gather.ErrOption)
}
