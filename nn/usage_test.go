package nn

import (
	"context"
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/gathergrad/gather/internal/vmtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/ref"
	"github.com/gathergrad/gather/optim"
)

// A second table of one name in one graph is an error naming it, and the
// first table is left as it was (its padding row is not zeroed).
func TestNewEmbeddingNameInUse(t *testing.T) {
	g := gorgonia.NewGraph()
	a, err := NewEmbedding(g, "words", 4, 2, tensor.Float64, WithInit(countingF64))
	require.NoError(t, err)
	before := append([]float64{}, a.Table.Value().(*tensor.Dense).Float64s()...)
	_, err = NewEmbedding(g, "words", 4, 2, tensor.Float64, WithPadding(1))
	require.ErrorIs(t, err, gather.ErrGraph)
	assert.Contains(t, err.Error(), `"words"`)
	assert.Equal(t, before, a.Table.Value().(*tensor.Dense).Float64s())

	// Any node of that name counts, not only tables.
	gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("lr"))
	_, err = NewEmbedding(g, "lr", 4, 2, tensor.Float64)
	require.ErrorIs(t, err, gather.ErrGraph)

	_, err = NewEmbedding(g, "", 4, 2, tensor.Float64)
	require.ErrorIs(t, err, gather.ErrGraph)
}

func countingF64(dt tensor.Dtype, s ...int) any {
	v := make([]float64, tensor.Shape(s).TotalSize())
	for i := range v {
		v[i] = float64(i + 1)
	}
	return v
}

// Constructors return errors, never panics, for a nil graph, a bad
// initialiser and options that do not apply or contradict each other.
func TestConstructorsRefuseBadInput(t *testing.T) {
	short := func(tensor.Dtype, ...int) any { return make([]float32, 3) }
	ints := func(tensor.Dtype, ...int) any { return make([]int, 8) }
	wrongFloat := func(tensor.Dtype, ...int) any { return make([]float64, 8) }
	none := func(tensor.Dtype, ...int) any { return nil }
	g := gorgonia.NewGraph()
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"nil graph", func() error { _, err := NewEmbedding(nil, "e", 4, 2, tensor.Float32); return err }, gather.ErrGraph},
		{"initialiser too short", func() error {
			_, err := NewEmbedding(g, "e1", 4, 2, tensor.Float32, WithInit(short))
			return err
		}, gather.ErrShape},
		{"initialiser of ints", func() error {
			_, err := NewEmbedding(g, "e2", 4, 2, tensor.Float32, WithInit(ints))
			return err
		}, gather.ErrDtype},
		{"initialiser of the other float", func() error {
			_, err := NewEmbedding(g, "e3", 4, 2, tensor.Float32, WithInit(wrongFloat))
			return err
		}, gather.ErrDtype},
		{"initialiser returning nil", func() error {
			_, err := NewEmbedding(g, "e4", 4, 2, tensor.Float32, WithInit(none))
			return err
		}, gather.ErrDtype},
		{"nil initialiser", func() error { _, err := NewEmbedding(g, "e5", 4, 2, tensor.Float32, WithInit(nil)); return err }, gather.ErrOption},
		{"frozen and sparse", func() error {
			_, err := NewEmbedding(g, "e6", 4, 2, tensor.Float32, WithFrozen(), WithSparse())
			return err
		}, gather.ErrOption},
		{"max norm negative", func() error { _, err := NewEmbedding(g, "e7", 4, 2, tensor.Float32, WithMaxNorm(-1)); return err }, gather.ErrOption},
		{"max norm NaN", func() error {
			_, err := NewEmbedding(g, "e8", 4, 2, tensor.Float32, WithMaxNorm(math.NaN()))
			return err
		}, gather.ErrOption},
		{"max norm infinite", func() error {
			_, err := NewEmbedding(g, "e9", 4, 2, tensor.Float32, WithMaxNorm(math.Inf(1)))
			return err
		}, gather.ErrOption},
		{"nil option", func() error { _, err := NewEmbedding(g, "e11", 4, 2, tensor.Float32, nil); return err }, gather.ErrOption},
		{"last offset without offsets", func() error {
			tn := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(4, 2), gorgonia.WithName("t13"))
			ids := gorgonia.NewMatrix(g, tensor.Int, gorgonia.WithShape(2, 2), gorgonia.WithName("i13"))
			_, err := EmbeddingBag(tn, ids, nil, nil, BagSum, WithIncludeLastOffset())
			return err
		}, gather.ErrOption},
		{"nil nodes to a bag", func() error { _, err := EmbeddingBag(nil, nil, nil, nil, BagSum); return err }, gather.ErrShape},
		{"nil ids to a lookup", func() error {
			e, err := NewEmbedding(g, "e14", 4, 2, tensor.Float32)
			require.NoError(t, err)
			_, err = e.Lookup(nil)
			return err
		}, gather.ErrShape},
		{"nil ids to Bag", func() error {
			e, err := NewEmbedding(g, "e15", 4, 2, tensor.Float32)
			require.NoError(t, err)
			_, err = e.Bag(nil, nil, nil, BagSum)
			return err
		}, gather.ErrShape},
		{"nil losses", func() error { _, err := CrossEntropy(nil, nil); return err }, gather.ErrShape},
		{"nil nll", func() error { _, err := NLLLoss(nil, nil); return err }, gather.ErrShape},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = c.call() })
			require.ErrorIs(t, err, c.want)
		})
	}
	// A failed NewEmbedding adds no node, so its name stays free.
	_, err := NewEmbedding(g, "e1", 4, 2, tensor.Float32)
	require.NoError(t, err)
}

