package nn

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/gathergrad/gather/internal/vmtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/ref"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// table.Create draws the values NewEmbedding draws for a seed (across
// several blocks of rows), zeroes the padding row, and writes a file
// checkpoint.Read reads.
func TestCreateTableMatchesNewEmbedding(t *testing.T) {
	const vocab, dim = 3*kernel.NormalBlock + 17, 3
	for _, dt := range floatDtypes {
		path := filepath.Join(t.TempDir(), "t.safetensors")
		require.NoError(t, table.Create(path, "words", vocab, dim, dt, table.WithSeed(42), table.WithPadding(5000)))
		got, _, err := checkpoint.Read(path)
		require.NoError(t, err)
		emb, err := NewEmbedding(gorgonia.NewGraph(), "words", vocab, dim, dt, WithSeed(42), WithPadding(5000))
		require.NoError(t, err)
		w := got["words.weight"]
		require.NotNil(t, w)
		assert.Equal(t, tensor.Shape{vocab, dim}, w.Shape())
		assert.Equal(t, emb.Table.Value().(*tensor.Dense).Data(), w.Data(), "%v", dt)
		assert.Equal(t, []float64{0, 0, 0}, ref.Floats(must(w.Slice(tensor.S(5000))).(*tensor.Dense)))
	}
	// A custom initialiser is called per block.
	path := filepath.Join(t.TempDir(), "c.safetensors")
	calls := 0
	init := func(dt tensor.Dtype, s ...int) any {
		calls++
		v := make([]float32, s[0]*s[1])
		for i := range v {
			v[i] = 0.5
		}
		return v
	}
	require.NoError(t, table.Create(path, "c", kernel.NormalBlock+1, 2, tensor.Float32, table.WithInit(init)))
	assert.Equal(t, 2, calls)
	got, _, err := checkpoint.Read(path)
	require.NoError(t, err)
	for _, v := range got["c.weight"].Float32s() {
		require.Equal(t, float32(0.5), v)
	}
}

func must(v tensor.View, err error) tensor.View {
	if err != nil {
		panic(err)
	}
	return v
}

// trainFile runs steps of a lookup and a bag of a table, sum of both times
// fixed weights, through opt; the same ids for every table.
func trainTable(t *testing.T, emb *Embedding, g *gorgonia.ExprGraph, opt optim.Sparse, steps int) {
	r := rand.New(rand.NewPCG(3, 3))
	vocab := emb.Table.Shape()[0]
	ids := tensor.New(tensor.Of(tensor.Int), tensor.WithShape(12))
	idn := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"), gorgonia.WithValue(ids))
	offs := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("offs"), gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{0, 5, 5}))))
	look, err := emb.Lookup(idn)
	require.NoError(t, err)
	bag, err := emb.Bag(idn, offs, nil, BagMean)
	require.NoError(t, err)
	dim := emb.Table.Shape()[1]
	wl := gorgonia.NodeFromAny(g, ref.FloatTensor(ref.RandFloats(rand.New(rand.NewPCG(1, 2)), 12*dim), []int{12, dim}, emb.Table.Dtype()), gorgonia.WithName("wl"))
	wb := gorgonia.NodeFromAny(g, ref.FloatTensor(ref.RandFloats(rand.New(rand.NewPCG(2, 2)), 3*dim), []int{3, dim}, emb.Table.Dtype()), gorgonia.WithName("wb"))
	cost := gorgonia.Must(gorgonia.Add(gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(look, wl)))),
		gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(bag, wb))))))
	_, err = gorgonia.Grad(cost, emb.GradNodes()...)
	require.NoError(t, err)
	vm := vmtest.New(t, g)
	defer vm.Close()
	for range steps {
		for i := range ids.Ints() {
			ids.Ints()[i] = r.IntN(vocab)
		}
		require.NoError(t, vm.RunAll())
		require.NoError(t, emb.Step(context.Background(), opt))
		vm.Reset()
	}
}

