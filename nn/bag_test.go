package nn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gathergrad/gather/internal/vmtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/gradcheck"
	"github.com/gathergrad/gather/internal/ref"
)

// refBag is EmbeddingBag written for clarity: the pooled output, and for
// upstream gradient g the gradients of the table and of the weights.
func refBag(table []float64, vocab, dim int, ids []int64, bounds []int, w []float64, pad int, mode BagMode, g []float64) (out, gt, gw []float64) {
	bags := len(bounds) - 1
	out, gt, gw = make([]float64, bags*dim), make([]float64, vocab*dim), make([]float64, len(ids))
	weight := func(i int) float64 {
		if w == nil {
			return 1
		}
		return w[i]
	}
	for b := range bags {
		var live []int // non-padding positions
		for i := bounds[b]; i < bounds[b+1]; i++ {
			if ref.NormIndex(ids[i], vocab) != pad {
				live = append(live, i)
			}
		}
		for d := range dim {
			row := func(i int) float64 { return table[ref.NormIndex(ids[i], vocab)*dim+d] }
			gb := g[b*dim+d]
			switch {
			case len(live) == 0:
			case mode == BagMax:
				best := live[0]
				for _, i := range live[1:] {
					if weight(i)*row(i) > weight(best)*row(best) {
						best = i
					}
				}
				out[b*dim+d] = weight(best) * row(best)
				gt[ref.NormIndex(ids[best], vocab)*dim+d] += weight(best) * gb
				gw[best] += row(best) * gb
			default:
				m := 1.0
				if mode == BagMean {
					m = float64(len(live))
				}
				for _, i := range live {
					out[b*dim+d] += weight(i) * row(i) / m
					gt[ref.NormIndex(ids[i], vocab)*dim+d] += weight(i) * gb / m
					gw[i] += row(i) * gb / m
				}
			}
		}
	}
	return out, gt, gw
}

// bagCase is one configuration of the reference tests.
type bagCase struct {
	mode    BagMode
	offsets bool
	weights bool
	pad     int // -1 for none
	it      tensor.Dtype
}

func (c bagCase) String() string {
	return fmt.Sprintf("%v/offsets=%v/weights=%v/pad=%d/%v", c.mode, c.offsets, c.weights, c.pad, c.it)
}

// bagInputs draws a table of distinct values, ids (negatives and repeats
// included, some padding), bag bounds (empty bags included with offsets),
// weights and an upstream gradient.
func bagInputs(r *rand.Rand, c bagCase, vocab, dim, bags int) (table []float64, ids []int64, bounds []int, w, g []float64) {
	table = make([]float64, vocab*dim)
	for i, p := range r.Perm(len(table)) {
		table[i] = float64(p)/float64(len(table)) - 0.5 + 0.01*float64(i%3) // distinct values
	}
	bounds = make([]int, bags+1)
	if c.offsets {
		for b := 1; b <= bags; b++ {
			bounds[b] = bounds[b-1] + r.IntN(5) // 0 to 4 ids: empty bags too
		}
	} else {
		for b := range bounds {
			bounds[b] = b * 3
		}
	}
	n := bounds[bags]
	ids = make([]int64, n)
	for i := range ids {
		ids[i] = int64(r.IntN(vocab))
	}
	if c.pad >= 0 && n > 2 {
		ids[1] = int64(c.pad)
		ids[n-1] = int64(c.pad)
	}
	if c.weights {
		w = make([]float64, n)
		for i := range w {
			w[i] = r.Float64()*2 - 0.5
		}
	}
	g = make([]float64, bags*dim)
	for i := range g {
		g[i] = r.NormFloat64()
	}
	return table, ids, bounds, w, g
}

