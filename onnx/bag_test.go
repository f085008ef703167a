package onnx

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/nn"
)

// bagGraph is a graph of bags, with the values of its inputs.
type bagGraph struct {
	g      Graph
	values []*tensor.Dense
}

// bagCase builds EmbeddingBag of a [20, 4] table over 11 ids in 4 bags
// (one empty), by offsets or as [bags, k] ids, with weights or not.
func bagCase(t *testing.T, mode nn.BagMode, offsets, weights, last bool, opts ...nn.EmbeddingBagOption) bagGraph {
	g := gorgonia.NewGraph()
	r := rand.New(rand.NewPCG(3, 4))
	tv := make([]float32, 20*4)
	for i := range tv {
		tv[i] = float32(r.NormFloat64())
	}
	table := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(20, 4), gorgonia.WithName("table"), gorgonia.WithValue(tensor.New(tensor.WithShape(20, 4), tensor.WithBacking(tv))))
	var b bagGraph
	var ids, off, w *gorgonia.Node
	if offsets {
		idv := []int64{3, 7, 0, 7, 19, 2, 5, 0, 11, 12, 1}
		ov := []int64{0, 4, 4, 9}
		if last {
			ov = append(ov, int64(len(idv)))
		}
		ids = gorgonia.NewVector(g, tensor.Int64, gorgonia.WithShape(len(idv)), gorgonia.WithName("ids"))
		off = gorgonia.NewVector(g, tensor.Int64, gorgonia.WithShape(len(ov)), gorgonia.WithName("offsets"))
		b.g.Inputs = append(b.g.Inputs, ids, off)
		b.values = append(b.values, tensor.New(tensor.WithShape(len(idv)), tensor.WithBacking(idv)), tensor.New(tensor.WithShape(len(ov)), tensor.WithBacking(ov)))
	} else {
		idv := []int64{3, 7, 0, 7, 19, 2, 5, 0, 11, 12, 1, 0}
		ids = gorgonia.NewMatrix(g, tensor.Int64, gorgonia.WithShape(4, 3), gorgonia.WithName("ids"))
		b.g.Inputs = append(b.g.Inputs, ids)
		b.values = append(b.values, tensor.New(tensor.WithShape(4, 3), tensor.WithBacking(idv)))
	}
	if weights {
		n := ids.Shape().TotalSize()
		wv := make([]float32, n)
		for i := range wv {
			wv[i] = float32(r.Float64() + 0.5)
		}
		w = gorgonia.NewTensor(g, tensor.Float32, ids.Dims(), gorgonia.WithShape(ids.Shape()...), gorgonia.WithName("weights"))
		b.g.Inputs = append(b.g.Inputs, w)
		b.values = append(b.values, tensor.New(tensor.WithShape(ids.Shape()...), tensor.WithBacking(wv)))
	}
	if last {
		opts = append(opts, nn.WithIncludeLastOffset())
	}
	out, err := nn.EmbeddingBag(table, ids, off, w, mode, opts...)
	if err != nil {
		t.Fatal(err)
	}
	b.g.Outputs, b.g.OutputNames = []*gorgonia.Node{out}, []string{"out"}
	return b
}

// forward runs b's graph in Go and returns its output's values.
func (b bagGraph) forward(t *testing.T) []float64 {
	t.Helper()
	for k, n := range b.g.Inputs {
		if err := gorgonia.Let(n, b.values[k]); err != nil {
			t.Fatal(err)
		}
	}
	vm := gorgonia.NewTapeMachine(b.g.Outputs[0].Graph())
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, v := range b.g.Outputs[0].Value().Data().([]float32) {
		out = append(out, float64(v))
	}
	return out
}

// checkORT exports b and has ONNX Runtime run it: within 1e-6 of Go.
func (b bagGraph) checkORT(t *testing.T) float64 {
	t.Helper()
	want := b.forward(t)
	path := filepath.Join(t.TempDir(), "bag.onnx")
	if err := Export(path, b.g); err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(b.g.Inputs))
	for k, n := range b.g.Inputs {
		names[k] = n.Name()
	}
	got := runORT(t, path, names, b.values)["out"]
	if len(got) != len(want) {
		t.Fatalf("%d values from ONNX Runtime, %d from Go", len(got), len(want))
	}
	d := 0.0
	for i := range got {
		d = max(d, math.Abs(got[i]-want[i]))
	}
	if d > 1e-6 {
		t.Fatalf("ONNX Runtime %v, Go %v: %g apart", got, want, d)
	}
	return d
}

