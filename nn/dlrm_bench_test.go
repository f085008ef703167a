package nn

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/ref"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// dlrmRows are the rows of BenchmarkDLRM's 26 tables: Criteo Kaggle's
// cardinalities capped at 1,000,000 (bench/torch_peer.py's DLRM_ROWS).
var dlrmRows = func() []int {
	rows := []int{1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593,
		3194, 27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572}
	for k, v := range rows {
		rows[k] = min(v, 1_000_000)
	}
	return rows
}()

const (
	dlrmBatch   = 2048
	dlrmDim     = 16
	dlrmDense   = 13
	dlrmBatches = 8
)

// BenchmarkDLRM measures a training step of DLRM's model on Criteo's
// shapes (bench/torch_peer.py's dlrm is its PyTorch peer): batch 2048; 13
// dense features through the bottom MLP 13-512-256-64-16 (ReLU after
// each layer); 26 sparse features, one id a sample, in 26 tables of 16
// columns (dlrmRows) pooled by one Collection (sum); DotInteraction of the
// 27 vectors (367 columns); the top MLP 367-512-256-1 (ReLU between);
// BCEWithLogits; SGD (lr 0.01) on every parameter, the tables row-sparse
// (the collection's step). Ids are Zipf(1.05) per table; 8 batches
// made beforehand are used in turn.
//
// "step" is the whole step; "tables" the 26 tables alone: the lookup,
// backward and step, with loss Σ pooled·R, R a fixed random [2048, 416]
// tensor ([2048, 26, 16] in the peer). "step-raw" and "tables-raw" are
// the same on raw 64-bit ids, each table's through a table.IDMap of its
// rows (Feature.IDs, Collection.Map), the table one row larger (its
// padding row): their times over step's and tables' are what mapping
// costs. "tables-fused" is tables with the fused step
// (CollectionOptions.Fused); "tables-tracked" tables with every table
// tracking its changed rows (TrackChanges) and a Delta of each taken every
// 10 steps: over tables', what publishing deltas costs.
func BenchmarkDLRM(b *testing.B) {
	for _, name := range []string{"step", "tables", "step-raw", "tables-raw", "tables-fused", "tables-tracked"} {
		b.Run(name, func(b *testing.B) {
			vm, step := dlrmModel(b, ref.Machines[0], strings.HasPrefix(name, "tables"), name == "tables-fused", strings.HasSuffix(name, "raw"))
			if name == "tables-tracked" {
				step = tracked(b, step)
			}
			ref.BenchSteps(b, vm, step)
		})
	}
}