// bagValues returns a case's inputs of the op in its order: the table, the
// ids (flat with offsets, [bags, 3] without), the offsets and the weights
// when the case has them.
func bagValues(c bagCase, dt tensor.Dtype, table []float64, vocab, dim int, ids []int64, bounds []int, w []float64) []gorgonia.Value {
	bags := len(bounds) - 1
	in := []gorgonia.Value{ref.FloatTensor(table, []int{vocab, dim}, dt)}
	ishape := []int{bags, 3}
	if c.offsets {
		ishape = []int{len(ids)}
		o := make([]int64, bags)
		for b := range o {
			o[b] = int64(bounds[b])
		}
		in = append(in, ref.CastIndices(ids, ishape, c.it), ref.CastIndices(o, []int{bags}, c.it))
	} else {
		in = append(in, ref.CastIndices(ids, ishape, c.it))
	}
	if c.weights {
		in = append(in, ref.FloatTensor(w, ishape, dt))
	}
	return in
}

// bagOpts returns a case's options: its padding index, if any.
func bagOpts(c bagCase) []EmbeddingBagOption {
	if c.pad < 0 {
		return nil
	}
	return []EmbeddingBagOption{WithPadding(c.pad)}
}

// bagGraph builds sum(EmbeddingBag(...) * G) on copies of the inputs and
// returns the output and the table and weight gradient nodes.
func bagGraph(c bagCase, dt tensor.Dtype, table []float64, vocab, dim int, ids []int64, bounds []int, w, g []float64) (g2 *gorgonia.ExprGraph, tn, wn, out *gorgonia.Node, err error) {
	bags := len(bounds) - 1
	gr := gorgonia.NewGraph()
	vals := bagValues(c, dt, table, vocab, dim, ids, bounds, w)
	node := func(v gorgonia.Value, name string) *gorgonia.Node {
		return gorgonia.NodeFromAny(gr, v, gorgonia.WithName(name))
	}
	tn = node(vals[0], "table")
	in := node(vals[1], "ids")
	var offs *gorgonia.Node
	k := 2
	if c.offsets {
		offs, k = node(vals[2], "offsets"), 3
	}
	if c.weights {
		wn = node(vals[k], "w")
	}
	out, err = EmbeddingBag(tn, in, offs, wn, c.mode, bagOpts(c)...)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	gn := gorgonia.NodeFromAny(gr, ref.FloatTensor(g, []int{bags, dim}, dt), gorgonia.WithName("g"))
	cost := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(out, gn))))
	_ = cost
	return gr, tn, wn, out, nil
}

// Every mode × offsets or fixed bags × weights or none × padding or none ×
// index dtype, in both machines: the output and both gradients equal the
// reference.
func TestBagMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	const vocab, dim, bags = 7, 3, 5
	for _, mode := range []BagMode{BagSum, BagMean, BagMax} {
		for _, offsets := range []bool{false, true} {
			for _, weights := range []bool{false, true} {
				for _, pad := range []int{-1, 2} {
					for _, it := range []tensor.Dtype{tensor.Int, tensor.Int32, tensor.Int64} {
						c := bagCase{mode, offsets, weights, pad, it}
						table, ids, bounds, w, g := bagInputs(r, c, vocab, dim, bags)
						want, wantT, wantW := refBag(table, vocab, dim, ids, bounds, w, pad, mode, g)
						for _, machine := range []string{"tape", "lisp"} {
							t.Run(c.String()+"/"+machine, func(t *testing.T) {
								gr, tn, wn, out, err := bagGraph(c, tensor.Float64, table, vocab, dim, ids, bounds, w, g)
								require.NoError(t, err)
								cost := gr.AllNodes()[len(gr.AllNodes())-1]
								var vm gorgonia.VM
								if machine == "tape" {
									wrt := gorgonia.Nodes{tn}
									if wn != nil {
										wrt = append(wrt, wn)
									}
									_, err := gorgonia.Grad(cost, wrt...)
									require.NoError(t, err)
									vm = vmtest.New(t, gr)
								} else {
									vm = gorgonia.NewLispMachine(gr)
								}
								defer vm.Close()
								require.NoError(t, vm.RunAll())
								assert.InDeltaSlice(t, want, ref.Floats(out.Value().(*tensor.Dense)), 1e-12, "output")
								gt, err := tn.Grad()
								require.NoError(t, err)
								assert.InDeltaSlice(t, wantT, ref.Floats(gt.(*tensor.Dense)), 1e-12, "table gradient")
								if wn != nil {
									gw, err := wn.Grad()
									require.NoError(t, err)
									assert.InDeltaSlice(t, wantW, ref.Floats(gw.(*tensor.Dense)), 1e-12, "weights gradient")
								}
							})
						}
					}
				}
			}
		}
	}
}

