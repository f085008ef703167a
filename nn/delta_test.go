package nn

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gathergrad/gather/table/driver"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/serve"
	"github.com/gathergrad/gather/table"
)

// A served table that applies each delta of a table that keeps training
// holds, after each, the training table's rows: bit for bit as float32,
// byte for byte what Quantize makes of them in float16, int8 and int4;
// for a table in the heap, behind a cache, and in a collection. A delta
// holds exactly the rows stepped since the last, and a delta written to
// a file reads back the same.
func TestDeltasServeTheTrainingTable(t *testing.T) {
	for _, home := range []string{"heap", "cached", "collection"} {
		t.Run(home, func(t *testing.T) {
			spec := collSpec{tableOf: []int{0}, modes: []BagMode{BagSum}, vocab: []int{5000}, pad: []int{-1}, dim: 4, // 79 chunks of 64 rows
				dtype: tensor.Float32, cached: home == "cached", rule: &optim.SparseSGD{LearnRate: 0.5}}
			capacity := collPer // a separate Bag reads all its ids; a collection, up to its last offset
			if home == "collection" {
				capacity += 3
			}
			m := newCollModel(t, spec, home == "collection", capacity)
			e := m.tables[0]
			e.TrackChanges()
			rowsOf := func() []float32 {
				var out []float32
				for _, v := range m.rows(t)[0] {
					out = append(out, float32(v))
				}
				return out
			}
			formats := []serve.Format{serve.Float32, serve.Float16, serve.Int8, serve.Int4}
			served := make([]*serve.Table, len(formats))
			for k, f := range formats {
				tb, err := serve.Quantize(rowsOf(), spec.dim, f)
				require.NoError(t, err)
				served[k] = tb.At(11).Named(e.Name())
			}
			r := rand.New(rand.NewPCG(8, 8))
			for seq := uint64(1); seq <= 4; seq++ {
				var stepped []int64
				for range 2 {
					l, v, w := collBatchOf(spec, r)
					m.set(spec, l, v, w)
					for _, id := range v {
						stepped = append(stepped, id)
					}
					m.step(t, spec.rule)
				}
				d, err := e.Delta(context.Background(), 11, seq)
				require.NoError(t, err)
				slices.Sort(stepped)
				assert.Equal(t, slices.Compact(stepped), d.Rows, "the delta's rows: those stepped")
				path := filepath.Join(t.TempDir(), fmt.Sprintf("d%d", seq))
				require.NoError(t, checkpoint.WriteDelta(path, d))
				d, err = checkpoint.ReadDelta(path)
				require.NoError(t, err)
				want := rowsOf()
				for k, f := range formats {
					before := served[k].Bytes()
					next, err := served[k].Apply(d)
					require.NoError(t, err)
					assert.Equal(t, before, served[k].Bytes(), "%v: the table applied to is not changed", f)
					served[k] = next
					ref, err := serve.Quantize(want, spec.dim, f)
					require.NoError(t, err)
					require.Equal(t, ref.Bytes(), next.Bytes(), "%v after delta %d", f, seq)
					b, s := next.Version()
					assert.Equal(t, [2]uint64{11, seq}, [2]uint64{b, s})
				}
			}
			d, err := e.Delta(context.Background(), 11, 5)
			require.NoError(t, err)
			assert.Empty(t, d.Rows, "no step since the last delta")
		})
	}
	g := gorgonia.NewGraph()
	e, _ := NewEmbedding(g, "x", 3, 2, tensor.Float32, WithSparse())
	_, err := e.Delta(context.Background(), 1, 1)
	assert.ErrorIs(t, err, gather.ErrOption, "Delta without TrackChanges")
}

// Deltas of a table fed raw ids carry the rows its map gave ids: a
// server's IDs with each delta applied map every id the trainer's map
// holds to its row, and read the trainer's values there, while rows are
// taken back and given again.
func TestDeltasCarryTheIDMap(t *testing.T) {
	const rows = 12
	m0, err := table.NewIDMap("t0", driver.IDMapOptions{Rows: rows, Pad: true, PadID: -1})
	require.NoError(t, err)
	spec := collSpec{tableOf: []int{0}, modes: []BagMode{BagSum}, vocab: []int{rows + 1}, pad: []int{rows}, dim: 3,
		dtype: tensor.Float32, maps: []driver.Mapper{m0}, init: driver.RowInit{Seed: 2, Std: 0.1}}
	m := newCollModel(t, spec, true, collPer)
	e := m.tables[0]
	e.TrackChanges()
	ids := serve.NewIDs(m0)
	w0, _ := e.Home().(Weights).Weight()
	tb, err := serve.Quantize(append([]float32{}, w0.Float32s()...), spec.dim, serve.Float32)
	require.NoError(t, err)
	tb = tb.At(1).Named(e.Name())
	r := rand.New(rand.NewPCG(6, 1))
	for step := range 8 {
		lengths, _, _ := collBatchOf(spec, r)
		pool := r.Perm(30)[:5]
		var values []int64
		for _, n := range lengths {
			for range n {
				values = append(values, int64(pool[r.IntN(5)])*7919)
			}
		}
		m.set(spec, lengths, values, nil)
		require.NoError(t, m.coll.Map(context.Background(), m.values, m.offsets, int64(step)))
		m.step(t, &optim.SparseSGD{LearnRate: 0.3})
		d, err := e.Delta(context.Background(), 1, uint64(step+1))
		require.NoError(t, err)
		if ids, err = ids.Apply(d); err != nil {
			t.Fatal(err)
		}
		if tb, err = tb.Apply(d); err != nil {
			t.Fatal(err)
		}
		held, heldRows := m0.Held()
		got := make([]int64, len(held))
		require.NoError(t, ids.Rows(got, held))
		require.Equal(t, heldRows, got, "step %d: the served rows of the held ids", step)
		w, _ := e.Home().(Weights).Weight()
		want, out := make([]float32, len(held)*spec.dim), make([]float32, len(held)*spec.dim)
		for k, row := range heldRows {
			copy(want[k*spec.dim:], w.Float32s()[int(row)*spec.dim:int(row+1)*spec.dim])
		}
		require.NoError(t, tb.Lookup(out, got))
		require.Equal(t, want, out, "step %d: the served values of the held ids", step)
	}
	st, err := m0.Stats(context.Background())
	require.NoError(t, err)
	assert.Positive(t, st.Evicted, "rows were taken back and given again")
	assert.Equal(t, st.Used, ids.Len())
}