// tracked returns step with every table of the last dlrmModel tracking
// its changes, a Delta of each taken every 10 steps.
func tracked(b testing.TB, step func()) func() {
	for _, g := range lastDLRM.groups {
		g.e.TrackChanges()
	}
	n := 0
	return func() {
		step()
		if n++; n%10 == 0 {
			for _, g := range lastDLRM.groups {
				if _, err := g.e.Delta(context.Background(), 1, uint64(n/10)); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}

// lastDLRM is the collection of the last dlrmModel.
var lastDLRM *Collection

// dlrmModel builds BenchmarkDLRM's model (or its tables alone) on machine
// m, its collection fused or not, on raw ids or not, and returns the
// machine and a function that runs one step.
func dlrmModel(b testing.TB, m ref.Machine, tablesOnly, fused, raw bool) (gorgonia.VM, func()) {
	r := rand.New(rand.NewPCG(21, 22))
	g := gorgonia.NewGraph()
	var feats []Feature
	for k, v := range dlrmRows {
		bound := math.Sqrt(1 / float64(v))
		uniform := func(dt tensor.Dtype, s ...int) any {
			w := make([]float32, tensor.Shape(s).TotalSize())
			for i := range w {
				w[i] = float32((2*r.Float64() - 1) * bound)
			}
			return w
		}
		rows, opts := v, []NewEmbeddingOption{WithSparse(), WithInit(uniform)}
		if raw {
			rows, opts = v+1, append(opts, WithPadding(v))
		}
		e, err := NewEmbedding(g, "t"+string(rune('a'+k)), rows, dlrmDim, tensor.Float32, opts...)
		if err != nil {
			b.Fatal(err)
		}
		f := Feature{Key: e.Name(), Table: e, Mode: BagSum}
		if raw {
			if f.IDs, err = table.NewIDMap(e.Name(), driver.IDMapOptions{Rows: v}); err != nil {
				b.Fatal(err)
			}
		}
		feats = append(feats, f)
	}
	coll, err := NewCollection(feats, CollectionOptions{Fused: fused, Init: driver.RowInit{Seed: 1, Std: 0.01}})
	if err != nil {
		b.Fatal(err)
	}
	lastDLRM = coll
	nf := len(dlrmRows)
	valuesT := tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(nf*dlrmBatch))
	offsetsT := tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(nf*dlrmBatch+1))
	for k, o := 0, offsetsT.Int64s(); k < len(o); k++ {
		o[k] = int64(k) // one id a sample
	}
	values := gorgonia.NodeFromAny(g, valuesT, gorgonia.WithName("values"))
	offsets := gorgonia.NodeFromAny(g, offsetsT, gorgonia.WithName("offsets"))
	pooled, err := coll.Bag(values, offsets, nil)
	if err != nil {
		b.Fatal(err)
	}

	var params gorgonia.Nodes
	mlp := func(name string, x *gorgonia.Node, sizes []int, lastReLU bool) *gorgonia.Node {
		for k := 0; k+1 < len(sizes); k++ {
			w, bias := benchLinear(g, r, name+string(rune('0'+k)), sizes[k], sizes[k+1])
			params = append(params, w, bias)
			x = gorgonia.Must(Linear(x, w, bias))
			if lastReLU || k+2 < len(sizes) {
				x = gorgonia.Must(gorgonia.Rectify(x))
			}
		}
		return x
	}

	denseT := tensor.New(tensor.WithShape(dlrmBatch, dlrmDense), tensor.Of(tensor.Float32))
	labelT := tensor.New(tensor.WithShape(dlrmBatch, 1), tensor.Of(tensor.Float32))
	var loss *gorgonia.Node
	if tablesOnly {
		rv := make([]float32, dlrmBatch*nf*dlrmDim)
		for i := range rv {
			rv[i] = float32(r.NormFloat64())
		}
		// Σ pooled·R: each sample's dot product with its row of R
		// (BatchDot of [2048, 416] and [2048, 1, 416]), summed.
		rn := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(dlrmBatch, 1, nf*dlrmDim), tensor.WithBacking(rv)), gorgonia.WithName("R"))
		loss = gorgonia.Must(gorgonia.Sum(gorgonia.Must(BatchDot(pooled, rn))))
	} else {
		x := gorgonia.NodeFromAny(g, denseT, gorgonia.WithName("dense"))
		y := gorgonia.NodeFromAny(g, labelT, gorgonia.WithName("labels"))
		z := mlp("bottom", x, []int{dlrmDense, 512, 256, 64, dlrmDim}, true)
		inter, err := DotInteraction(z, pooled)
		if err != nil {
			b.Fatal(err)
		}
		logits := mlp("top", inter, []int{dlrmDim + (nf+1)*nf/2, 512, 256, 1}, false)
		if loss, err = BCEWithLogits(logits, y); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := gorgonia.Grad(loss, append(append(gorgonia.Nodes{}, params...), coll.GradNodes()...)...); err != nil {
		b.Fatal(err)
	}
	vm, err := m.New(g, params)
	if err != nil {
		b.Fatal(err)
	}

	// The batches: Zipf(1.05) ids a table (P(k) ∝ (1+k)^-1.05), N(0, 1)
	// dense features, 0/1 labels.
	type batch struct {
		values      []int64
		dense, labs []float32
	}
	data := make([]batch, dlrmBatches)
	zipf := make([]*rand.Zipf, nf)
	for k, v := range dlrmRows {
		zipf[k] = rand.NewZipf(r, 1.05, 1, uint64(v-1))
	}
	for i := range data {
		d := &data[i]
		d.values = make([]int64, nf*dlrmBatch)
		for k := range nf {
			for s := range dlrmBatch {
				id := zipf[k].Uint64()
				if raw {
					id = id*0x9e3779b97f4a7c15 + 1 // distinct ids, spread over int64
				}
				d.values[k*dlrmBatch+s] = int64(id)
			}
		}
		d.dense, d.labs = make([]float32, dlrmBatch*dlrmDense), make([]float32, dlrmBatch)
		for k := range d.dense {
			d.dense[k] = float32(r.NormFloat64())
		}
		for k := range d.labs {
			d.labs[k] = float32(r.IntN(2))
		}
	}
	sparse := &optim.SparseSGD{LearnRate: 0.01}
	sgd := &optim.SGD{LearnRate: 0.01}
	vgs := gorgonia.NodesToValueGrads(params)
	n := 0
	step := func() {
		d := &data[n%dlrmBatches]
		n++
		copy(valuesT.Int64s(), d.values)
		if raw {
			if err := coll.Map(context.Background(), valuesT, offsetsT, int64(n)); err != nil {
				b.Fatal(err)
			}
		}
		copy(denseT.Float32s(), d.dense)
		copy(labelT.Float32s(), d.labs)
		if err := vm.RunAll(); err != nil {
			b.Fatal(err)
		}
		if err := coll.Step(context.Background(), sparse); err != nil {
			b.Fatal(err)
		}
		if len(params) > 0 {
			if err := sgd.Step(vgs); err != nil {
				b.Fatal(err)
			}
		}
		vm.Reset()
	}
	return vm, step
}