// float32 tables with rows of 32-byte multiples take the pooling kernel's
// batched path (one block of registers, a rest, several blocks): its
// output equals the reference in every mode, with and without weights
// and padding.
func TestBagFloat32WideRowsMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(57, 58))
	for _, dim := range []int{8, 72, 128} {
		for _, mode := range []BagMode{BagSum, BagMean, BagMax} {
			for _, weights := range []bool{false, true} {
				for _, pad := range []int{-1, 2} {
					c := bagCase{mode, true, weights, pad, tensor.Int64}
					// 300 bags of 0 to 4 ids: several batches of whole bags.
					const vocab, bags = 9, 300
					table, ids, bounds, w, g := bagInputs(r, c, vocab, dim, bags)
					// Then a bag of 600 ids (added in batches), 300 empty bags
					// (more bags than a batch holds) and a bag of 3 ids.
					for _, m := range append(append([]int{600}, make([]int, 300)...), 3) {
						for range m {
							ids = append(ids, int64(r.IntN(vocab)))
							if weights {
								w = append(w, r.Float64())
							}
						}
						bounds = append(bounds, len(ids))
						g = append(g, make([]float64, dim)...)
					}
					want, _, _ := refBag(table, vocab, dim, ids, bounds, w, pad, mode, g)
					gr, tn, _, out, err := bagGraph(c, tensor.Float32, table, vocab, dim, ids, bounds, w, g)
					require.NoError(t, err)
					// With the gradient asked for, no later op overwrites the output.
					_, err = gorgonia.Grad(gr.AllNodes()[len(gr.AllNodes())-1], tn)
					require.NoError(t, err)
					vm := vmtest.New(t, gr)
					require.NoError(t, vm.RunAll())
					// The 600-id bag sums to about 100: float32 keeps 1e-5 of that.
					assert.InDeltaSlice(t, want, ref.Floats(out.Value().(*tensor.Dense)), 1e-3, "dim %d %s", dim, c)
					vm.Close()
				}
			}
		}
	}
}

// The table's and the weights' gradients against finite differences, in
// every mode (max with distinct values, so that no tie moves under the
// step), float64 and float32.
func TestBagGradCheck(t *testing.T) {
	r := rand.New(rand.NewPCG(53, 54))
	for _, mode := range []BagMode{BagSum, BagMean, BagMax} {
		for _, dt := range floatDtypes {
			c := bagCase{mode, true, true, 2, tensor.Int64}
			table, ids, bounds, w, g := bagInputs(r, c, 6, 3, 4)
			o := make([]int64, 4)
			for b := range o {
				o[b] = int64(bounds[b])
			}
			build := func(gr *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error) {
				out, err := EmbeddingBag(in[0], in[1], in[2], in[3], mode, WithPadding(2))
				if err != nil {
					return nil, err
				}
				return gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(out, in[4])))
			}
			inputs := []tensor.Tensor{ref.FloatTensor(table, []int{6, 3}, dt), ref.CastIndices(ids, []int{len(ids)}, tensor.Int64),
				ref.CastIndices(o, []int{4}, tensor.Int64), ref.FloatTensor(w, []int{len(ids)}, dt), ref.FloatTensor(g, []int{4, 3}, dt)}
			for _, machine := range []string{"tape", "lisp"} {
				var opts []gradcheck.Option
				if machine == "lisp" {
					opts = append(opts, gradcheck.WithLispMachine())
				}
				assert.NoError(t, gradcheck.Check(build, inputs, opts...), "%v %v %s", mode, dt, machine)
			}
		}
	}
}

