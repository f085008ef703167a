package nn

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/gathergrad/gather/table/driver"

	"github.com/gathergrad/gather/internal/vmtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/parallel"
	"github.com/gathergrad/gather/internal/ref"
	"github.com/gathergrad/gather/optim"
)

func TestRowGradientMatchesIndexAdd(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	for _, dt := range floatDtypes {
		for _, pad := range []int{-1, 3} {
			ids := randIndices(r, 60, 10) // many duplicates
			up := ref.RandFloats(r, 60*4)
			idsT := ref.CastIndices(ids, []int{6, 10}, tensor.Int32)
			gT := ref.FloatTensor(up, []int{6, 10, 4}, dt)
			rg, err := optim.RowGradient(idsT, gT, 10, pad)
			require.NoError(t, err)

			dense := tensor.New(tensor.Of(dt), tensor.WithShape(10, 4))
			require.NoError(t, gather.IndexAdd(dense, idsT, gT, 0))
			want := ref.Floats(dense)
			if pad >= 0 {
				clear(want[pad*4 : (pad+1)*4]) // the padding row gets no gradient
			}
			got := make([]float64, 40)
			vals := ref.Floats(rg.Values)
			for k, row := range rg.Rows {
				if k > 0 {
					assert.Greater(t, row, rg.Rows[k-1], "rows ascending and distinct")
				}
				assert.NotEqual(t, pad, row, "padding row")
				copy(got[row*4:(row+1)*4], vals[k*4:(k+1)*4])
			}
			assert.Equal(t, want, got, "%v pad %d", dt, pad)
		}
	}
	_, err := optim.RowGradient(ref.CastIndices([]int64{0, 10}, []int{2}, tensor.Int64), ref.FloatTensor(make([]float64, 4), []int{2, 2}, tensor.Float64), 10, -1)
	assert.ErrorIs(t, err, gather.ErrIndexOutOfRange)
	_, err = optim.RowGradient(ref.CastIndices([]int64{0, 1}, []int{2}, tensor.Int64), ref.FloatTensor(make([]float64, 6), []int{3, 2}, tensor.Float64), 10, -1)
	assert.ErrorIs(t, err, gather.ErrShape)
}

