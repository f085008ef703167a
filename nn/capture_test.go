package nn

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/cluster"
	"github.com/gathergrad/gather/internal/localredis"
	"github.com/gathergrad/gather/machine"
	"github.com/gathergrad/gather/optim"
	_ "github.com/gathergrad/gather/optim/clusterlua"
	"github.com/gathergrad/gather/table"
)

// A step trains what its run saw: between RunAll and Step, binding the
// next batch's ids (in place, or a new tensor with gorgonia.Let) or
// running an evaluation machine on other ids (Gorgonia's TapeMachine or a
// machine.Machine, on SubgraphRoots) changes nothing trained, for a table
// in memory, in a mapped file, in a cached file and shared on a Redis
// Cluster, through a lookup and a mean bag.
func TestStepTrainsWhatItsRunSaw(t *testing.T) {
	homes := []string{"memory", "mapped", "cached", "shared"}
	meddle := map[string]func(t *testing.T, m *cachedModel, n int){
		"next batch in place": func(t *testing.T, m *cachedModel, n int) {
			ids, bag, y := cmBatchIDs(n + 1)
			copy(m.ids.Ints(), ids)
			copy(m.bagIDs.Ints(), bag)
			copy(m.y.Ints(), y)
		},
		"next batch by Let": func(t *testing.T, m *cachedModel, n int) {
			ids, bag, _ := cmBatchIDs(n + 1)
			require.NoError(t, gorgonia.Let(m.g.ByName("ids")[0], tensor.New(tensor.WithBacking(ids))))
			require.NoError(t, gorgonia.Let(m.g.ByName("bag")[0], tensor.New(tensor.WithBacking(bag))))
		},
		"tape on SubgraphRoots": func(t *testing.T, m *cachedModel, n int) {
			evaluate(t, m, n, func(g *gorgonia.ExprGraph) gorgonia.VM { return gorgonia.NewTapeMachine(g) })
		},
		"machine on SubgraphRoots": func(t *testing.T, m *cachedModel, n int) {
			evaluate(t, m, n, func(g *gorgonia.ExprGraph) gorgonia.VM {
				vm, err := machine.New(g)
				require.NoError(t, err)
				return vm
			})
		},
	}
	for _, home := range homes {
		var cluster *localredis.Cluster
		if home == "shared" {
			cluster = localredis.Start(t, 3, 0)
		}
		for name, f := range meddle {
			for _, train := range []string{"tape", "machine"} {
				t.Run(home+"/"+name+"/"+train, func(t *testing.T) {
					want := captureModel(t, home, cluster, "want")
					got := captureModel(t, home, cluster, "got")
					// The model trained with meddling runs on one machine:
					// vmtest's twin compares node values, which an
					// evaluation machine on the same nodes changes.
					got.vm.Close()
					if train == "tape" {
						got.vm = gorgonia.NewTapeMachine(got.g)
					} else {
						vm, err := machine.New(got.g)
						require.NoError(t, err)
						got.vm = vm
					}
					opt1, opt2 := optim.NewSparseAdam(0.05), optim.NewSparseAdam(0.05)
					for n := range 4 {
						want.step(t, n, opt1, false)

						ids, bag, y := cmBatchIDs(n)
						require.NoError(t, gorgonia.Let(got.g.ByName("ids")[0], got.ids))
						require.NoError(t, gorgonia.Let(got.g.ByName("bag")[0], got.bagIDs))
						copy(got.ids.Ints(), ids)
						copy(got.bagIDs.Ints(), bag)
						copy(got.y.Ints(), y)
						require.NoError(t, got.vm.RunAll())
						f(t, got, n)
						require.NoError(t, got.emb.Step(context.Background(), opt2))
						got.vm.Reset()
					}
					w, g := tableValues(t, want.emb), tableValues(t, got.emb)
					for k := range w {
						if math.Float32bits(w[k]) != math.Float32bits(g[k]) {
							t.Fatalf("value %d (row %d): %v, stepped without the meddling %v", k, k/cmDim, g[k], w[k])
						}
					}
				})
			}
		}
	}
}