// The table's gradient is bit-identical for any GOMAXPROCS.
func TestBagDeterministicAcrossGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	r := rand.New(rand.NewPCG(55, 56))
	for _, mode := range []BagMode{BagSum, BagMean, BagMax} {
		c := bagCase{mode, true, true, 0, tensor.Int64}
		const vocab, dim, bags = 300, 64, 2000
		table, ids, bounds, w, g := bagInputs(r, c, vocab, dim, bags)
		var want []float64
		for _, procs := range []int{1, 2, 3, 7} {
			runtime.GOMAXPROCS(procs)
			gr, tn, _, _, err := bagGraph(c, tensor.Float32, table, vocab, dim, ids, bounds, w, g)
			require.NoError(t, err)
			cost := gr.AllNodes()[len(gr.AllNodes())-1]
			_, err = gorgonia.Grad(cost, tn)
			require.NoError(t, err)
			vm := vmtest.New(t, gr)
			require.NoError(t, vm.RunAll())
			gt, _ := tn.Grad()
			got := ref.Floats(gt.(*tensor.Dense))
			vm.Close()
			if want == nil {
				want = got
				continue
			}
			for i := range want {
				if math.Float64bits(want[i]) != math.Float64bits(got[i]) {
					t.Fatalf("%v GOMAXPROCS=%d: element %d is %v, want %v", mode, procs, i, got[i], want[i])
				}
			}
		}
	}
}

// A sparse embedding's bags give row gradients equal to the dense
// gradient of the same bags, in every mode; a frozen one gives none; the
// embedding's padding row is skipped.
func TestEmbeddingBagModes(t *testing.T) {
	r := rand.New(rand.NewPCG(57, 58))
	const vocab, dim, bags = 9, 4, 6
	for _, mode := range []BagMode{BagSum, BagMean, BagMax} {
		c := bagCase{mode, true, true, 3, tensor.Int32}
		table, ids, bounds, w, g := bagInputs(r, c, vocab, dim, bags)
		_, wantT, _ := refBag(table, vocab, dim, ids, bounds, w, 3, mode, g)
		o := make([]int64, bags)
		for b := range o {
			o[b] = int64(bounds[b])
		}
		for _, kind := range []string{"dense", "sparse", "frozen"} {
			t.Run(fmt.Sprintf("%v/%s", mode, kind), func(t *testing.T) {
				gr := gorgonia.NewGraph()
				opts := []NewEmbeddingOption{WithInit(func(tensor.Dtype, ...int) any { return append([]float64{}, table...) }), WithPadding(3)}
				switch kind {
				case "sparse":
					opts = append(opts, WithSparse())
				case "frozen":
					opts = append(opts, WithFrozen())
				}
				emb, err := NewEmbedding(gr, "words", vocab, dim, tensor.Float64, opts...)
				require.NoError(t, err)
				in := gorgonia.NodeFromAny(gr, ref.CastIndices(ids, []int{len(ids)}, tensor.Int32), gorgonia.WithName("ids"))
				offs := gorgonia.NodeFromAny(gr, ref.CastIndices(o, []int{bags}, tensor.Int64), gorgonia.WithName("offsets"))
				wn := gorgonia.NodeFromAny(gr, ref.FloatTensor(w, []int{len(ids)}, tensor.Float64), gorgonia.WithName("w"))
				out, err := emb.Bag(in, offs, wn, mode)
				require.NoError(t, err)
				gn := gorgonia.NodeFromAny(gr, ref.FloatTensor(g, []int{bags, dim}, tensor.Float64), gorgonia.WithName("g"))
				cost := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(out, gn))))
				wrt := append(append(emb.Learnables(), emb.GradNodes()...), wn)
				_, err = gorgonia.Grad(cost, wrt...)
				require.NoError(t, err)
				vm := vmtest.New(t, gr)
				defer vm.Close()
				require.NoError(t, vm.RunAll())
				switch kind {
				case "dense":
					gt, err := emb.Table.Grad()
					require.NoError(t, err)
					assert.InDeltaSlice(t, wantT, ref.Floats(gt.(*tensor.Dense)), 1e-12)
				case "sparse":
					rg, err := emb.RowGrad()
					require.NoError(t, err)
					got := make([]float64, vocab*dim)
					for k, row := range rg.Rows {
						copy(got[row*dim:(row+1)*dim], ref.Floats(rg.Values)[k*dim:(k+1)*dim])
					}
					assert.InDeltaSlice(t, wantT, got, 1e-12)
					assert.NotContains(t, rg.Rows, 3, "the padding row")
				case "frozen":
					_, err := emb.Table.Grad()
					assert.Error(t, err, "a frozen table has no gradient")
				}
			})
		}
	}
}