// Every optimiser refuses a learning rate or weight decay that is
// negative or not finite, and leaves the table as it was.
func TestOptimisersRefuseBadRates(t *testing.T) {
	bad := []float64{-0.1, math.NaN(), math.Inf(1), math.Inf(-1)}
	for _, v := range bad {
		for _, opt := range []struct {
			name string
			o    optim.Sparse
		}{
			{"sgd rate", &optim.SparseSGD{LearnRate: v}},
			{"sgd decay", &optim.SparseSGD{LearnRate: 0.1, WeightDecay: v}},
			{"adam rate", optim.NewSparseAdam(v)},
			{"adam decay", &optim.SparseAdam{LearnRate: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: v}},
			{"rowwise adagrad rate", optim.NewRowWiseAdagrad(v)},
			{"adagrad rate", optim.NewSparseAdagrad(v)},
			{"adagrad decay", &optim.SparseAdagrad{LearnRate: 0.1, Eps: 1e-10, LRDecay: v}},
		} {
			table := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}))
			g := &optim.RowGrad{Rows: []int64{1}, Values: tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float64{1, 1}))}
			tab, err := optim.NewMemoryTable(table, opt.o)
			require.NoError(t, err)
			err = tab.Step(context.Background(), opt.o, g)
			require.ErrorIs(t, err, gather.ErrOption, "%s %v", opt.name, v)
			assert.Equal(t, []float64{1, 2, 3, 4, 5, 6}, table.Float64s(), "%s %v", opt.name, v)
		}
	}
}

// Step before the graph ran names the table and says to run the graph.
func TestStepBeforeRun(t *testing.T) {
	g := gorgonia.NewGraph()
	emb, err := NewEmbedding(g, "clicks", 10, 2, tensor.Float64, WithSparse())
	require.NoError(t, err)
	ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(3), gorgonia.WithName("ids"))
	v, err := emb.Lookup(ids)
	require.NoError(t, err)
	_, err = gorgonia.Grad(gorgonia.Must(gorgonia.Sum(v)), emb.GradNodes()...)
	require.NoError(t, err)
	err = emb.Step(context.Background(), &optim.SparseSGD{LearnRate: 0.1})
	require.ErrorIs(t, err, gather.ErrGraph)
	assert.Contains(t, err.Error(), `embedding "clicks"`)
	assert.Contains(t, err.Error(), "run it")
}

