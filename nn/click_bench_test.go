package nn

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/ref"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// The click model of BenchmarkClickModel (bench/torch_peer.py's
// click_model): three mean bags of ids, each in a table of V+1 rows × 16
// (row V the padding row), four dense features through Linear(4, 16) and
// ReLU, all concatenated, Linear(64, 64), ReLU, Linear(64, 1), the
// logistic loss against 0/1 labels; SparseAdam on the tables, SGD on the
// dense layers.
var (
	clickVocab = [3]int{1_000_000, 100_000, 1_000}
	clickK     = [3]int{4, 3, 1}
)

const (
	clickBatch   = 512
	clickDim     = 16
	clickBatches = 64
)

// clickData is a batch of the click model: each feature's ids packed
// with the padding id, its offsets, the dense features and the labels.
type clickData struct {
	ids, offsets [3][]int64
	dense        []float32
	labels       []float32
}

// clickBatchesOf draws the benchmark's batches: bag b of feature f holds
// 1 + U[0, K) ids drawn by rand.NewZipf(r, 1.05, 2, V-1).
func clickBatchesOf(seed uint64) []clickData {
	r := rand.New(rand.NewPCG(seed, 1))
	var zipf [3]*rand.Zipf
	for f := range zipf {
		zipf[f] = rand.NewZipf(r, 1.05, 2, uint64(clickVocab[f]-1))
	}
	out := make([]clickData, clickBatches)
	for i := range out {
		d := &out[i]
		for f := range d.ids {
			d.ids[f] = make([]int64, clickBatch*clickK[f])
			for k := range d.ids[f] {
				d.ids[f][k] = int64(clickVocab[f]) // the padding row
			}
			d.offsets[f] = make([]int64, clickBatch)
			for b := range clickBatch {
				d.offsets[f][b] = int64(b * clickK[f])
				for k := range 1 + r.IntN(clickK[f]) {
					d.ids[f][b*clickK[f]+k] = int64(zipf[f].Uint64())
				}
			}
		}
		d.dense = make([]float32, clickBatch*4)
		for k := range d.dense {
			d.dense[k] = float32(r.NormFloat64())
		}
		d.labels = make([]float32, clickBatch)
		for k := range d.labels {
			d.labels[k] = float32(r.IntN(2))
		}
	}
	return out
}

// BenchmarkClickModel measures one training step of the click model on
// batches of 512 made beforehand, used in turn: forward, backward,
// SparseAdam (lr 0.01) on the three tables, SGD (lr 0.01) on the dense
// layers. The tables start from N(0, 0.05), the dense layers from
// U(-1/√fan_in, 1/√fan_in), as PyTorch's Linear.
func BenchmarkClickModel(b *testing.B) { ref.OnMachines(b, benchClickModel) }

func benchClickModel(b *testing.B, m ref.Machine) {
	vm, step := clickModel(b, m, false, false)
	ref.BenchSteps(b, vm, step)
}

// BenchmarkClickModelRaw is BenchmarkClickModel/machine on raw 64-bit ids:
// each table's ids go through a table.IDMap of its rows (RawIDs, the
// padding id a padding raw id) before the step. Its time over
// BenchmarkClickModel/machine's is what remapping costs a step.
func BenchmarkClickModelRaw(b *testing.B) {
	vm, step := clickModel(b, ref.Machines[0], true, false)
	ref.BenchSteps(b, vm, step)
}

// BenchmarkClickModelCached is BenchmarkClickModel/machine with each
// table in a cache (CachedEmbedding, 64 MB) in front of a
// table.MemoryStore, on numbered ids ("numbered") and on raw ids
// through an IDMap ("raw"): raw's time over numbered's is what
// remapping costs a cached step.
func BenchmarkClickModelCached(b *testing.B) {
	for _, raw := range []bool{false, true} {
		name := "numbered"
		if raw {
			name = "raw"
		}
		b.Run(name, func(b *testing.B) {
			vm, step := clickModel(b, ref.Machines[0], raw, true)
			ref.BenchSteps(b, vm, step)
		})
	}
}

// benchLinear adds a float32 Linear layer's weight [out, in] and bias
// [out], named name.weight and name.bias, to g, drawn from
// U(-1/√in, 1/√in) by r, as PyTorch's Linear draws them.
func benchLinear(g *gorgonia.ExprGraph, r *rand.Rand, name string, in, out int) (*gorgonia.Node, *gorgonia.Node) {
	bound := 1 / math.Sqrt(float64(in))
	uniform := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32((2*r.Float64() - 1) * bound)
		}
		return v
	}
	w := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithName(name+".weight"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(out, in), tensor.WithBacking(uniform(in*out)))))
	bias := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithName(name+".bias"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(out), tensor.WithBacking(uniform(out)))))
	return w, bias
}

// padRaw is the raw padding id of BenchmarkClickModelRaw's bags.
const padRaw = math.MinInt64