// Bad offsets, ids, shapes, dtypes and modes are errors with the numbers
// in them; a failed run writes nothing the caller sees.
func TestEmbeddingBagErrors(t *testing.T) {
	g := gorgonia.NewGraph()
	table := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(5, 2), gorgonia.WithName("table"), gorgonia.WithInit(gorgonia.Zeroes()))
	vec := func(name string, v ...int) *gorgonia.Node {
		return gorgonia.NewVector(g, tensor.Int, gorgonia.WithName(name), gorgonia.WithValue(tensor.New(tensor.WithShape(len(v)), tensor.WithBacking(v))))
	}
	ids := vec("ids", 0, 1, 2, 3)
	ids2 := gorgonia.NewMatrix(g, tensor.Int, gorgonia.WithShape(2, 2), gorgonia.WithName("ids2"), gorgonia.WithInit(gorgonia.Zeroes()))
	build := []struct {
		name string
		call func() error
		want error
		msg  string
	}{
		{"1-D ids without offsets", func() error { _, err := EmbeddingBag(table, ids, nil, nil, BagSum); return err },
			gather.ErrShape, "embedding_bag: without offsets, ids must be [bags, k], got shape (4)"},
		{"2-D ids with offsets", func() error { _, err := EmbeddingBag(table, ids2, vec("o1", 0, 1), nil, BagSum); return err },
			gather.ErrShape, "embedding_bag: with offsets, ids must be a vector [n], got shape (2, 2)"},
		{"unknown mode", func() error { _, err := EmbeddingBag(table, ids2, nil, nil, BagMode(7)); return err },
			gather.ErrOption, "embedding_bag: unknown mode BagMode(7)"},
		{"weights shape", func() error {
			w := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(3), gorgonia.WithName("w3"))
			_, err := EmbeddingBag(table, ids, vec("o2", 0, 2), w, BagSum)
			return err
		}, gather.ErrShape, "embedding_bag: weights of shape (3) must have the shape of ids (4)"},
		{"weights dtype", func() error {
			w := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(4), gorgonia.WithName("w32"))
			_, err := EmbeddingBag(table, ids, vec("o3", 0, 2), w, BagSum)
			return err
		}, gather.ErrDtype, "embedding_bag: weights are float32, the table float64"},
		{"ids dtype", func() error {
			f := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(2, 2), gorgonia.WithName("fids"))
			_, err := EmbeddingBag(table, f, nil, nil, BagSum)
			return err
		}, gather.ErrDtype, "embedding_bag: ids must be int, int32 or int64, got float64"},
	}
	for _, c := range build {
		err := c.call()
		require.ErrorIs(t, err, c.want, c.name)
		assert.Contains(t, err.Error(), c.msg, c.name)
	}

	run := []struct {
		name    string
		ids     []int
		offsets []int
		msg     string
		index   bool
	}{
		{"first offset not 0", []int{0, 1, 2, 3}, []int{1, 2}, "embedding_bag: offsets[0] = 1; the first bag must start at 0", false},
		{"decreasing", []int{0, 1, 2, 3}, []int{0, 3, 2}, "embedding_bag: offsets[2] = 2 is less than offsets[1] = 3; offsets must not decrease", false},
		{"past n", []int{0, 1, 2, 3}, []int{0, 5}, "embedding_bag: offsets[1] = 5 is past the end of the 4 ids", false},
		{"id out of range", []int{0, 1, 9, 3}, []int{0, 2}, `embedding_bag "words": ids[2] = 9 is out of range [0, 4] for axis 0 of size 5`, true},
		{"negative id", []int{0, 1, -1, 3}, []int{0, 2}, `embedding_bag "words": ids[2] = -1 is out of range [0, 4] for axis 0 of size 5`, true},
	}
	for _, c := range run {
		t.Run(c.name, func(t *testing.T) {
			g := gorgonia.NewGraph()
			emb, err := NewEmbedding(g, "words", 5, 2, tensor.Float64)
			require.NoError(t, err)
			ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"), gorgonia.WithValue(tensor.New(tensor.WithShape(len(c.ids)), tensor.WithBacking(c.ids))))
			offs := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("offs"), gorgonia.WithValue(tensor.New(tensor.WithShape(len(c.offsets)), tensor.WithBacking(c.offsets))))
			_, err = emb.Bag(ids, offs, nil, BagMean)
			require.NoError(t, err)
			vm := vmtest.New(t, g)
			defer vm.Close()
			err = gather.Cause(vm.RunAll())
			require.Error(t, err)
			if c.index {
				var ie *gather.IndexError
				require.True(t, errors.As(err, &ie))
				assert.Equal(t, []int{2}, ie.Pos)
				assert.Equal(t, "words", ie.Name)
				assert.Equal(t, c.msg, ie.Error())
			} else {
				assert.ErrorIs(t, err, gather.ErrShape)
			}
			assert.Contains(t, err.Error(), c.msg)
		})
	}
}

