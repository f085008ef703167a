package main

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/machine"
	"github.com/gathergrad/gather/nn"
)

// The click model: each feature's bag pooled (mean) from its table of
// embDim, the dense features through Linear(4, 16) and ReLU, all four
// concatenated, Linear(40, 32), ReLU, Linear(32, 1), and the logistic
// loss (nn.BCEWithLogits) against the label.
const (
	embDim  = 8
	hidden1 = 16
	hidden2 = 32
)

// tableSeed is the seed of feature f's table: nn.NewEmbedding and
// cluster.Create draw the same rows from it.
func tableSeed(seed uint64, f int) uint64 { return seed + uint64(f) + 1 }

type model struct {
	g      *gorgonia.ExprGraph
	tables [3]*nn.Embedding
	coll   *nn.Collection // the three tables, looked up, pooled and stepped as one
	values *tensor.Dense  // the three features' ids, one after another
	dense  *tensor.Dense
	labels *tensor.Dense
	params []*gorgonia.Node // the dense learnables: w1, b1, w2, b2, w3, b3
	loss   gorgonia.Value
	vm     gorgonia.VM
}

// denseParams returns the dense learnables of the model in g, drawn from
// U(-1/√fan_in, 1/√fan_in) with seed (PyTorch's Linear draws its
// initial weights from that range).
func denseParams(g *gorgonia.ExprGraph, seed uint64) []*gorgonia.Node {
	r := rand.New(rand.NewPCG(seed, 99))
	layer := func(name string, in, out int) (*gorgonia.Node, *gorgonia.Node) {
		bound := 1 / math.Sqrt(float64(in))
		draw := func(n int) []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32((2*r.Float64() - 1) * bound)
			}
			return v
		}
		w := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithName(name+".weight"),
			gorgonia.WithValue(tensor.New(tensor.WithShape(out, in), tensor.WithBacking(draw(in*out)))))
		b := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithName(name+".bias"),
			gorgonia.WithValue(tensor.New(tensor.WithShape(out), tensor.WithBacking(draw(out)))))
		return w, b
	}
	w1, b1 := layer("dense", denseFeatures, hidden1)
	w2, b2 := layer("top1", 3*embDim+hidden1, hidden2)
	w3, b3 := layer("top2", hidden2, 1)
	return []*gorgonia.Node{w1, b1, w2, b2, w3, b3}
}

// newModel builds the model for batches of n examples in g on the tables
// given (in memory or cached), with dense learnables drawn from seed.
func newModel(g *gorgonia.ExprGraph, tables [3]*nn.Embedding, n int, seed uint64) (*model, error) {
	m := &model{g: g, tables: tables,
		dense:  tensor.New(tensor.WithShape(n, denseFeatures), tensor.Of(tensor.Float32)),
		labels: tensor.New(tensor.WithShape(n, 1), tensor.Of(tensor.Float32)),
		params: denseParams(g, seed)}
	// One collection of the three features: values holds their ids, one
	// feature after another; offsets, fixed, where each bag starts
	// (bagSize[f] ids an example).
	var feats []nn.Feature
	offs, total := []int64{0}, 0
	for f, e := range tables {
		feats = append(feats, nn.Feature{Key: fmt.Sprintf("feature%d", f), Table: e, Mode: nn.BagMean})
		for range n {
			total += bagSize[f]
			offs = append(offs, int64(total))
		}
	}
	var err error
	if m.coll, err = nn.NewCollection(feats, nn.CollectionOptions{}); err != nil {
		return nil, err
	}
	m.values = tensor.New(tensor.WithShape(total), tensor.Of(tensor.Int64))
	valn := gorgonia.NewVector(g, tensor.Int64, gorgonia.WithName("values"), gorgonia.WithValue(m.values))
	offn := gorgonia.NewVector(g, tensor.Int64, gorgonia.WithName("offsets"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(len(offs)), tensor.WithBacking(offs))))
	pooled, err := m.coll.Bag(valn, offn, nil) // [n, 3·embDim]
	if err != nil {
		return nil, err
	}
	x := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithName("dense"), gorgonia.WithValue(m.dense))
	y := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithName("labels"), gorgonia.WithValue(m.labels))
	p := m.params
	h, err := nn.Linear(x, p[0], p[1])
	if err != nil {
		return nil, err
	}
	if h, err = gorgonia.Rectify(h); err != nil {
		return nil, err
	}
	z, err := nn.Concat(1, pooled, h)
	if err != nil {
		return nil, err
	}
	if z, err = nn.Linear(z, p[2], p[3]); err != nil {
		return nil, err
	}
	if z, err = gorgonia.Rectify(z); err != nil {
		return nil, err
	}
	if z, err = nn.Linear(z, p[4], p[5]); err != nil {
		return nil, err
	}
	loss, err := nn.BCEWithLogits(z, y)
	if err != nil {
		return nil, err
	}
	gorgonia.Read(loss, &m.loss)
	wrt := append(append([]*gorgonia.Node(nil), p...), m.coll.GradNodes()...)
	if _, err := gorgonia.Grad(loss, wrt...); err != nil {
		return nil, err
	}
	if m.vm, err = machine.New(g, machine.WithGrads(p...)); err != nil {
		return nil, err
	}
	return m, nil
}

// run computes the loss of b and the gradients.
func (m *model) run(b *batch) (float64, error) {
	at := 0
	for f := range b.ids {
		at += copy(m.values.Int64s()[at:], b.ids[f])
	}
	copy(m.dense.Float32s(), b.dense)
	copy(m.labels.Float32s(), b.labels)
	m.vm.Reset()
	if err := m.vm.RunAll(); err != nil {
		return 0, err
	}
	return float64(m.loss.Data().(float32)), nil
}

func (m *model) close() { m.vm.Close() }

// weights are the model's learnables as plain values, to score examples
// without a graph: each table's rows (dim values each) and the dense
// learnables in the order of denseParams.
type weights struct {
	tables [3][]float32
	dense  [][]float32
}

// heldOutLoss returns the mean logistic loss of w on b.
func (w *weights) heldOutLoss(b *batch) float64 {
	w1, b1, w2, b2, w3, b3 := w.dense[0], w.dense[1], w.dense[2], w.dense[3], w.dense[4], w.dense[5]
	z := make([]float64, 3*embDim+hidden1)
	h := make([]float64, hidden2)
	total := 0.0
	for i := range b.len() {
		for f := range w.tables {
			for j := range embDim {
				s := 0.0
				for k := range bagSize[f] {
					s += float64(w.tables[f][int(b.ids[f][i*bagSize[f]+k])*embDim+j])
				}
				z[f*embDim+j] = s / float64(bagSize[f])
			}
		}
		for o := range hidden1 {
			s := float64(b1[o])
			for j := range denseFeatures {
				s += float64(b.dense[i*denseFeatures+j]) * float64(w1[o*denseFeatures+j])
			}
			z[3*embDim+o] = max(s, 0)
		}
		for o := range hidden2 {
			s := float64(b2[o])
			for j, v := range z {
				s += v * float64(w2[o*len(z)+j])
			}
			h[o] = max(s, 0)
		}
		logit := float64(b3[0])
		for j, v := range h {
			logit += v * float64(w3[j])
		}
		// log(1 + exp(-|x|)) + max(x, 0) - x·y
		total += math.Log1p(math.Exp(-math.Abs(logit))) + max(logit, 0) - logit*float64(b.labels[i])
	}
	return total / float64(b.len())
}
