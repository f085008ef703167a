package nn

import (
	"fmt"
	"math"
	"testing"

	"github.com/gathergrad/gather/internal/vmtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/ref"
)

// refRenorm rescales the rows of table named by ids as PyTorch's max_norm
// does.
func refRenorm(table []float64, dim int, ids []int64, vocab int, maxNorm float64) []float64 {
	out := append([]float64{}, table...)
	for _, v := range ids {
		j := ref.NormIndex(v, vocab)
		row := out[j*dim : (j+1)*dim]
		var ss float64
		for _, x := range row {
			ss += x * x
		}
		if n := math.Sqrt(ss); n > maxNorm {
			for d := range row {
				row[d] *= maxNorm / (n + 1e-7)
			}
		}
	}
	return out
}

// With WithMaxNorm, a table read by two lookups and a bag in one graph
// (PyTorch's autograd fails there, pytorch#26596): every row they name is
// rescaled once, rows they do not name are untouched, each reads the
// rescaled rows, and the table's gradient is that of lookups of the
// rescaled table; in both machines.
func TestEmbeddingMaxNormSharedTable(t *testing.T) {
	const vocab, dim, maxNorm = 6, 3, 1.5
	table := []float64{
		3, 0, 4, // norm 5
		0.1, 0.2, 0.2, // norm 0.3
		1, 1, 1, // norm 1.73
		-2, 0, 0, // norm 2
		0, 0, 0.5,
		9, 9, 9, // never named
	}
	ids1, ids2 := []int64{0, 1, 2}, []int64{2, 3, 0} // row 2 in both
	bagIDs := []int64{4, 3}
	want := refRenorm(refRenorm(refRenorm(table, dim, ids1, vocab, maxNorm), dim, ids2, vocab, maxNorm), dim, bagIDs, vocab, maxNorm)
	for _, machine := range []string{"tape", "lisp"} {
		t.Run(machine, func(t *testing.T) {
			g := gorgonia.NewGraph()
			emb, err := NewEmbedding(g, "words", vocab, dim, tensor.Float64, WithMaxNorm(maxNorm),
				WithInit(func(tensor.Dtype, ...int) any { return append([]float64{}, table...) }))
			require.NoError(t, err)
			node := func(name string, v []int64) *gorgonia.Node {
				return gorgonia.NodeFromAny(g, ref.CastIndices(v, []int{len(v)}, tensor.Int64), gorgonia.WithName(name))
			}
			a, err := emb.Lookup(node("a", ids1))
			require.NoError(t, err)
			b, err := emb.Lookup(node("b", ids2))
			require.NoError(t, err)
			bag, err := emb.Bag(gorgonia.NodeFromAny(g, ref.CastIndices(bagIDs, []int{1, 2}, tensor.Int64), gorgonia.WithName("bag")), nil, nil, BagSum)
			require.NoError(t, err)
			// Weights for every output element, so the gradient shows which rows each read.
			wa := gorgonia.NodeFromAny(g, ref.FloatTensor([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9}, []int{3, 3}, tensor.Float64), gorgonia.WithName("wa"))
			wb := gorgonia.NodeFromAny(g, ref.FloatTensor([]float64{-1, 1, -1, 2, 2, 2, 0.5, 0.5, 0.5}, []int{3, 3}, tensor.Float64), gorgonia.WithName("wb"))
			cost := gorgonia.Must(gorgonia.Add(
				gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(a, wa)))),
				gorgonia.Must(gorgonia.Add(gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(b, wb)))), gorgonia.Must(gorgonia.Sum(bag)))),
			))
			var vm gorgonia.VM
			if machine == "tape" {
				_, err = gorgonia.Grad(cost, emb.Table)
				require.NoError(t, err)
				vm = vmtest.New(t, g)
			} else {
				vm = gorgonia.NewLispMachine(g)
			}
			defer vm.Close()
			require.NoError(t, vm.RunAll())
			assert.InDeltaSlice(t, want, emb.Table.Value().(*tensor.Dense).Float64s(), 1e-12, "the table after the run")
			rows := func(ids []int64) []float64 {
				var out []float64
				for _, v := range ids {
					j := ref.NormIndex(v, vocab)
					out = append(out, want[j*dim:(j+1)*dim]...)
				}
				return out
			}
			assert.InDeltaSlice(t, rows(ids1), ref.Floats(a.Value().(*tensor.Dense)), 1e-12, "first lookup")
			assert.InDeltaSlice(t, rows(ids2), ref.Floats(b.Value().(*tensor.Dense)), 1e-12, "second lookup")
			r := rows(bagIDs)
			assert.InDeltaSlice(t, []float64{r[0] + r[3], r[1] + r[4], r[2] + r[5]}, ref.Floats(bag.Value().(*tensor.Dense)), 1e-12, "bag")
			wantGrad := ref.IndexAdd([]int{vocab, dim}, ids1, []int{3}, 0, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9})
			for i, v := range ref.IndexAdd([]int{vocab, dim}, ids2, []int{3}, 0, []float64{-1, 1, -1, 2, 2, 2, 0.5, 0.5, 0.5}) {
				wantGrad[i] += v
			}
			for i, v := range ref.IndexAdd([]int{vocab, dim}, bagIDs, []int{2}, 0, []float64{1, 1, 1, 1, 1, 1}) {
				wantGrad[i] += v
			}
			gt, err := emb.Table.Grad()
			require.NoError(t, err)
			assert.InDeltaSlice(t, wantGrad, ref.Floats(gt.(*tensor.Dense)), 1e-12, "table gradient")
		})
	}
}