// Views and strided tensors as inputs give the results of their
// contiguous copies, and are not modified.
func TestEmbeddingBagViews(t *testing.T) {
	r := rand.New(rand.NewPCG(59, 60))
	c := bagCase{BagMean, false, true, 1, tensor.Int64}
	const vocab, dim, bags = 6, 4, 3
	table, ids, bounds, w, g := bagInputs(r, c, vocab, dim, bags)
	want, wantT, wantW := refBag(table, vocab, dim, ids, bounds, w, 1, BagMean, g)

	// The table as rows 1..6 of a larger tensor; ids and weights as the
	// transposes of [3, bags] tensors.
	big := ref.FloatTensor(append(make([]float64, dim), table...), []int{vocab + 1, dim}, tensor.Float64)
	tv, err := big.Slice(tensor.S(1, vocab+1))
	require.NoError(t, err)
	idsT := make([]int64, len(ids))
	wT := make([]float64, len(w))
	for b := range bags {
		for k := range 3 {
			idsT[k*bags+b], wT[k*bags+b] = ids[b*3+k], w[b*3+k]
		}
	}
	iv := ref.CastIndices(idsT, []int{3, bags}, tensor.Int64)
	require.NoError(t, iv.T())
	wv := ref.FloatTensor(wT, []int{3, bags}, tensor.Float64)
	require.NoError(t, wv.T())

	gr := gorgonia.NewGraph()
	tn := gorgonia.NewMatrix(gr, tensor.Float64, gorgonia.WithShape(vocab, dim), gorgonia.WithName("table"))
	in := gorgonia.NewMatrix(gr, tensor.Int64, gorgonia.WithShape(bags, 3), gorgonia.WithName("ids"))
	wn := gorgonia.NewMatrix(gr, tensor.Float64, gorgonia.WithShape(bags, 3), gorgonia.WithName("w"))
	out, err := EmbeddingBag(tn, in, nil, wn, BagMean, WithPadding(1))
	require.NoError(t, err)
	o := out.Op().(*bagOp)
	vals := []gorgonia.Value{tv.(*tensor.Dense), iv, wv}
	before := ref.Floats(big)
	got, err := o.Do(vals...)
	require.NoError(t, err)
	assert.InDeltaSlice(t, want, ref.Floats(got.(*tensor.Dense)), 1e-12)
	up := ref.FloatTensor(g, []int{bags, dim}, tensor.Float64)
	gt, err := o.Grads[0].Do(append(vals, up)...)
	require.NoError(t, err)
	assert.InDeltaSlice(t, wantT, ref.Floats(gt.(*tensor.Dense)), 1e-12)
	gw, err := o.Grads[len(o.Grads)-1].Do(append(vals, up)...)
	require.NoError(t, err)
	gws := ref.Floats(gw.(*tensor.Dense))
	assert.InDeltaSlice(t, wantW, gws, 1e-12)
	assert.Equal(t, before, ref.Floats(big), "the table is unchanged")
}