// trainPair trains two copies of the same model for a few steps: one with a
// dense table and step, one sparse, and returns both tables after each step.
// The model: a lookup of a [batch] id tensor and, with twoLookups, of a
// [batch, 2] one too, summed; a linear head, LogSoftMax and NLLLoss.
// newSolver makes the solver for the dense learnables of each run.
func trainPair(t *testing.T, dt tensor.Dtype, steps int, twoLookups bool, newSolver func() gorgonia.Solver, opt optim.Sparse) (dense, sparse [][]float64) {
	t.Helper()
	const vocab, dim, batch = 12, 3, 5
	run := func(sparseMode bool) [][]float64 {
		solver := newSolver()
		r := rand.New(rand.NewPCG(21, 22))
		g := gorgonia.NewGraph()
		init := func(dt tensor.Dtype, s ...int) any {
			v := make([]float64, tensor.Shape(s).TotalSize())
			for i := range v {
				v[i] = r.NormFloat64()
			}
			return ref.FloatTensor(v, s, dt).Data()
		}
		opts := []NewEmbeddingOption{WithInit(init), WithPadding(0)}
		if sparseMode {
			opts = append(opts, WithSparse())
		}
		emb, err := NewEmbedding(g, "emb", vocab, dim, dt, opts...)
		require.NoError(t, err)
		idsA := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(batch), gorgonia.WithName("a"),
			gorgonia.WithValue(tensor.New(tensor.WithShape(batch), tensor.WithBacking(make([]int, batch)))))
		idsB := gorgonia.NewMatrix(g, tensor.Int, gorgonia.WithShape(batch, 2), gorgonia.WithName("b"),
			gorgonia.WithValue(tensor.New(tensor.WithShape(batch, 2), tensor.WithBacking(make([]int, 2*batch)))))
		targets := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(batch), gorgonia.WithName("y"),
			gorgonia.WithValue(tensor.New(tensor.WithShape(batch), tensor.WithBacking(make([]int, batch)))))
		w := gorgonia.NewMatrix(g, dt, gorgonia.WithShape(dim, 4), gorgonia.WithName("w"), gorgonia.WithInit(init))
		h, err := emb.Lookup(idsA)
		require.NoError(t, err)
		if twoLookups {
			vb, err := emb.Lookup(idsB)
			require.NoError(t, err)
			h = gorgonia.Must(gorgonia.Add(h, gorgonia.Must(gorgonia.Sum(vb, 1))))
		}
		loss, err := NLLLoss(gorgonia.Must(gorgonia.LogSoftMax(gorgonia.Must(gorgonia.Mul(h, w)))), targets)
		require.NoError(t, err)
		learn := append(emb.Learnables(), w)
		_, err = gorgonia.Grad(loss, append(learn, emb.GradNodes()...)...)
		require.NoError(t, err)
		vm := vmtest.Bound(t, g, learn...)
		defer vm.Close()
		var tables [][]float64
		for range steps {
			for i := range idsA.Value().(*tensor.Dense).Ints() {
				idsA.Value().(*tensor.Dense).Ints()[i] = r.IntN(vocab)
			}
			for i := range idsB.Value().(*tensor.Dense).Ints() {
				idsB.Value().(*tensor.Dense).Ints()[i] = vocab/2 + r.IntN(vocab/2)
			}
			for i := range targets.Value().(*tensor.Dense).Ints() {
				targets.Value().(*tensor.Dense).Ints()[i] = r.IntN(4)
			}
			require.NoError(t, vm.RunAll())
			if sparseMode {
				// Embedding.Step, which reuses its row gradient's memory
				// from step to step, as the number of rows touched varies.
				require.NoError(t, emb.Step(context.Background(), opt))
				require.NoError(t, solver.Step(gorgonia.NodesToValueGrads(gorgonia.Nodes{w})))
			} else {
				require.NoError(t, solver.Step(gorgonia.NodesToValueGrads(learn)))
			}
			vm.Reset()
			tables = append(tables, ref.Floats(emb.Table.Value().(*tensor.Dense)))
		}
		return tables
	}
	return run(false), run(true)
}

// stepFunc is an optim.Sparse without state that calls a function with
// the table and the gradient.
type stepFunc func(*tensor.Dense, *optim.RowGrad) error

func (f stepFunc) Name() string                                  { return "step_func" }
func (f stepFunc) Columns(int) []driver.Column                   { return nil }
func (f stepFunc) StepRows(r optim.Rows, g *optim.RowGrad) error { return f(r.Weight, g) }
func (f stepFunc) Check(int64, *optim.RowGrad, int) error        { return gather.ErrOption }

// stepOnce steps w by the optimiser without state o.
func stepOnce(o optim.Sparse, w *tensor.Dense, g *optim.RowGrad) error {
	return o.StepRows(optim.Rows{Weight: w, Step: 1}, g)
}

// Without weight decay, sparse SGD is dense SGD (gorgonia.VanillaSolver):
// exactly for one lookup per step. With two lookups of the table, Gorgonia
// adds the two dense gradients while RowGrad sums all contributions of a
// row in one pass, so the results agree to rounding.
func TestSparseSGDEqualsDense(t *testing.T) {
	vanilla := func() gorgonia.Solver { return gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.3)) }
	for _, dt := range floatDtypes {
		dense, sparse := trainPair(t, dt, 6, false, vanilla, &optim.SparseSGD{LearnRate: 0.3})
		for s := range dense {
			assert.Equal(t, dense[s], sparse[s], "%v step %d", dt, s)
		}
		assert.Equal(t, []float64{0, 0, 0}, dense[len(dense)-1][:3], "the padding row never moves")

		dense, sparse = trainPair(t, dt, 6, true, vanilla, &optim.SparseSGD{LearnRate: 0.3})
		tol := 1e-12
		if dt == tensor.Float32 {
			tol = 1e-5
		}
		for s := range dense {
			assert.InDeltaSlice(t, dense[s], sparse[s], tol, "%v step %d, two lookups", dt, s)
		}
		assert.NotEqual(t, dense[0], dense[len(dense)-1])
	}
}

