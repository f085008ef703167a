package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/feed"
	"github.com/gathergrad/gather/machine"
	"github.com/gathergrad/gather/metrics"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// A model is DLRM on Criteo's features (BenchmarkDLRM's, its MLPs
// narrower): the 13 integers through the bottom MLP 13-64-16, the 26
// categoricals pooled from tables of 16 columns (ids hashed into -rows
// rows each), DotInteraction of the 27 vectors, the top MLP 367-64-1,
// the click's BCEWithLogits weighted by the batch's example weights (0
// for padding). With raw ids, each table has an id map (table.IDMap:
// an id gets a row once seen twice, the least recently used row goes to
// a new id when the map is full) and one row more, its padding row,
// which ids without a row read as zeros.
type model struct {
	g      *gorgonia.ExprGraph
	coll   *nn.Collection
	tables []*nn.Embedding
	params gorgonia.Nodes
	batch  int

	values, offsets        *tensor.Dense
	dense, labels, weights *tensor.Dense
	logits, loss           *gorgonia.Node
	vm                     *machine.Machine
	sparse                 *optim.SparseSGD
	sgd                    *optim.SGD
	maps                   []*table.IDMap // with raw ids, the tables'
	steps                  int64          // trained, the maps' clock
}

const (
	embDim = 16
	nDense = 13
	nCat   = 26
)

// newModel returns the model for batches of batch examples, its tables
// of rows rows (and an id map each with raw), stepped by SGD at lr.
func newModel(batch, rows int, lr float64, seed uint64, raw bool) (*model, error) {
	r := rand.New(rand.NewPCG(seed, 7))
	m := &model{g: gorgonia.NewGraph(), batch: batch}
	var feats []nn.Feature
	for k := range nCat {
		name := fmt.Sprintf("C%d", k+1)
		opts := []nn.NewEmbeddingOption{nn.WithSparse(), nn.WithSeed(seed + uint64(k))}
		vocab := rows
		var ids *table.IDMap
		if raw {
			var err error
			if ids, err = table.NewIDMap(name, driver.IDMapOptions{Rows: rows, AdmitAfter: 2}); err != nil {
				return nil, err
			}
			m.maps = append(m.maps, ids)
			vocab, opts = rows+1, append(opts, nn.WithPadding(rows))
		}
		e, err := nn.NewEmbedding(m.g, name, vocab, embDim, tensor.Float32, append(opts,
			nn.WithInit(func(dt tensor.Dtype, s ...int) any {
				w := make([]float32, tensor.Shape(s).TotalSize())
				for i := range w {
					w[i] = float32(0.01 * r.NormFloat64())
				}
				if raw {
					clear(w[rows*embDim:]) // the padding row
				}
				return w
			}))...)
		if err != nil {
			return nil, err
		}
		m.tables = append(m.tables, e)
		f := nn.Feature{Key: e.Name(), Table: e, Mode: nn.BagSum}
		if ids != nil {
			f.IDs = ids
		}
		feats = append(feats, f)
	}
	var err error
	if m.coll, err = nn.NewCollection(feats, nn.CollectionOptions{Fused: true, Init: driver.RowInit{Seed: seed, Std: 0.01}}); err != nil {
		return nil, err
	}
	m.values = tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(nCat*batch))
	m.offsets = tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(nCat*batch+1))
	values := gorgonia.NodeFromAny(m.g, m.values, gorgonia.WithName("values"))
	offsets := gorgonia.NodeFromAny(m.g, m.offsets, gorgonia.WithName("offsets"))
	pooled, err := m.coll.Bag(values, offsets, nil)
	if err != nil {
		return nil, err
	}
	m.dense = tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(batch, nDense))
	m.labels = tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(batch, 1))
	m.weights = tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(batch, 1))
	x := gorgonia.NodeFromAny(m.g, m.dense, gorgonia.WithName("dense"))
	y := gorgonia.NodeFromAny(m.g, m.labels, gorgonia.WithName("labels"))
	w := gorgonia.NodeFromAny(m.g, m.weights, gorgonia.WithName("weights"))
	z := m.mlp(r, "bottom", x, []int{nDense, 64, embDim}, true)
	inter, err := nn.DotInteraction(z, pooled)
	if err != nil {
		return nil, err
	}
	m.logits = m.mlp(r, "top", inter, []int{embDim + (nCat+1)*nCat/2, 64, 1}, false)
	per, err := nn.BCEWithLogits(m.logits, y, nn.WithReduction(nn.ReduceNone))
	if err != nil {
		return nil, err
	}
	if m.loss, err = nn.Mean(gorgonia.Must(gorgonia.HadamardProd(per, w)), false); err != nil {
		return nil, err
	}
	if _, err := nn.Grad(m.loss, append(append(gorgonia.Nodes{}, m.params...), m.coll.GradNodes()...)...); err != nil {
		return nil, err
	}
	if m.vm, err = machine.New(m.g); err != nil {
		return nil, err
	}
	m.sparse, m.sgd = &optim.SparseSGD{LearnRate: lr}, &optim.SGD{LearnRate: lr}
	return m, nil
}