// nn takes ids and targets in [0, vocab) as PyTorch does: -1 is an
// *IndexError naming the table in lookups, bags and optim.RowGradient, while the
// root's Gather keeps ONNX's negative indices.
func TestNegativeIDs(t *testing.T) {
	newIDs := func(g *gorgonia.ExprGraph, v ...int) *gorgonia.Node {
		return gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"), gorgonia.WithValue(tensor.New(tensor.WithBacking(v))))
	}
	for _, sparse := range []bool{false, true} {
		for _, bag := range []bool{false, true} {
			g := gorgonia.NewGraph()
			var opts []NewEmbeddingOption
			if sparse {
				opts = append(opts, WithSparse())
			}
			emb, err := NewEmbedding(g, "words", 5, 2, tensor.Float64, opts...)
			require.NoError(t, err)
			before := append([]float64{}, emb.Table.Value().(*tensor.Dense).Float64s()...)
			ids := newIDs(g, 0, 3, -1)
			if bag {
				offs := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("offs"), gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{0, 1}))))
				_, err = emb.Bag(ids, offs, nil, BagSum)
			} else {
				_, err = emb.Lookup(ids)
			}
			require.NoError(t, err)
			vm := vmtest.New(t, g)
			err = gather.Cause(vm.RunAll())
			vm.Close()
			var ie *gather.IndexError
			require.True(t, errors.As(err, &ie), "sparse=%v bag=%v: %v", sparse, bag, err)
			assert.Equal(t, "words", ie.Name)
			assert.Equal(t, int64(-1), ie.Value)
			assert.Equal(t, []int{2}, ie.Pos)
			assert.True(t, ie.NonNegative)
			assert.Contains(t, ie.Error(), "ids[2] = -1 is out of range [0, 4] for axis 0 of size 5")
			assert.Equal(t, before, emb.Table.Value().(*tensor.Dense).Float64s())
		}
	}

	_, err := optim.RowGradient(tensor.New(tensor.WithBacking([]int{1, -1})), tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1, 2, 3, 4})), 5, -1)
	var ie *gather.IndexError
	require.True(t, errors.As(err, &ie), "%v", err)
	assert.Equal(t, int64(-1), ie.Value)

	// The root op: -1 is the last row.
	g := gorgonia.NewGraph()
	data := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("data"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(3, 1), tensor.WithBacking([]float64{10, 20, 30}))))
	rows, err := gather.Gather(data, newIDs(g, -1, 0), 0)
	require.NoError(t, err)
	vm := vmtest.New(t, g)
	defer vm.Close()
	require.NoError(t, vm.RunAll())
	assert.Equal(t, []float64{30, 10}, rows.Value().Data())
}