// WithScaleGradByFreq divides each row's gradient by its id's count
// in the lookup's ids, for lookups and sum and mean bags, dense and
// row-sparse, the padding row still getting none.
func TestEmbeddingScaleGradByFreq(t *testing.T) {
	const vocab, dim = 5, 2
	ids := []int64{1, 3, 1, 1, 0, 3, 1} // row 1 four times, row 3 twice, row 0 (padding) once
	up := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}
	counts := map[int]float64{}
	for _, v := range ids {
		counts[ref.NormIndex(v, vocab)]++
	}
	wantLookup := make([]float64, vocab*dim)
	for i, v := range ids {
		j := ref.NormIndex(v, vocab)
		if j == 0 {
			continue
		}
		for d := range dim {
			wantLookup[j*dim+d] += up[i*dim+d] / counts[j]
		}
	}
	bounds := []int{0, 3, 7}
	gBag := []float64{1, -2, 0.5, 3}
	for _, mode := range []string{"lookup", "sum", "mean"} {
		var want []float64
		if mode == "lookup" {
			want = wantLookup
		} else {
			m := map[string]BagMode{"sum": BagSum, "mean": BagMean}[mode]
			// Each position's share of its bag's gradient, divided by its id's count.
			want = make([]float64, vocab*dim)
			for b := range 2 {
				live := 0
				for i := bounds[b]; i < bounds[b+1]; i++ {
					if ref.NormIndex(ids[i], vocab) != 0 {
						live++
					}
				}
				for i := bounds[b]; i < bounds[b+1]; i++ {
					j := ref.NormIndex(ids[i], vocab)
					if j == 0 {
						continue
					}
					c := 1.0
					if m == BagMean {
						c = 1 / float64(live)
					}
					for d := range dim {
						want[j*dim+d] += c * gBag[b*dim+d] / counts[j]
					}
				}
			}
		}
		for _, sparse := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sparse=%v", mode, sparse), func(t *testing.T) {
				g := gorgonia.NewGraph()
				opts := []NewEmbeddingOption{WithScaleGradByFreq(), WithPadding(0)}
				if sparse {
					opts = append(opts, WithSparse())
				}
				emb, err := NewEmbedding(g, "words", vocab, dim, tensor.Float64, opts...)
				require.NoError(t, err)
				var out, w *gorgonia.Node
				if mode == "lookup" {
					out, err = emb.Lookup(gorgonia.NodeFromAny(g, ref.CastIndices(ids, []int{len(ids)}, tensor.Int64), gorgonia.WithName("ids")))
					w = gorgonia.NodeFromAny(g, ref.FloatTensor(up, []int{len(ids), dim}, tensor.Float64), gorgonia.WithName("w"))
				} else {
					m := map[string]BagMode{"sum": BagSum, "mean": BagMean}[mode]
					offs := gorgonia.NodeFromAny(g, ref.CastIndices([]int64{0, 3}, []int{2}, tensor.Int64), gorgonia.WithName("offs"))
					out, err = emb.Bag(gorgonia.NodeFromAny(g, ref.CastIndices(ids, []int{len(ids)}, tensor.Int64), gorgonia.WithName("ids")), offs, nil, m)
					w = gorgonia.NodeFromAny(g, ref.FloatTensor(gBag, []int{2, dim}, tensor.Float64), gorgonia.WithName("w"))
				}
				require.NoError(t, err)
				cost := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(out, w))))
				_, err = gorgonia.Grad(cost, append(emb.Learnables(), emb.GradNodes()...)...)
				require.NoError(t, err)
				vm := vmtest.New(t, g)
				defer vm.Close()
				require.NoError(t, vm.RunAll())
				got := make([]float64, vocab*dim)
				if sparse {
					rg, err := emb.RowGrad()
					require.NoError(t, err)
					for k, r := range rg.Rows {
						copy(got[r*dim:(r+1)*dim], ref.Floats(rg.Values)[k*dim:(k+1)*dim])
					}
				} else {
					gt, err := emb.Table.Grad()
					require.NoError(t, err)
					got = ref.Floats(gt.(*tensor.Dense))
				}
				assert.InDeltaSlice(t, want, got, 1e-12)
			})
		}
	}
	// Max bags have no frequency scaling, as in PyTorch.
	g := gorgonia.NewGraph()
	emb, err := NewEmbedding(g, "w", 3, 2, tensor.Float64, WithScaleGradByFreq())
	require.NoError(t, err)
	_, err = emb.Bag(gorgonia.NewMatrix(g, tensor.Int, gorgonia.WithShape(2, 2), gorgonia.WithName("ids")), nil, nil, BagMax)
	assert.ErrorIs(t, err, gather.ErrOption)
}

