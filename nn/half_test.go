package nn

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gathergrad/gather/table/driver"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// allRows reads every row of c, values and state, as float32.
func allRows(t *testing.T, c *table.Cached) []float32 {
	ids := make([]int64, cmVocab)
	for i := range ids {
		ids[i] = int64(i)
	}
	got, err := c.Read(context.Background(), ids)
	require.NoError(t, err)
	return got.Float32s()
}

// A half table (float16 and bfloat16) trains the same in memory
// (NewHalfMemoryStore) and in a file (Create with WithHalf), closed and
// reopened half way, behind caches of different sizes, with prefetch or
// not, bit for bit: values and state. Every value is one of the format's,
// and rounding stochastically is not rounding to nearest.
func TestHalfTables(t *testing.T) {
	opts := map[string]func() optim.Sparse{
		"sgd":     func() optim.Sparse { return &optim.SparseSGD{LearnRate: 0.3} },
		"adam":    func() optim.Sparse { return optim.NewSparseAdam(0.05) },
		"adagrad": func() optim.Sparse { return optim.NewRowWiseAdagrad(0.2) },
	}
	for _, f := range []driver.Format{driver.Float16, driver.BFloat16} {
		for name, newOpt := range opts {
			t.Run(fmt.Sprintf("%v/%s", f, name), func(t *testing.T) { halfTables(t, f, newOpt) })
		}
	}
}

func halfTables(t *testing.T, f driver.Format, newOpt func() optim.Sparse) {
	const steps = 40
	ctx := context.Background()
	cols := newOpt().Columns(cmDim)
	width := cmDim
	for _, c := range cols {
		width += c.Width
	}
	budget := func(slots int) int64 { return int64(slots * (width*4 + 72)) }

	// In memory, from the values NewEmbedding draws with the seed.
	g0 := gorgonia.NewGraph()
	init, err := NewEmbedding(g0, "t", cmVocab, cmDim, tensor.Float32, WithSeed(4))
	require.NoError(t, err)
	w0, err := init.Home().(Weights).Weight()
	require.NoError(t, err)
	memory := func(o table.CacheOptions) (*Embedding, *table.Cached, *cachedModel) {
		store, err := table.NewHalfMemoryStore("t", w0, f, cols...)
		require.NoError(t, err)
		o.Budget = budget(3 * cmBatch)
		c, err := table.NewCached(ctx, store, o)
		require.NoError(t, err)
		g := gorgonia.NewGraph()
		emb, err := CachedEmbedding(ctx, g, c)
		require.NoError(t, err)
		t.Cleanup(func() { emb.Close(ctx) })
		return emb, c, newCachedModel(t, emb, g, tensor.Float32)
	}
	_, c1, m1 := memory(table.CacheOptions{Rounding: table.Rounding{Seed: 9}})
	opt1 := newOpt()
	for n := range steps {
		m1.step(t, n, opt1, false)
	}
	require.NoError(t, m1.emb.Home().(Syncer).Sync(context.Background()))
	want := allRows(t, c1)

	// In a file, reopened half way.
	path := filepath.Join(t.TempDir(), "t.safetensors")
	opts := []driver.Option{table.WithSeed(4), table.WithHalf(f)}
	if len(cols) > 0 {
		opts = append(opts, table.WithState(cols...))
	}
	require.NoError(t, table.Create(path, "t", cmVocab, cmDim, tensor.Float32, opts...))
	opt2 := newOpt()
	for _, span := range [][2]int{{0, steps / 2}, {steps / 2, steps}} {
		c, err := table.OpenCached(ctx, path, table.CacheOptions{Budget: budget(5 * cmBatch), Rounding: table.Rounding{Seed: 9}}, table.FileOptions{})
		require.NoError(t, err)
		require.Equal(t, f, c.Schema().Format)
		g := gorgonia.NewGraph()
		emb, err := CachedEmbedding(ctx, g, c)
		require.NoError(t, err)
		m := newCachedModel(t, emb, g, tensor.Float32)
		for n := span[0]; n < span[1]; n++ {
			m.step(t, n, opt2, true)
		}
		if span[1] == steps {
			require.NoError(t, emb.Home().(Syncer).Sync(context.Background()))
			require.Equal(t, want, allRows(t, c), "the file's rows and state against memory's")
		}
		require.NoError(t, emb.Close(ctx))
	}
	for r := range cmVocab {
		for j := range cmDim {
			v := want[r*width+j]
			one := []float32{v}
			table.RoundValues(f, one)
			require.Equal(t, v, one[0], "row %d value %d is not a value of the format", r, j)
		}
	}
	if len(cols) == 0 {
		// The file holds F16 or BF16 values, which checkpoint.Read (as
		// PyTorch's safetensors) reads.
		infos, _, err := checkpoint.Inspect(path)
		require.NoError(t, err)
		assert.Equal(t, map[driver.Format]string{driver.Float16: "F16", driver.BFloat16: "BF16"}[f], infos[0].Format)
		ts, _, err := checkpoint.Read(path)
		require.NoError(t, err)
		assert.Equal(t, want, ts["t.weight"].Float32s())
	}

	// Rounding to nearest trains to other values.
	_, c3, m3 := memory(table.CacheOptions{Rounding: table.Rounding{Nearest: true}})
	opt3 := newOpt()
	for n := range steps {
		m3.step(t, n, opt3, false)
	}
	require.NoError(t, m3.emb.Home().(Syncer).Sync(context.Background()))
	assert.NotEqual(t, want, allRows(t, c3))
}