// mlp adds Linear layers of sizes to x (ReLU between them, and after the
// last with lastReLU).
func (m *model) mlp(r *rand.Rand, name string, x *gorgonia.Node, sizes []int, lastReLU bool) *gorgonia.Node {
	for k := 0; k+1 < len(sizes); k++ {
		in, out := sizes[k], sizes[k+1]
		bound := 1 / math.Sqrt(float64(in))
		uniform := func(n int) []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32((2*r.Float64() - 1) * bound)
			}
			return v
		}
		w := gorgonia.NewMatrix(m.g, tensor.Float32, gorgonia.WithName(fmt.Sprintf("%s%d.weight", name, k)),
			gorgonia.WithValue(tensor.New(tensor.WithShape(out, in), tensor.WithBacking(uniform(in*out)))))
		b := gorgonia.NewVector(m.g, tensor.Float32, gorgonia.WithName(fmt.Sprintf("%s%d.bias", name, k)),
			gorgonia.WithValue(tensor.New(tensor.WithShape(out), tensor.WithBacking(uniform(out)))))
		m.params = append(m.params, w, b)
		x = gorgonia.Must(nn.Linear(x, w, b))
		if lastReLU || k+2 < len(sizes) {
			x = gorgonia.Must(gorgonia.Rectify(x))
		}
	}
	return x
}

// set gives the graph batch b, its raw ids mapped to rows: for
// training (train) as the maps admit them, else read-only, an id
// without a row reading the padding row.
func (m *model) set(ctx context.Context, b *feed.Batch, train bool) error {
	if err := m.coll.Pack(b.Sparse, m.values, m.offsets, nil); err != nil {
		return err
	}
	if m.maps != nil {
		if train {
			if err := m.coll.Map(ctx, m.values, m.offsets, m.steps); err != nil {
				return err
			}
		} else {
			v, o := m.values.Int64s(), m.offsets.Int64s()
			for k, ids := range m.maps {
				for i := o[k*m.batch]; i < o[(k+1)*m.batch]; i++ {
					row, ok := ids.Row(v[i])
					if !ok {
						row = int64(ids.Rows()) // the padding row
					}
					v[i] = row
				}
			}
		}
	}
	copy(m.dense.Float32s(), b.Dense)
	copy(m.labels.Float32s(), b.Labels)
	copy(m.weights.Float32s(), b.Weights)
	return nil
}

// step trains on batch b and returns its loss.
func (m *model) step(ctx context.Context, b *feed.Batch) (float64, error) {
	if err := m.set(ctx, b, true); err != nil {
		return 0, err
	}
	m.steps++
	if err := m.vm.RunAll(); err != nil {
		return 0, err
	}
	defer m.vm.Reset()
	if err := m.coll.Step(ctx, m.sparse); err != nil {
		return 0, err
	}
	if err := m.sgd.Step(gorgonia.NodesToValueGrads(m.params)); err != nil {
		return 0, err
	}
	return float64(m.loss.Value().Data().(float32)) * float64(m.batch) / float64(b.Real), nil
}

// evaluate returns the AUC and log loss of the examples r reads.
func (m *model) evaluate(ctx context.Context, r *feed.Reader) (metrics.Report, error) {
	mb, err := metrics.NewBinary(metrics.Options{Window: 1 << 20})
	if err != nil {
		return metrics.Report{}, err
	}
	probs := make([]float32, m.batch)
	for {
		b, err := r.Next(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return mb.Window(), nil
			}
			return metrics.Report{}, err
		}
		if err := m.set(ctx, b, false); err != nil {
			return metrics.Report{}, err
		}
		if err := m.vm.RunAll(); err != nil {
			return metrics.Report{}, err
		}
		for i, z := range m.logits.Value().Data().([]float32)[:b.Real] {
			probs[i] = float32(1 / (1 + math.Exp(-float64(z))))
		}
		m.vm.Reset()
		if err := mb.Update(probs[:b.Real], b.Labels[:b.Real]); err != nil {
			return metrics.Report{}, err
		}
	}
}

// parts are what a checkpoint of the model holds, with the reader's
// position.
func (m *model) parts(r *feed.Reader) []checkpoint.Part {
	ps := []checkpoint.Part{checkpoint.Nodes(m.params...), r}
	for _, e := range m.tables {
		ps = append(ps, e)
	}
	for _, ids := range m.maps {
		ps = append(ps, ids)
	}
	return ps
}

func (m *model) close() { m.vm.Close() }