// optim.SparseAdam follows its documented semantics: compared with a reference
// written from the formulas, on the same row gradients.
func TestSparseAdamSemantics(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	const vocab, dim = 6, 2
	w0 := ref.RandFloats(r, vocab*dim)
	table := ref.FloatTensor(w0, []int{vocab, dim}, tensor.Float64)
	opt := optim.NewSparseAdam(0.01)
	opt.WeightDecay = 0.1
	tab, err := optim.NewMemoryTable(table, opt)
	require.NoError(t, err)
	expected := append([]float64{}, w0...)
	m, v := make([]float64, vocab*dim), make([]float64, vocab*dim)
	for step := 1; step <= 5; step++ {
		ids := randIndices(r, 4, vocab)
		up := ref.RandFloats(r, 4*dim)
		rg, err := optim.RowGradient(ref.CastIndices(ids, []int{4}, tensor.Int64), ref.FloatTensor(up, []int{4, dim}, tensor.Float64), vocab, -1)
		require.NoError(t, err)
		require.NoError(t, tab.Step(context.Background(), opt, rg))

		// Reference: dense gradient, update only rows with a gradient entry.
		gd := ref.IndexAdd([]int{vocab, dim}, ids, []int{4}, 0, up)
		touched := map[int]bool{}
		for _, id := range ids {
			touched[ref.NormIndex(id, vocab)] = true
		}
		bc := 0.01 * math.Sqrt(1-math.Pow(0.999, float64(step))) / (1 - math.Pow(0.9, float64(step)))
		for row := range vocab {
			if !touched[row] {
				continue
			}
			for j := range dim {
				k := row*dim + j
				m[k] = 0.9*m[k] + 0.1*gd[k]
				v[k] = 0.999*v[k] + 0.001*gd[k]*gd[k]
				expected[k] = expected[k]*(1-0.01*0.1) - bc*m[k]/(math.Sqrt(v[k])+1e-8)
			}
		}
		assert.InEpsilonSlice(t, expected, table.Float64s(), 1e-14, "step %d", step)
		for row := range vocab {
			if !touched[row] && step == 1 {
				assert.Equal(t, w0[row*dim:(row+1)*dim], table.Float64s()[row*dim:(row+1)*dim], "untouched rows stay put")
			}
		}
	}

	// A bad gradient is an error.
	err = stepOnce(&optim.SparseSGD{LearnRate: 1}, table, &optim.RowGrad{Rows: []int64{7}, Values: tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(1, dim))})
	assert.ErrorIs(t, err, gather.ErrIndexOutOfRange)
	// An integer table is refused, not silently left alone.
	ints := tensor.New(tensor.Of(tensor.Int), tensor.WithShape(vocab, dim))
	err = stepOnce(&optim.SparseSGD{LearnRate: 1}, ints, &optim.RowGrad{Rows: []int64{1}, Values: tensor.New(tensor.Of(tensor.Int), tensor.WithShape(1, dim))})
	assert.ErrorIs(t, err, gather.ErrDtype)
	_, err = optim.NewMemoryTable(ints, optim.NewSparseAdam(0.1))
	assert.ErrorIs(t, err, gather.ErrDtype)
}