// A table in a file and one in memory with the same values, trained with
// the same ids and optimiser, through lookups and bags, are bit-identical.
func TestFileTableEqualsMemory(t *testing.T) {
	for _, dt := range floatDtypes {
		for _, name := range []string{"sgd", "adam", "adagrad", "sparse adagrad"} {
			t.Run(fmt.Sprintf("%v/%s", dt, name), func(t *testing.T) {
				newOpt := func() optim.Sparse {
					switch name {
					case "sgd":
						return &optim.SparseSGD{LearnRate: 0.1, WeightDecay: 0.01}
					case "adam":
						return optim.NewSparseAdam(0.05)
					case "sparse adagrad":
						return &optim.SparseAdagrad{LearnRate: 0.2, LRDecay: 0.01, InitialAccumulatorValue: 0.1, Eps: 1e-10}
					}
					return &optim.RowWiseAdagrad{LearnRate: 0.2, Eps: 1e-8, WeightDecay: 0.01}
				}
				path := filepath.Join(t.TempDir(), "t.safetensors")
				require.NoError(t, table.Create(path, "words", 300, 5, dt, table.WithSeed(9)))
				start, _, err := checkpoint.Read(path)
				require.NoError(t, err)

				gf := gorgonia.NewGraph()
				file, err := OpenEmbedding(gf, path, "words", WithPadding(2))
				require.NoError(t, err)
				defer file.Close(context.Background())
				gm := gorgonia.NewGraph()
				mem, err := NewEmbedding(gm, "words", 300, 5, dt, WithWeights(start["words.weight"]), WithSparse(), WithPadding(2))
				require.NoError(t, err)

				trainTable(t, file, gf, newOpt(), 6)
				trainTable(t, mem, gm, newOpt(), 6)
				assert.Equal(t, mem.Table.Value().Data(), file.Table.Value().Data())
				assert.NotEqual(t, start["words.weight"].Data(), file.Table.Value().Data(), "trained")
			})
		}
	}
}

// Create, open, train, sync, close, reopen: the file holds the trained
// table, is a valid safetensors file, and a second open while the first
// is open fails.
func TestFileTableLifecycle(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.safetensors")
	require.NoError(t, table.Create(path, "items", 100, 4, tensor.Float32, table.WithSeed(1)))
	g := gorgonia.NewGraph()
	emb, err := OpenEmbedding(g, path, "items")
	require.NoError(t, err)

	_, err = OpenEmbedding(gorgonia.NewGraph(), path, "items")
	require.ErrorIs(t, err, table.ErrInUse, "a second open of one file")

	opt := optim.NewRowWiseAdagrad(0.1)
	trainTable(t, emb, g, opt, 4)
	require.NoError(t, emb.Home().(Syncer).Sync(context.Background()))
	trained := append([]float32{}, emb.Table.Value().(*tensor.Dense).Float32s()...)
	onDisk, _, err := checkpoint.Read(path)
	require.NoError(t, err)
	assert.Equal(t, trained, onDisk["items.weight"].Float32s())

	// Exact restore points: the table and Adagrad's state.
	ckpt := filepath.Join(dir, "ckpt.safetensors")
	require.NoError(t, checkpoint.Save(ckpt, nil, emb, optim.State(emb.Home().(Weights), opt)))
	saved, err := optim.State(emb.Home().(Weights), opt).State()
	require.NoError(t, err)

	require.NoError(t, emb.Close(context.Background()))
	require.NoError(t, emb.Close(context.Background()), "a second Close does nothing")
	require.ErrorIs(t, emb.Step(context.Background(), opt), table.ErrClosed)
	require.ErrorIs(t, emb.Home().(Syncer).Sync(context.Background()), table.ErrClosed)
	_, err = emb.State()
	require.ErrorIs(t, err, table.ErrClosed)

	again, err := OpenEmbedding(gorgonia.NewGraph(), path, "items")
	require.NoError(t, err)
	assert.Equal(t, trained, again.Table.Value().(*tensor.Dense).Float32s())
	fresh := optim.NewRowWiseAdagrad(0.1)
	_, err = checkpoint.Load(ckpt, again, optim.State(again.Home().(Weights), fresh))
	require.NoError(t, err)
	loaded, err := optim.State(again.Home().(Weights), fresh).State()
	require.NoError(t, err)
	assert.Equal(t, saved, loaded)
	require.NoError(t, again.Close(context.Background()))

	// An in-memory table has nothing to sync.
	mem, err := NewEmbedding(gorgonia.NewGraph(), "m", 3, 2, tensor.Float32)
	require.NoError(t, err)
	_, syncs := mem.Home().(Syncer)
	require.False(t, syncs, "an in-memory table's home syncs")
	require.NoError(t, mem.Close(context.Background()))
}