// evaluate runs the forward pass of m's loss on a machine vm makes of
// its SubgraphRoots, on batch 1000+n.
func evaluate(t *testing.T, m *cachedModel, n int, vm func(*gorgonia.ExprGraph) gorgonia.VM) {
	ids, bag, y := cmBatchIDs(1000 + n)
	copy(m.ids.Ints(), ids)
	copy(m.bagIDs.Ints(), bag)
	copy(m.y.Ints(), y)
	ev := vm(m.g.SubgraphRoots(m.loss))
	defer ev.Close()
	require.NoError(t, ev.RunAll())
	require.NotNil(t, m.loss.Value())
}

// captureModel returns a cachedModel of a float32 table of cmVocab rows
// drawn with seed 4, living in home, named name.
func captureModel(t *testing.T, home string, cl *localredis.Cluster, name string) *cachedModel {
	g := gorgonia.NewGraph()
	cols := optim.NewSparseAdam(0.05).Columns(cmDim)
	var emb *Embedding
	var err error
	switch home {
	case "memory":
		emb, err = NewEmbedding(g, name, cmVocab, cmDim, tensor.Float32, WithSparse(), WithSeed(4))
	case "mapped":
		path := filepath.Join(t.TempDir(), "t.safetensors")
		require.NoError(t, table.Create(path, name, cmVocab, cmDim, tensor.Float32, table.WithSeed(4)))
		emb, err = OpenEmbedding(g, path, name)
	case "cached":
		path := filepath.Join(t.TempDir(), "t.safetensors")
		require.NoError(t, table.Create(path, name, cmVocab, cmDim, tensor.Float32, table.WithSeed(4), table.WithState(cols...)))
		c, err := table.OpenCached(context.Background(), path, table.CacheOptions{Budget: 1 << 20}, table.FileOptions{})
		require.NoError(t, err)
		emb, err = CachedEmbedding(context.Background(), g, c)
		require.NoError(t, err)
	case "shared":
		o := cluster.Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 5 * time.Second}
		name += "-" + t.Name()
		ctx := context.Background()
		require.NoError(t, cluster.Create(ctx, o, name, cmVocab, cmDim, tensor.Float32, table.WithSeed(4), table.WithState(cols...)))
		s, err := cluster.Open(ctx, o, name)
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		c, err := table.NewCached(ctx, s, table.CacheOptions{Budget: 1 << 20, Shared: &table.SharedOptions{}})
		require.NoError(t, err)
		emb, err = CachedEmbedding(ctx, g, c)
		require.NoError(t, err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { emb.Close(context.Background()) })
	return newCachedModel(t, emb, g, tensor.Float32)
}

// tableValues returns every value of emb's table.
func tableValues(t *testing.T, emb *Embedding) []float32 {
	if h, ok := emb.Home().(Cache); ok {
		c := h.Cached()
		ids := make([]int64, cmVocab)
		for i := range ids {
			ids[i] = int64(i)
		}
		rows, err := c.Read(context.Background(), ids)
		require.NoError(t, err)
		return slices.Clone(rows.Float32s())
	}
	w, err := emb.Home().(Weights).Weight()
	require.NoError(t, err)
	return slices.Clone(w.Float32s())
}

// A Step whose lookups did not all capture a gradient since the last
// Step is refused, naming the table, and changes nothing: before any run,
// and after a Step when only an evaluation ran since.
func TestStepNeedsACapturedGradient(t *testing.T) {
	m := captureModel(t, "memory", nil, "words")
	opt := optim.NewSparseAdam(0.05)
	before := tableValues(t, m.emb)
	err := m.emb.Step(context.Background(), opt)
	require.ErrorIs(t, err, gather.ErrGraph)
	require.ErrorContains(t, err, `embedding "words"`)
	require.ErrorContains(t, err, "has not run")
	require.Equal(t, before, tableValues(t, m.emb))
	m.step(t, 0, opt, false)
	after := tableValues(t, m.emb)
	require.NotEqual(t, before, after)
	evaluate(t, m, 1, func(g *gorgonia.ExprGraph) gorgonia.VM { return gorgonia.NewTapeMachine(g) })
	err = m.emb.Step(context.Background(), opt)
	require.ErrorIs(t, err, gather.ErrGraph, "an evaluation computes no gradient")
	require.ErrorContains(t, err, "since the last Step")
	require.Equal(t, after, tableValues(t, m.emb))
}