// The gradient op checks the upstream gradient too before it clears a
// reused buffer: a failed call leaves the buffer as it was.
func TestBagGradPreallocUntouchedOnError(t *testing.T) {
	gr := gorgonia.NewGraph()
	tn := gorgonia.NewMatrix(gr, tensor.Float64, gorgonia.WithShape(4, 2), gorgonia.WithName("table"))
	in := gorgonia.NewMatrix(gr, tensor.Int, gorgonia.WithShape(2, 2), gorgonia.WithName("ids"))
	out, err := EmbeddingBag(tn, in, nil, nil, BagSum)
	require.NoError(t, err)
	d := out.Op().(*bagOp).Grads[0]
	buf := ref.FloatTensor([]float64{1, 2, 3, 4, 5, 6, 7, 8}, []int{4, 2}, tensor.Float64)
	table := ref.FloatTensor(make([]float64, 8), []int{4, 2}, tensor.Float64)
	ids := ref.CastIndices([]int64{0, 1, 2, 3}, []int{2, 2}, tensor.Int)
	badUp := ref.FloatTensor(make([]float64, 3), []int{3}, tensor.Float64)
	_, err = d.UsePreallocDo(buf, table, ids, badUp)
	require.ErrorIs(t, err, gather.ErrShape)
	assert.Equal(t, []float64{1, 2, 3, 4, 5, 6, 7, 8}, buf.Float64s())
}

