package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/gradcheck"
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
			if normIndex(ids[i], vocab) != pad {
				live = append(live, i)
			}
		}
		for d := range dim {
			row := func(i int) float64 { return table[normIndex(ids[i], vocab)*dim+d] }
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
				gt[normIndex(ids[best], vocab)*dim+d] += weight(best) * gb
				gw[best] += row(best) * gb
			default:
				m := 1.0
				if mode == BagMean {
					m = float64(len(live))
				}
				for _, i := range live {
					out[b*dim+d] += weight(i) * row(i) / m
					gt[normIndex(ids[i], vocab)*dim+d] += weight(i) * gb / m
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
		ids[i] = int64(r.IntN(2*vocab) - vocab)
	}
	if c.pad >= 0 && n > 2 {
		ids[1] = int64(c.pad)
		ids[n-1] = int64(c.pad - vocab) // padding named by a negative id
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

// bagGraph builds sum(EmbeddingBag(...) * G) on copies of the inputs and
// returns the output and the table and weight gradient nodes.
func bagGraph(c bagCase, dt tensor.Dtype, table []float64, vocab, dim int, ids []int64, bounds []int, w, g []float64) (g2 *gorgonia.ExprGraph, tn, wn, out *gorgonia.Node, err error) {
	bags := len(bounds) - 1
	gr := gorgonia.NewGraph()
	tn = gorgonia.NodeFromAny(gr, floatTensor(table, []int{vocab, dim}, dt), gorgonia.WithName("table"))
	var in, offs *gorgonia.Node
	if c.offsets {
		in = gorgonia.NodeFromAny(gr, castIndices(ids, []int{len(ids)}, c.it), gorgonia.WithName("ids"))
		o := make([]int64, bags)
		for b := range o {
			o[b] = int64(bounds[b])
		}
		offs = gorgonia.NodeFromAny(gr, castIndices(o, []int{bags}, c.it), gorgonia.WithName("offsets"))
	} else {
		in = gorgonia.NodeFromAny(gr, castIndices(ids, []int{bags, 3}, c.it), gorgonia.WithName("ids"))
	}
	if c.weights {
		wn = gorgonia.NodeFromAny(gr, floatTensor(w, in.Shape(), dt), gorgonia.WithName("w"))
	}
	var opts []gather.Option
	if c.pad >= 0 {
		opts = append(opts, gather.WithPaddingIndex(c.pad))
	}
	out, err = EmbeddingBag(tn, in, offs, wn, c.mode, opts...)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	gn := gorgonia.NodeFromAny(gr, floatTensor(g, []int{bags, dim}, dt), gorgonia.WithName("g"))
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
									vm = gorgonia.NewTapeMachine(gr)
								} else {
									vm = gorgonia.NewLispMachine(gr)
								}
								defer vm.Close()
								require.NoError(t, vm.RunAll())
								assert.InDeltaSlice(t, want, floats(out.Value().(*tensor.Dense)), 1e-12, "output")
								gt, err := tn.Grad()
								require.NoError(t, err)
								assert.InDeltaSlice(t, wantT, floats(gt.(*tensor.Dense)), 1e-12, "table gradient")
								if wn != nil {
									gw, err := wn.Grad()
									require.NoError(t, err)
									assert.InDeltaSlice(t, wantW, floats(gw.(*tensor.Dense)), 1e-12, "weights gradient")
								}
							})
						}
					}
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
				out, err := EmbeddingBag(in[0], in[1], in[2], in[3], mode, gather.WithPaddingIndex(2))
				if err != nil {
					return nil, err
				}
				return gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(out, in[4])))
			}
			inputs := []tensor.Tensor{floatTensor(table, []int{6, 3}, dt), castIndices(ids, []int{len(ids)}, tensor.Int64),
				castIndices(o, []int{4}, tensor.Int64), floatTensor(w, []int{len(ids)}, dt), floatTensor(g, []int{4, 3}, dt)}
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
			vm := gorgonia.NewTapeMachine(gr)
			require.NoError(t, vm.RunAll())
			gt, _ := tn.Grad()
			got := floats(gt.(*tensor.Dense))
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