// A sparse lookup's row gradient is the dense gradient in the LispMachine
// too, whose DoDiff path differs from the TapeMachine's.
func TestSparseLookupLispMachine(t *testing.T) {
	ids := []int64{2, 0, 2, 4}
	up := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	want := ref.IndexAdd([]int{5, 2}, ids, []int{4}, 0, up)
	g := gorgonia.NewGraph()
	emb, err := NewEmbedding(g, "words", 5, 2, tensor.Float64, WithSparse())
	require.NoError(t, err)
	out, err := emb.Lookup(gorgonia.NodeFromAny(g, ref.CastIndices(ids, []int{4}, tensor.Int64), gorgonia.WithName("ids")))
	require.NoError(t, err)
	w := gorgonia.NodeFromAny(g, ref.FloatTensor(up, []int{4, 2}, tensor.Float64), gorgonia.WithName("w"))
	gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(out, w))))
	vm := gorgonia.NewLispMachine(g)
	defer vm.Close()
	require.NoError(t, vm.RunAll())
	rg, err := emb.RowGrad()
	require.NoError(t, err)
	got := make([]float64, 10)
	for k, r := range rg.Rows {
		copy(got[r*2:(r+1)*2], ref.Floats(rg.Values)[k*2:(k+1)*2])
	}
	assert.Equal(t, want, got)
}