// The forward pools into a reused buffer that can hold its result (one of
// stale values: every row is written, empty bags too) and
// into a new tensor otherwise; a failed call leaves the buffer as it was; a
// TapeMachine run again without Reset pools into the last run's output.
func TestBagPrealloc(t *testing.T) {
	r := rand.New(rand.NewPCG(53, 54))
	// vocab = bags: the table has the output's shape, so it could be
	// taken for the buffer.
	const vocab, dim, bags = 40, 8, 40 // float32 rows of 32 bytes: the assembly
	for _, c := range []bagCase{
		{mode: BagSum, offsets: true, weights: true, pad: 2, it: tensor.Int64},
		{mode: BagMean, offsets: true, pad: 2, it: tensor.Int32},
		{mode: BagMax, offsets: true, weights: true, pad: -1, it: tensor.Int},
	} {
		for _, dt := range floatDtypes {
			otherDt := tensor.Float32
			if dt == tensor.Float32 {
				otherDt = tensor.Float64
			}
			t.Run(fmt.Sprintf("%v/%v", c, dt), func(t *testing.T) {
				table, ids, bounds, w, g := bagInputs(r, c, vocab, dim, bags)
				want, _, _ := refBag(table, vocab, dim, ids, bounds, w, c.pad, c.mode, g)
				_, _, _, out, err := bagGraph(c, dt, table, vocab, dim, ids, bounds, w, g)
				require.NoError(t, err)
				o := out.Op().(*bagOp)
				in := bagValues(c, dt, table, vocab, dim, ids, bounds, w) // every case has offsets
				stale := make([]float64, bags*dim)
				for i := range stale {
					stale[i] = math.NaN()
				}
				buf := ref.FloatTensor(stale, []int{bags, dim}, dt)
				got, err := o.UsePreallocDo(buf, in...)
				require.NoError(t, err)
				assert.Same(t, buf, got)
				assert.InDeltaSlice(t, want, ref.Floats(buf), 1e-6)

				// Buffers that cannot hold the result are left alone.
				for name, other := range map[string]*tensor.Dense{
					"shape": ref.FloatTensor(make([]float64, bags*dim), []int{dim, bags}, dt),
					"dtype": ref.FloatTensor(make([]float64, bags*dim), []int{bags, dim}, otherDt),
					"table": in[0].(*tensor.Dense),
				} {
					before := ref.Floats(other)
					got, err := o.UsePreallocDo(other, in...)
					require.NoError(t, err, name)
					assert.NotSame(t, other, got, name)
					assert.InDeltaSlice(t, want, ref.Floats(got.(*tensor.Dense)), 1e-6, name)
					assert.Equal(t, before, ref.Floats(other), name)
				}

				// A bad id: an error, and the buffer as it was.
				before := ref.Floats(buf)
				bad := ref.CastIndices(append([]int64{vocab}, ids[1:]...), []int{len(ids)}, c.it)
				_, err = o.UsePreallocDo(buf, append([]gorgonia.Value{in[0], bad}, in[2:]...)...)
				var ie *gather.IndexError
				require.ErrorAs(t, err, &ie)
				assert.Equal(t, before, ref.Floats(buf))

				// The machine reuses the output when run again without Reset
				// (in a graph where nothing consumes it, which might run in
				// place on it).
				gr := gorgonia.NewGraph()
				ns := make([]*gorgonia.Node, 4)
				for k, v := range in {
					ns[k] = gorgonia.NodeFromAny(gr, v, gorgonia.WithName(fmt.Sprint("in", k)))
				}
				out, err = EmbeddingBag(ns[0], ns[1], ns[2], ns[3], c.mode, bagOpts(c)...)
				require.NoError(t, err)
				vm := vmtest.New(t, gr)
				defer vm.Close()
				require.NoError(t, vm.RunAll())
				first := out.Value().(*tensor.Dense)
				assert.InDeltaSlice(t, want, ref.Floats(first), 1e-6)
				require.NoError(t, vm.RunAll())
				assert.Same(t, first, out.Value())
				assert.InDeltaSlice(t, want, ref.Floats(first), 1e-6)
			})
		}
	}
}

// The forward into a reused output allocates nothing per call, in every
// mode and dtype (at GOMAXPROCS=1, which testing.AllocsPerRun sets).
func TestBagPreallocAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(55, 56))
	const vocab, dim, bags = 50, 8, 64
	for _, c := range []bagCase{
		{mode: BagSum, offsets: true, weights: true, pad: 2, it: tensor.Int64},
		{mode: BagMean, offsets: false, pad: -1, it: tensor.Int32},
		{mode: BagMax, offsets: true, pad: 3, it: tensor.Int},
	} {
		for _, dt := range floatDtypes {
			table, ids, bounds, w, g := bagInputs(r, c, vocab, dim, bags)
			_, _, _, out, err := bagGraph(c, dt, table, vocab, dim, ids, bounds, w, g)
			require.NoError(t, err)
			o := out.Op().(*bagOp)
			in := bagValues(c, dt, table, vocab, dim, ids, bounds, w)
			buf := ref.FloatTensor(make([]float64, bags*dim), []int{bags, dim}, dt)
			_, err = o.UsePreallocDo(buf, in...)
			require.NoError(t, err)
			allocs := testing.AllocsPerRun(20, func() {
				if _, err := o.UsePreallocDo(buf, in...); err != nil {
					t.Fatal(err)
				}
			})
			assert.Zero(t, allocs, "%v %v", c, dt)
		}
	}
}