// WithIncludeLastOffset: offsets of bags+1 entries, the last the number of
// ids, give the bags (and gradients) of the bags offsets without it, for
// every mode, with and without weights and padding, in both machines.
func TestIncludeLastOffset(t *testing.T) {
	table := []float64{1, -2, 3, 0.5, -1, 4, 2, 2, -3, 1, 0, -0.5}
	const vocab, dim = 6, 2
	ids := []int{1, 4, 0, 4, 2, 5, 3}
	offs := []int{0, 2, 2, 5} // bags [1 4], [], [0 4 2], [5 3]
	w := []float64{0.5, -1, 2, 1.5, 1, -0.5, 3}
	run := func(t *testing.T, mode BagMode, weights, pad, last, lisp bool) (out, gTable, gW []float64) {
		g := gorgonia.NewGraph()
		tn := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("table"),
			gorgonia.WithValue(tensor.New(tensor.WithShape(vocab, dim), tensor.WithBacking(append([]float64{}, table...)))))
		in := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"), gorgonia.WithValue(tensor.New(tensor.WithBacking(append([]int{}, ids...)))))
		o := append([]int{}, offs...)
		var opts []EmbeddingBagOption
		if last {
			o = append(o, len(ids))
			opts = append(opts, WithIncludeLastOffset())
		}
		if pad {
			opts = append(opts, WithPadding(4))
		}
		on := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("offs"), gorgonia.WithValue(tensor.New(tensor.WithBacking(o))))
		var wn *gorgonia.Node
		learn := gorgonia.Nodes{tn}
		if weights {
			wn = gorgonia.NewVector(g, tensor.Float64, gorgonia.WithName("w"), gorgonia.WithValue(tensor.New(tensor.WithBacking(append([]float64{}, w...)))))
			learn = append(learn, wn)
		}
		pooled, err := EmbeddingBag(tn, in, on, wn, mode, opts...)
		require.NoError(t, err)
		require.Equal(t, tensor.Shape{len(offs), dim}, pooled.Shape())
		scale := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("scale"),
			gorgonia.WithValue(tensor.New(tensor.WithShape(len(offs), dim), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6, 7, 8}))))
		cost := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(pooled, scale))))
		var vm gorgonia.VM
		if lisp {
			vm = gorgonia.NewLispMachine(g)
		} else {
			_, err = gorgonia.Grad(cost, learn...)
			require.NoError(t, err)
			vm = vmtest.Bound(t, g, learn...)
		}
		defer vm.Close()
		require.NoError(t, vm.RunAll())
		gt, err := tn.Grad()
		require.NoError(t, err)
		out, gTable = ref.Floats(pooled.Value().(*tensor.Dense)), ref.Floats(gt.(*tensor.Dense))
		if weights {
			gw, err := wn.Grad()
			require.NoError(t, err)
			gW = ref.Floats(gw.(*tensor.Dense))
		}
		return out, gTable, gW
	}
	for _, mode := range []BagMode{BagSum, BagMean, BagMax} {
		for _, weights := range []bool{false, true} {
			for _, pad := range []bool{false, true} {
				for _, lisp := range []bool{false, true} {
					wantOut, wantT, wantW := run(t, mode, weights, pad, false, lisp)
					out, gT, gW := run(t, mode, weights, pad, true, lisp)
					assert.Equal(t, wantOut, out, "%v weights=%v pad=%v lisp=%v", mode, weights, pad, lisp)
					assert.Equal(t, wantT, gT)
					assert.Equal(t, wantW, gW)
				}
			}
		}
	}

	// The last offset must equal the number of ids.
	g := gorgonia.NewGraph()
	tn := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("table"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(vocab, dim), tensor.WithBacking(append([]float64{}, table...)))))
	in := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"), gorgonia.WithValue(tensor.New(tensor.WithBacking(append([]int{}, ids...)))))
	on := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("offs"), gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{0, 2, 6}))))
	pooled, err := EmbeddingBag(tn, in, on, nil, BagSum, WithIncludeLastOffset())
	require.NoError(t, err)
	assert.Equal(t, tensor.Shape{2, dim}, pooled.Shape())
	vm := vmtest.New(t, g)
	defer vm.Close()
	err = gather.Cause(vm.RunAll())
	require.ErrorIs(t, err, gather.ErrShape)
	assert.Contains(t, err.Error(), "offsets[2] = 6 must equal the number of ids, 7")

	// offsets of shape (0) hold no last entry.
	g2 := gorgonia.NewGraph()
	tn2 := gorgonia.NewMatrix(g2, tensor.Float64, gorgonia.WithShape(vocab, dim), gorgonia.WithName("table"))
	in2 := gorgonia.NewVector(g2, tensor.Int, gorgonia.WithShape(3), gorgonia.WithName("ids"))
	on2 := gorgonia.NewVector(g2, tensor.Int, gorgonia.WithShape(0), gorgonia.WithName("offs"))
	_, err = EmbeddingBag(tn2, in2, on2, nil, BagSum, WithIncludeLastOffset())
	require.ErrorIs(t, err, gather.ErrShape)
}