// optim.SparseAdam also trains the full model (and moves only touched rows).
func TestSparseAdamTrains(t *testing.T) {
	adam := func() gorgonia.Solver { return gorgonia.NewAdamSolver(gorgonia.WithLearnRate(0.05)) }
	_, sparse := trainPair(t, tensor.Float32, 3, true, adam, optim.NewSparseAdam(0.05))
	assert.NotEqual(t, sparse[0], sparse[2])
	assert.Equal(t, []float64{0, 0, 0}, sparse[2][:3], "the padding row never moves")
}

func TestRowGradErrors(t *testing.T) {
	g := gorgonia.NewGraph()
	dense, err := NewEmbedding(g, "dense", 4, 2, tensor.Float64)
	require.NoError(t, err)
	_, err = dense.RowGrad()
	assert.ErrorIs(t, err, gather.ErrOption)
	assert.Empty(t, dense.GradNodes())
	sp, err := NewEmbedding(g, "sp", 4, 2, tensor.Float64, WithSparse())
	require.NoError(t, err)
	assert.Empty(t, sp.Learnables())
	_, err = sp.RowGrad()
	assert.ErrorIs(t, err, gather.ErrGraph)
	assert.Contains(t, err.Error(), "RowGrad before any Lookup")
}

// Above the parallel threshold the sparse optimisers split rows across
// workers; the result is the same for any GOMAXPROCS.
func TestSparseOptimisersParallel(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	const vocab, dim, n = 20000, 16, 8192
	ids := randIndices(r, n, vocab)
	rg, err := optim.RowGradient(ref.CastIndices(ids, []int{n}, tensor.Int64), ref.FloatTensor(ref.RandFloats(r, n*dim), []int{n, dim}, tensor.Float32), vocab, -1)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(rg.Rows)*dim, parallel.MinWork)
	w0 := ref.RandFloats(r, vocab*dim)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var want [2][]float64
	for _, procs := range []int{1, 4} {
		runtime.GOMAXPROCS(procs)
		sgdT := ref.FloatTensor(w0, []int{vocab, dim}, tensor.Float32)
		require.NoError(t, stepOnce(&optim.SparseSGD{LearnRate: 0.1, WeightDecay: 0.01}, sgdT, rg))
		adamT := ref.FloatTensor(w0, []int{vocab, dim}, tensor.Float32)
		adam := optim.NewSparseAdam(0.001)
		tab, err := optim.NewMemoryTable(adamT, adam)
		require.NoError(t, err)
		require.NoError(t, tab.Step(context.Background(), adam, rg))
		require.NoError(t, tab.Step(context.Background(), adam, rg))
		if procs == 1 {
			want = [2][]float64{ref.Floats(sgdT), ref.Floats(adamT)}
			continue
		}
		assert.Equal(t, want[0], ref.Floats(sgdT), "SparseSGD with GOMAXPROCS=%d", procs)
		assert.Equal(t, want[1], ref.Floats(adamT), "SparseAdam with GOMAXPROCS=%d", procs)
	}
	assert.NotEqual(t, w0, want[0])
}