// Files OpenEmbedding refuses: missing, another name, another rank or
// dtype, truncated; and bad paths for table.Create.
func TestFileTableRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, tensors map[string]tensor.Tensor) string {
		p := filepath.Join(dir, name)
		require.NoError(t, checkpoint.Write(p, tensors, nil))
		return p
	}
	good := filepath.Join(dir, "good.safetensors")
	require.NoError(t, table.Create(good, "words", 10, 2, tensor.Float32))
	raw, err := os.ReadFile(good)
	require.NoError(t, err)
	truncated := filepath.Join(dir, "truncated.safetensors")
	require.NoError(t, os.WriteFile(truncated, raw[:len(raw)-4], 0o600))
	cases := map[string]struct {
		path string
		want error
	}{
		"missing file": {filepath.Join(dir, "nope"), os.ErrNotExist},
		"another name": {write("other.safetensors", map[string]tensor.Tensor{"items.weight": tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, 4}))}), checkpoint.ErrMismatch},
		"a vector":     {write("vec.safetensors", map[string]tensor.Tensor{"words.weight": tensor.New(tensor.WithBacking([]float32{1, 2}))}), checkpoint.ErrMismatch},
		"int64 values": {write("int.safetensors", map[string]tensor.Tensor{"words.weight": tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]int64{1, 2}))}), checkpoint.ErrMismatch},
		"a checkpoint": {write("ckpt.safetensors", map[string]tensor.Tensor{
			"words.weight":  tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, 4})),
			"words.exp_avg": tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, 4})),
			"mlp.weight":    tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, 4}))}), checkpoint.ErrMismatch},
		"truncated file": {truncated, checkpoint.ErrFormat},
	}
	for name, c := range cases {
		_, err := OpenEmbedding(gorgonia.NewGraph(), c.path, "words")
		require.ErrorIs(t, err, c.want, name)
	}
	// A checkpoint is named for what it is, and is not changed.
	ckpt := filepath.Join(dir, "ckpt.safetensors")
	before, err := os.ReadFile(ckpt)
	require.NoError(t, err)
	_, err = OpenEmbedding(gorgonia.NewGraph(), ckpt, "words")
	require.ErrorContains(t, err, `holds 3 tensors ("mlp.weight", "words.exp_avg", "words.weight"), not a table file`)
	after, err := os.ReadFile(ckpt)
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.Error(t, table.Create(filepath.Join(dir, "no", "such", "dir", "t"), "w", 2, 2, tensor.Float32))
	require.ErrorIs(t, table.Create(filepath.Join(dir, "x"), "w", 0, 2, tensor.Float32), gather.ErrShape)
	require.ErrorIs(t, table.Create(filepath.Join(dir, "x"), "w", 2, 2, tensor.Int), gather.ErrDtype)
	_, err = os.Stat(filepath.Join(dir, "x"))
	require.True(t, errors.Is(err, os.ErrNotExist), "a refused table.Create writes nothing")
}

// An I/O error on the mapping during Step (here: the file cut short under
// the mapping, so that touching its last rows faults) is an error, not the
// end of the process.
func TestFileTableFaultIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.safetensors")
	const vocab, dim = 4096, 16
	require.NoError(t, table.Create(path, "w", vocab, dim, tensor.Float32))
	g := gorgonia.NewGraph()
	emb, err := OpenEmbedding(g, path, "w")
	require.NoError(t, err)
	defer emb.Close(context.Background())
	require.NoError(t, os.Truncate(path, 4096)) // the header and a few rows stay
	w, err := emb.Home().(Weights).Weight()
	require.NoError(t, err)
	grad := &optim.RowGrad{Rows: []int64{vocab - 1}, Values: tensor.New(tensor.WithShape(1, dim), tensor.WithBacking(make([]float32, dim)))}
	err = fileio.Guard(func() error { return stepOnce(&optim.SparseSGD{LearnRate: 1}, w, grad) })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "fault")
}

// A graph that looks up or pools a file table and runs after Close fails
// with table.ErrClosed, found by gather.Cause, instead of reading the
// unmapped table; Step fails the same way.
func TestFileTableRunAfterClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.safetensors")
	require.NoError(t, table.Create(path, "w", 50, 4, tensor.Float32))
	for _, bag := range []bool{false, true} {
		g := gorgonia.NewGraph()
		emb, err := OpenEmbedding(g, path, "w")
		require.NoError(t, err)
		ids := gorgonia.NewMatrix(g, tensor.Int, gorgonia.WithShape(2, 3), gorgonia.WithName("ids"),
			gorgonia.WithValue(tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]int{1, 2, 3, 4, 5, 49}))))
		var out *gorgonia.Node
		if bag {
			out, err = emb.Bag(ids, nil, nil, BagSum)
		} else {
			out, err = emb.Lookup(ids)
		}
		require.NoError(t, err)
		cost := gorgonia.Must(gorgonia.Sum(out))
		_, err = gorgonia.Grad(cost, emb.GradNodes()...)
		require.NoError(t, err)
		vm := vmtest.New(t, g)
		require.NoError(t, vm.RunAll())
		vm.Reset()
		require.NoError(t, emb.Close(context.Background()))
		err = vm.RunAll()
		require.Error(t, err, "bag=%v", bag)
		assert.ErrorIs(t, gather.Cause(err), table.ErrClosed, "bag=%v: %v", bag, err)
		assert.ErrorIs(t, emb.Step(context.Background(), &optim.SparseSGD{LearnRate: 0.1}), table.ErrClosed)
		_, err = emb.Home().(Weights).Weight()
		assert.ErrorIs(t, err, table.ErrClosed)
		// The table's tensor, still held by the graph, reads zeros rather
		// than faulting.
		for _, v := range emb.Table.Value().Data().([]float32) {
			require.Zero(t, v)
		}
		vm.Close()
	}
	// The file kept what was trained.
	got, _, err := checkpoint.Read(path)
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{50, 4}, got["w.weight"].Shape())
}