// An empty batch: forward graphs run in both machines and give
// zero-sized outputs; gorgonia.Grad refuses to differentiate one, with an
// error that says why, rather than the TapeMachine panicking later.
func TestEmptyBatch(t *testing.T) {
	for _, sparse := range []bool{false, true} {
		for _, shape := range [][]int{{0}, {0, 3}} {
			build := func() (*gorgonia.ExprGraph, *Embedding, *gorgonia.Node) {
				g := gorgonia.NewGraph()
				var opts []NewEmbeddingOption
				if sparse {
					opts = append(opts, WithSparse())
				}
				emb, err := NewEmbedding(g, "words", 5, 2, tensor.Float64, opts...)
				require.NoError(t, err)
				ids := gorgonia.NodeFromAny(g, tensor.New(tensor.Of(tensor.Int), tensor.WithShape(shape...)), gorgonia.WithName("ids"))
				v, err := emb.Lookup(ids)
				require.NoError(t, err)
				return g, emb, v
			}
			for _, lisp := range []bool{false, true} {
				g, _, v := build()
				var vm gorgonia.VM = vmtest.New(t, g)
				if lisp {
					vm = gorgonia.NewLispMachine(g, gorgonia.ExecuteFwdOnly())
				}
				require.NoError(t, vm.RunAll())
				vm.Close()
				assert.Equal(t, tensor.Shape(append(append([]int{}, shape...), 2)), v.Value().Shape())
			}
			g, emb, v := build()
			cost := gorgonia.Must(gorgonia.Sum(v))
			_, err := gorgonia.Grad(cost, append(emb.Learnables(), emb.GradNodes()...)...)
			// Gorgonia's SymDiffError keeps the op's error only as text.
			require.Error(t, err, "sparse=%v shape=%v", sparse, shape)
			assert.Contains(t, err.Error(), `embedding "words": its output's gradient has shape`)
			assert.Contains(t, err.Error(), "empty batch")
			_ = g
		}
	}
	// Bags: all bags empty is a batch like any other; no bags at all is
	// refused by Grad.
	g := gorgonia.NewGraph()
	emb, err := NewEmbedding(g, "words", 5, 2, tensor.Float64)
	require.NoError(t, err)
	ids := gorgonia.NodeFromAny(g, tensor.New(tensor.Of(tensor.Int), tensor.WithShape(0)), gorgonia.WithName("ids"))
	offs := gorgonia.NodeFromAny(g, tensor.New(tensor.WithBacking([]int{0, 0})), gorgonia.WithName("offs"))
	pooled, err := emb.Bag(ids, offs, nil, BagMean)
	require.NoError(t, err)
	_, err = gorgonia.Grad(gorgonia.Must(gorgonia.Sum(pooled)), emb.Learnables()...)
	require.NoError(t, err)
	vm := vmtest.New(t, g)
	require.NoError(t, vm.RunAll())
	vm.Close()
	assert.Equal(t, []float64{0, 0, 0, 0}, pooled.Value().Data())

	g = gorgonia.NewGraph()
	emb, err = NewEmbedding(g, "words", 5, 2, tensor.Float64)
	require.NoError(t, err)
	ids = gorgonia.NodeFromAny(g, tensor.New(tensor.Of(tensor.Int), tensor.WithShape(0)), gorgonia.WithName("ids"))
	offs = gorgonia.NodeFromAny(g, tensor.New(tensor.Of(tensor.Int), tensor.WithShape(0)), gorgonia.WithName("offs"))
	pooled, err = emb.Bag(ids, offs, nil, BagSum)
	require.NoError(t, err)
	_, err = gorgonia.Grad(gorgonia.Must(gorgonia.Sum(pooled)), emb.Learnables()...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "empty batch")
}

// PackBags fills ids and offsets, pads the rest, and changes nothing on
// error.
func TestPackBags(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Int, tensor.Int32, tensor.Int64} {
		ids := tensor.New(tensor.Of(dt), tensor.WithShape(7))
		offs := tensor.New(tensor.Of(dt), tensor.WithShape(3))
		require.NoError(t, PackBags(ids, offs, [][]int{{4, 1}, {}, {2, 2, 3}}, 9))
		assert.Equal(t, []int64{4, 1, 2, 2, 3, 9, 9}, int64sOf(ids))
		assert.Equal(t, []int64{0, 2, 2}, int64sOf(offs))

		for name, c := range map[string]struct {
			bags [][]int
			want error
		}{
			"too many ids":    {[][]int{{1, 2, 3, 4}, {1, 2, 3, 4}, {}}, gather.ErrShape},
			"too many bags":   {[][]int{{1}, {2}, {3}, {4}}, gather.ErrShape},
			"too few bags":    {[][]int{{1}}, gather.ErrShape},
			"id beyond int32": {[][]int{{math.MaxInt32 + bigOffset}, {}, {}}, gather.ErrDtype},
		} {
			if name == "id beyond int32" && (dt != tensor.Int32 || bigOffset == 0) {
				continue
			}
			err := PackBags(ids, offs, c.bags, 9)
			require.ErrorIs(t, err, c.want, name)
			assert.Equal(t, []int64{4, 1, 2, 2, 3, 9, 9}, int64sOf(ids), name)
			assert.Equal(t, []int64{0, 2, 2}, int64sOf(offs), name)
		}
	}
	f := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(3))
	require.ErrorIs(t, PackBags(f, tensor.New(tensor.Of(tensor.Int), tensor.WithShape(1)), [][]int{{1}}, 0), gather.ErrDtype)
	require.ErrorIs(t, PackBags(nil, nil, nil, 0), gather.ErrShape)
}

func int64sOf(t *tensor.Dense) []int64 {
	out := make([]int64, t.Shape().TotalSize())
	for i := range out {
		switch t.Dtype() {
		case tensor.Int:
			out[i] = int64(t.Ints()[i])
		case tensor.Int32:
			out[i] = int64(t.Int32s()[i])
		default:
			out[i] = t.Int64s()[i]
		}
	}
	return out
}

// bigOffset is 1 where int has 64 bits, so that MaxInt32 + bigOffset is an
// id beyond int32; 0 where it has 32 bits and no such int exists.
const bigOffset = strconv.IntSize/32 - 1