// EmbeddingBag exported in every mode, by offsets (with and without the
// last offset) and by [bags, k] ids, with per-sample weights and a
// padding id, runs in ONNX Runtime to Go's values within 1e-6, an empty
// bag's zeros included.
func TestORTBags(t *testing.T) {
	needORT(t)
	for _, mode := range []nn.BagMode{nn.BagSum, nn.BagMean, nn.BagMax} {
		for _, offsets := range []bool{true, false} {
			for _, weights := range []bool{false, true} {
				for _, pad := range []bool{false, true} {
					last := offsets && weights // once each way
					name := fmt.Sprintf("%v/offsets=%v/weights=%v/pad=%v/last=%v", mode, offsets, weights, pad, last)
					t.Run(name, func(t *testing.T) {
						var opts []nn.EmbeddingBagOption
						if pad {
							opts = append(opts, nn.WithPadding(7))
						}
						d := bagCase(t, mode, offsets, weights, last, opts...).checkORT(t)
						t.Logf("within %.2g", d)
					})
				}
			}
		}
	}
}

// clickBags is a click model of three pooled features (tables of 30, 40
// and 50 rows, sum, mean and max bags), concatenated, a linear layer and
// a sigmoid.
func clickBags(t *testing.T) bagGraph {
	g := gorgonia.NewGraph()
	r := rand.New(rand.NewPCG(5, 6))
	const batch, k, dim = 6, 4, 3
	var b bagGraph
	var pooled []*gorgonia.Node
	for f, vocab := range []int{30, 40, 50} {
		tv := make([]float32, vocab*dim)
		for i := range tv {
			tv[i] = float32(r.NormFloat64())
		}
		table := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(vocab, dim), gorgonia.WithName(fmt.Sprintf("feature%d.weight", f)),
			gorgonia.WithValue(tensor.New(tensor.WithShape(vocab, dim), tensor.WithBacking(tv))))
		ids := gorgonia.NewMatrix(g, tensor.Int64, gorgonia.WithShape(batch, k), gorgonia.WithName(fmt.Sprintf("feature%d", f)))
		iv := make([]int64, batch*k)
		for i := range iv {
			iv[i] = r.Int64N(int64(vocab))
		}
		b.g.Inputs = append(b.g.Inputs, ids)
		b.values = append(b.values, tensor.New(tensor.WithShape(batch, k), tensor.WithBacking(iv)))
		p, err := nn.EmbeddingBag(table, ids, nil, nil, []nn.BagMode{nn.BagSum, nn.BagMean, nn.BagMax}[f])
		if err != nil {
			t.Fatal(err)
		}
		pooled = append(pooled, p)
	}
	x, err := nn.Concat(1, pooled...)
	if err != nil {
		t.Fatal(err)
	}
	wv, bv := make([]float32, 3*dim), []float32{0.1}
	for i := range wv {
		wv[i] = float32(r.NormFloat64())
	}
	w := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(1, 3*dim), gorgonia.WithName("out.weight"), gorgonia.WithValue(tensor.New(tensor.WithShape(1, 3*dim), tensor.WithBacking(wv))))
	bias := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(1), gorgonia.WithName("out.bias"), gorgonia.WithValue(tensor.New(tensor.WithShape(1), tensor.WithBacking(bv))))
	l, err := nn.Linear(x, w, bias)
	if err != nil {
		t.Fatal(err)
	}
	p, err := gorgonia.Sigmoid(l)
	if err != nil {
		t.Fatal(err)
	}
	b.g.Outputs, b.g.OutputNames = []*gorgonia.Node{p}, []string{"out"}
	return b
}

// The click model of three bags, exported: ONNX Runtime runs it to Go's
// probabilities within 1e-6.
func TestORTClickBags(t *testing.T) {
	needORT(t)
	t.Logf("ONNX Runtime within %.2g of Go", clickBags(t).checkORT(t))
}

// The click model of three bags, exported and imported: the same bits.
func TestClickBagsRoundTrip(t *testing.T) { clickBags(t).roundTrip(t) }

// roundTrip exports b, imports the file and runs it: the same bits as
// b's graph.
func (b bagGraph) roundTrip(t *testing.T) {
	t.Helper()
	want := b.forward(t)
	path := filepath.Join(t.TempDir(), "bag.onnx")
	if err := Export(path, b.g); err != nil {
		t.Fatal(err)
	}
	m, err := ReadFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := run(t, m, b.values...)[0].Data().([]float32)
	if len(got) != len(want) {
		t.Fatalf("%d values back, %d in", len(got), len(want))
	}
	for i := range got {
		if float64(got[i]) != want[i] {
			t.Fatalf("read back: %v, want %v", got, want)
		}
	}
}

// Import reads every bag Export wrote back as nn.EmbeddingBag: the same
// bits, in every mode and form.
func TestBagRoundTrip(t *testing.T) {
	for _, mode := range []nn.BagMode{nn.BagSum, nn.BagMean, nn.BagMax} {
		for _, offsets := range []bool{true, false} {
			for _, weights := range []bool{false, true} {
				for _, pad := range []bool{false, true} {
					last := offsets && weights
					t.Run(fmt.Sprintf("%v/offsets=%v/weights=%v/pad=%v", mode, offsets, weights, pad), func(t *testing.T) {
						var opts []nn.EmbeddingBagOption
						if pad {
							opts = append(opts, nn.WithPadding(7))
						}
						bagCase(t, mode, offsets, weights, last, opts...).roundTrip(t)
					})
				}
			}
		}
	}
}