// clickModel builds BenchmarkClickModel's model on machine m, on raw ids
// or not, its tables cached or in the heap, and returns the machine and
// a function that runs one step.
func clickModel(b testing.TB, m ref.Machine, raw, cached bool) (gorgonia.VM, func()) {
	r := rand.New(rand.NewPCG(5, 6))
	g := gorgonia.NewGraph()
	var tables [3]*Embedding
	var pooled []*gorgonia.Node
	var idT, offT [3]*tensor.Dense
	for f := range tables {
		normal := func(dt tensor.Dtype, s ...int) any {
			v := make([]float32, tensor.Shape(s).TotalSize())
			for i := range v {
				v[i] = float32(0.05 * r.NormFloat64())
			}
			return v
		}
		eg := g
		if cached {
			eg = gorgonia.NewGraph() // the initial rows' graph
		}
		e, err := NewEmbedding(eg, "table"+string(rune('0'+f)), clickVocab[f]+1, clickDim, tensor.Float32,
			WithSparse(), WithPadding(clickVocab[f]), WithInit(normal))
		if err != nil {
			b.Fatal(err)
		}
		if cached {
			w, _ := e.Home().(Weights).Weight()
			store, err := table.NewMemoryStore(e.Name(), w, optim.NewSparseAdam(0.01).Columns(clickDim)...)
			if err != nil {
				b.Fatal(err)
			}
			c, err := table.NewCached(context.Background(), store, table.CacheOptions{Budget: 64 << 20})
			if err != nil {
				b.Fatal(err)
			}
			if e, err = CachedEmbedding(context.Background(), g, c, WithPadding(clickVocab[f])); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { e.Close(context.Background()) })
		}
		tables[f] = e
		idT[f] = tensor.New(tensor.WithShape(clickBatch*clickK[f]), tensor.Of(tensor.Int64))
		offT[f] = tensor.New(tensor.WithShape(clickBatch), tensor.Of(tensor.Int64))
		ids := gorgonia.NodeFromAny(g, idT[f], gorgonia.WithName("ids"+string(rune('0'+f))))
		offs := gorgonia.NodeFromAny(g, offT[f], gorgonia.WithName("offsets"+string(rune('0'+f))))
		p, err := e.Bag(ids, offs, nil, BagMean)
		if err != nil {
			b.Fatal(err)
		}
		pooled = append(pooled, p)
	}
	w1, b1 := benchLinear(g, r, "dense", 4, 16)
	w2, b2 := benchLinear(g, r, "top1", 64, 64)
	w3, b3 := benchLinear(g, r, "top2", 64, 1)
	params := gorgonia.Nodes{w1, b1, w2, b2, w3, b3}
	denseT := tensor.New(tensor.WithShape(clickBatch, 4), tensor.Of(tensor.Float32))
	labelT := tensor.New(tensor.WithShape(clickBatch, 1), tensor.Of(tensor.Float32))
	x := gorgonia.NodeFromAny(g, denseT, gorgonia.WithName("dense"))
	y := gorgonia.NodeFromAny(g, labelT, gorgonia.WithName("labels"))
	layer := func(in, w, bias *gorgonia.Node, relu bool) *gorgonia.Node {
		out := gorgonia.Must(Linear(in, w, bias))
		if relu {
			out = gorgonia.Must(gorgonia.Rectify(out))
		}
		return out
	}
	h := layer(x, w1, b1, true)
	z, err := Concat(1, append(pooled, h)...)
	if err != nil {
		b.Fatal(err)
	}
	logits := layer(layer(z, w2, b2, true), w3, b3, false)
	loss, err := BCEWithLogits(logits, y)
	if err != nil {
		b.Fatal(err)
	}
	wrt := append(gorgonia.Nodes{}, params...)
	for _, e := range tables {
		wrt = append(wrt, e.GradNodes()...)
	}
	if _, err := gorgonia.Grad(loss, wrt...); err != nil {
		b.Fatal(err)
	}
	vm, err := m.New(g, params)
	if err != nil {
		b.Fatal(err)
	}
	var adams [3]*optim.SparseAdam
	for f := range adams {
		adams[f] = optim.NewSparseAdam(0.01)
	}
	sgd := &optim.SGD{LearnRate: 0.01}
	data := clickBatchesOf(7)
	var maps [3]*RawIDs
	if raw {
		for f, e := range tables {
			im, err := table.NewIDMap(e.Name(), driver.IDMapOptions{Rows: clickVocab[f], Pad: true, PadID: padRaw})
			if err != nil {
				b.Fatal(err)
			}
			if maps[f], err = NewRawIDs(e, im, driver.RowInit{Seed: 3, Std: 0.05}); err != nil {
				b.Fatal(err)
			}
		}
		for i := range data {
			for f := range data[i].ids {
				for k, id := range data[i].ids[f] {
					data[i].ids[f][k] = padRaw
					if id != int64(clickVocab[f]) {
						data[i].ids[f][k] = int64(uint64(id)*0x9e3779b97f4a7c15 + 1) // distinct ids, spread over int64
					}
				}
			}
		}
	}
	n := 0
	step := func() {
		d := &data[n%clickBatches]
		n++
		for f := range idT {
			if raw {
				if err := maps[f].Map(context.Background(), d.ids[f], idT[f], int64(n)); err != nil {
					b.Fatal(err)
				}
			} else {
				copy(idT[f].Int64s(), d.ids[f])
			}
			copy(offT[f].Int64s(), d.offsets[f])
		}
		copy(denseT.Float32s(), d.dense)
		copy(labelT.Float32s(), d.labels)
		if err := vm.RunAll(); err != nil {
			b.Fatal(err)
		}
		for f, e := range tables {
			if err := e.Step(context.Background(), adams[f]); err != nil {
				b.Fatal(err)
			}
		}
		if err := sgd.Step(gorgonia.NodesToValueGrads(params)); err != nil {
			b.Fatal(err)
		}
		vm.Reset()
	}
	return vm, step
}
