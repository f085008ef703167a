package nn

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/cluster"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/localredis"
	"github.com/gathergrad/gather/optim"
	_ "github.com/gathergrad/gather/optim/clusterlua"
	"github.com/gathergrad/gather/table"
)

// A Shared table on a real Redis Cluster, stepped on the server by each
// row-wise optimiser for 100 steps by one worker, equals the same table
// trained in memory to the bit, values and state; two workers training
// it at once (rows at most two batches stale) both finish. So does a
// Shared table in front of a table.MemoryStore, which steps its rows
// under its lock, by the rule's Go function: the test double of a Redis
// Cluster.
func TestSharedEqualsMemory(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		cl := localredis.Start(t, 3, 0)
		o := cluster.Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 5 * time.Second}
		sharedEqualsMemory(t, func(name string, cols []driver.Column) func() driver.Store {
			require.NoError(t, cluster.Create(context.Background(), o, name, cmVocab, cmDim, tensor.Float32, table.WithSeed(4), table.WithState(cols...)))
			return func() driver.Store {
				s, err := cluster.Open(context.Background(), o, name)
				require.NoError(t, err)
				t.Cleanup(func() { s.Close() })
				return s
			}
		})
	})
	t.Run("memory store", func(t *testing.T) {
		sharedEqualsMemory(t, func(name string, cols []driver.Column) func() driver.Store {
			init, err := NewEmbedding(gorgonia.NewGraph(), name, cmVocab, cmDim, tensor.Float32, WithSeed(4))
			require.NoError(t, err)
			w0, err := init.Home().(Weights).Weight()
			require.NoError(t, err)
			s, err := table.NewMemoryStore(name, w0, cols...)
			require.NoError(t, err)
			return func() driver.Store { return s }
		})
	})
}

// sharedEqualsMemory runs TestSharedEqualsMemory on the stores that
// create(name, cols) makes, opened by the function it returns: a table
// of name, from the values NewEmbedding draws with seed 4, with the state
// cols.
func sharedEqualsMemory(t *testing.T, create func(name string, cols []driver.Column) func() driver.Store) {
	opts := map[string]func() optim.Sparse{
		"sgd":     func() optim.Sparse { return &optim.SparseSGD{LearnRate: 0.5, WeightDecay: 0.01} },
		"adam":    func() optim.Sparse { return optim.NewSparseAdam(0.05) },
		"adagrad": func() optim.Sparse { return optim.NewRowWiseAdagrad(0.2) },
		"sparse adagrad": func() optim.Sparse {
			return &optim.SparseAdagrad{LearnRate: 0.2, LRDecay: 0.01, InitialAccumulatorValue: 0.1, Eps: 1e-10}
		},
	}
	for name, newOpt := range opts {
		t.Run(name, func(t *testing.T) {
			const steps = 100
			g1 := gorgonia.NewGraph()
			mem, err := NewEmbedding(g1, "t", cmVocab, cmDim, tensor.Float32, WithSparse(), WithSeed(4))
			require.NoError(t, err)
			opt1, opt2 := newOpt(), newOpt()
			cols := opt2.Columns(cmDim)
			open := create(name, cols)
			shared := func(maxAge int) (*Embedding, *gorgonia.ExprGraph, driver.Store) {
				s := open()
				c, err := table.NewCached(context.Background(), s, table.CacheOptions{Budget: 1 << 20, Shared: &table.SharedOptions{MaxAge: maxAge}})
				require.NoError(t, err)
				g := gorgonia.NewGraph()
				e, err := CachedEmbedding(context.Background(), g, c)
				require.NoError(t, err)
				t.Cleanup(func() { e.Close(context.Background()) })
				return e, g, s
			}
			e2, g2, s := shared(0)
			m1 := newCachedModel(t, mem, g1, tensor.Float32)
			m2 := newCachedModel(t, e2, g2, tensor.Float32)
			for n := range steps {
				m1.step(t, n, opt1, false)
				m2.step(t, n, opt2, n%2 == 0)
			}
			ids := make([]int64, cmVocab)
			for i := range ids {
				ids[i] = int64(i)
			}
			raw := make([]byte, cmVocab*s.RowBytes())
			require.NoError(t, s.ReadRows(context.Background(), ids, raw))
			got := fileio.Float32s(raw)
			want, err := mem.Home().(Weights).Weight()
			require.NoError(t, err)
			state, err := optim.State(mem.Home().(Weights), opt1).State()
			require.NoError(t, err)
			width := len(got) / cmVocab
			for r := range cmVocab {
				for j := range cmDim {
					require.Equal(t, math.Float32bits(want.Float32s()[r*cmDim+j]), math.Float32bits(got[r*width+j]), "row %d value %d", r, j)
				}
				at := cmDim
				for _, col := range cols {
					s := state["t."+col.Name].(*tensor.Dense).Float32s()
					for j := range col.Width {
						require.Equal(t, math.Float32bits(s[r*col.Width+j]), math.Float32bits(got[r*width+at+j]), "row %d %s[%d]", r, col.Name, j)
					}
					at += col.Width
				}
			}

			// Two workers at once, rows at most two batches old.
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			for w := range 2 {
				e, g, _ := shared(2)
				m := newCachedModel(t, e, g, tensor.Float32)
				opt := newOpt()
				wg.Go(func() {
					for n := range 30 {
						ids, bag, y := cmBatchIDs(1000*w + n)
						copy(m.ids.Ints(), ids)
						copy(m.bagIDs.Ints(), bag)
						copy(m.y.Ints(), y)
						if err := m.vm.RunAll(); err != nil {
							errs <- fmt.Errorf("worker %d: %w", w, err)
							return
						}
						if err := m.emb.Step(context.Background(), opt); err != nil {
							errs <- fmt.Errorf("worker %d: %w", w, err)
							return
						}
						m.vm.Reset()
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		})
	}
}