// Embedding.Step builds the row gradient it hands the optimiser in memory it
// keeps: after the first step, a step allocates a small part of the
// gradient's values, where RowGrad allocates all of them; and a RowGrad
// returned earlier keeps its values.
func TestEmbeddingStepReusesMemory(t *testing.T) {
	const vocab, dim, batch = 1000, 32, 512
	r := rand.New(rand.NewPCG(27, 28))
	g := gorgonia.NewGraph()
	emb, err := NewEmbedding(g, "emb", vocab, dim, tensor.Float32, WithSparse())
	require.NoError(t, err)
	idv := make([]int, batch)
	for i := range idv {
		idv[i] = r.IntN(vocab)
	}
	ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(batch), gorgonia.WithName("ids"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(batch), tensor.WithBacking(idv))))
	h, err := emb.Lookup(ids)
	require.NoError(t, err)
	_, err = gorgonia.Grad(gorgonia.Must(gorgonia.Sum(h)), emb.GradNodes()...)
	require.NoError(t, err)
	vm := vmtest.New(t, g)
	defer vm.Close()

	require.NoError(t, vm.RunAll())
	kept, err := emb.RowGrad()
	require.NoError(t, err)
	rows, values := append([]int64{}, kept.Rows...), append([]float32{}, kept.Values.Float32s()...)
	require.Greater(t, len(rows), batch/2)

	// Each step's gradient: the same rows, each the number of times its id
	// occurs (the gradient of a sum), whatever the previous step left.
	sgd := &optim.SparseSGD{LearnRate: 0.1}
	var seen [][]float32
	check := stepFunc(func(table *tensor.Dense, g *optim.RowGrad) error {
		assert.Equal(t, rows, g.Rows)
		seen = append(seen, g.Values.Float32s())
		assert.Equal(t, values, g.Values.Float32s())
		return stepOnce(sgd, table, g)
	})
	for range 3 {
		vm.Reset()
		require.NoError(t, vm.RunAll())
		require.NoError(t, emb.Step(context.Background(), check))
	}
	require.Len(t, seen, 3)
	assert.Same(t, &seen[0][0], &seen[2][0], "the second step reuses the first step's values")
	assert.NotSame(t, &seen[0][0], &kept.Values.Float32s()[0])
	assert.Equal(t, rows, kept.Rows, "a RowGrad returned before the steps is left alone")
	assert.Equal(t, values, kept.Values.Float32s())

	// Bytes allocated per call, the least of three rounds of 20.
	perCall := func(f func() error) uint64 {
		least := uint64(math.MaxUint64)
		for range 3 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range 20 {
				require.NoError(t, f())
			}
			runtime.ReadMemStats(&after)
			least = min(least, (after.TotalAlloc-before.TotalAlloc)/20)
		}
		return least
	}
	valueBytes := uint64(len(rows) * dim * 4)
	// Step's own memory: the check that the graph ran between two Steps
	// is set aside, so that no run's allocations are counted.
	step := perCall(func() error { emb.lookups[0].cap.fresh = true; return emb.Step(context.Background(), sgd) })
	fresh := perCall(func() error { _, err := emb.RowGrad(); return err })
	t.Logf("bytes a call: Step %d, RowGrad %d; the values take %d", step, fresh, valueBytes)
	assert.Less(t, step, valueBytes/4, "Step allocates %d bytes a call; the values take %d", step, valueBytes)
	assert.GreaterOrEqual(t, fresh, valueBytes, "RowGrad allocates %d bytes a call; the values take %d", fresh, valueBytes)
}

// A second Step after one run is refused (ErrGraph) and leaves the table
// as it was, even with SparseAdam, whose momentum would move the rows; the
// next run makes Step work again.
func TestStepTwiceWithoutRun(t *testing.T) {
	g := gorgonia.NewGraph()
	emb, err := NewEmbedding(g, "w", 10, 3, tensor.Float64, WithSparse(), WithSeed(1))
	require.NoError(t, err)
	ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(3), gorgonia.WithName("ids"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{1, 4, 4}))))
	out, err := emb.Lookup(ids)
	require.NoError(t, err)
	cost := gorgonia.Must(gorgonia.Sum(out))
	_, err = gorgonia.Grad(cost, emb.GradNodes()...)
	require.NoError(t, err)
	vm := vmtest.New(t, g)
	defer vm.Close()
	adam := optim.NewSparseAdam(0.1)
	require.NoError(t, vm.RunAll())
	require.NoError(t, emb.Step(context.Background(), adam))
	w, err := emb.Home().(Weights).Weight()
	require.NoError(t, err)
	before := slices.Clone(w.Float64s())
	require.ErrorIs(t, emb.Step(context.Background(), adam), gather.ErrGraph)
	assert.Equal(t, before, w.Float64s(), "the refused Step changed the table")
	vm.Reset()
	require.NoError(t, vm.RunAll())
	require.NoError(t, emb.Step(context.Background(), adam))
	assert.NotEqual(t, before, w.Float64s())
}
