package nn

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/serve"
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
				served[k] = tb.At(11)
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
