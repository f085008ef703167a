package main

import (
	"fmt"
	"math/rand/v2"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/machine"
	"github.com/gathergrad/gather/nn"
)

// batch is the number of files per training step.
const batch = 64

// model is the classifier: mean of the identifiers' embeddings, then a
// linear layer to one score per class, trained with cross entropy. The
// training graph computes gradients; a second, forward-only graph reads
// the same table and weights to predict, so that predicting adds nothing
// to the gradients the solver applies.
type model struct {
	k           int
	g, eval     *gorgonia.ExprGraph
	emb         *nn.Embedding
	w           *gorgonia.Node
	ids, labels *gorgonia.Node
	loss        *gorgonia.Node
	evalIDs     *gorgonia.Node
	evalScores  *gorgonia.Node
	vm, evalVM  gorgonia.VM
	solver      gorgonia.Solver
	learn       gorgonia.Nodes
}

func newModel(vocab, dim, k, classes int, lr float64) (*model, error) {
	m := &model{k: k, g: gorgonia.NewGraph(), eval: gorgonia.NewGraph()}
	var err error
	m.emb, err = nn.NewEmbedding(m.g, "words", vocab, dim, tensor.Float32, nn.WithPadding(0), nn.WithSeed(1),
		nn.WithInit(normal(1, 0.1)))
	if err != nil {
		return nil, err
	}
	m.w = gorgonia.NewMatrix(m.g, tensor.Float32, gorgonia.WithShape(dim, classes), gorgonia.WithName("w"),
		gorgonia.WithInit(normal(2, 0.1)))
	m.ids = gorgonia.NewMatrix(m.g, tensor.Int, gorgonia.WithShape(batch, k), gorgonia.WithName("ids"))
	m.labels = gorgonia.NewVector(m.g, tensor.Int, gorgonia.WithShape(batch), gorgonia.WithName("labels"))
	h, err := m.emb.Bag(m.ids, nil, nil, nn.BagMean) // [batch, dim]; id 0 skipped
	if err != nil {
		return nil, err
	}
	if m.loss, err = nn.CrossEntropy(gorgonia.Must(gorgonia.Mul(h, m.w)), m.labels); err != nil {
		return nil, err
	}
	m.learn = append(m.emb.Learnables(), m.w)
	if _, err := gorgonia.Grad(m.loss, m.learn...); err != nil {
		return nil, fmt.Errorf("building gradients: %w", err)
	}
	if m.vm, err = machine.New(m.g, machine.WithGrads(m.learn...)); err != nil {
		return nil, err
	}
	m.solver = gorgonia.NewAdamSolver(gorgonia.WithLearnRate(lr))

	// The prediction graph: the same values, no gradients.
	table := gorgonia.NodeFromAny(m.eval, m.emb.Table.Value(), gorgonia.WithName("words"))
	w := gorgonia.NodeFromAny(m.eval, m.w.Value(), gorgonia.WithName("w"))
	m.evalIDs = gorgonia.NewMatrix(m.eval, tensor.Int, gorgonia.WithShape(batch, k), gorgonia.WithName("ids"))
	eh, err := nn.EmbeddingBag(table, m.evalIDs, nil, nil, nn.BagMean, nn.WithPadding(0), nn.WithFrozen())
	if err != nil {
		return nil, err
	}
	m.evalScores = gorgonia.Must(gorgonia.Mul(eh, w))
	if m.evalVM, err = machine.New(m.eval); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *model) close() {
	m.vm.Close()
	m.evalVM.Close()
}

// epoch trains on the files in a shuffled order, in whole batches, and
// returns the mean training loss.
func (m *model) epoch(files []file, seed uint64) (float64, error) {
	order := rand.New(rand.NewPCG(seed, 7)).Perm(len(files))
	var sum float64
	steps := 0
	for s := 0; s+batch <= len(order); s += batch {
		ids, labels := make([]int, 0, batch*m.k), make([]int, 0, batch)
		for _, i := range order[s : s+batch] {
			ids = append(ids, files[i].ids...)
			labels = append(labels, files[i].class)
		}
		gorgonia.Let(m.ids, tensor.New(tensor.WithShape(batch, m.k), tensor.WithBacking(ids)))
		gorgonia.Let(m.labels, tensor.New(tensor.WithShape(batch), tensor.WithBacking(labels)))
		if err := m.vm.RunAll(); err != nil {
			return 0, err
		}
		sum += float64(m.loss.Value().Data().(float32))
		steps++
		if err := m.solver.Step(gorgonia.NodesToValueGrads(m.learn)); err != nil {
			return 0, err
		}
		m.vm.Reset()
	}
	return sum / float64(max(steps, 1)), nil
}

// predict returns the class with the highest score for each file.
func (m *model) predict(files []file) ([]int, error) {
	preds := make([]int, 0, len(files))
	for s := 0; s < len(files); s += batch {
		ids := make([]int, batch*m.k) // a last, partial batch is padded with empty bags
		for j, f := range files[s:min(s+batch, len(files))] {
			copy(ids[j*m.k:], f.ids)
		}
		gorgonia.Let(m.evalIDs, tensor.New(tensor.WithShape(batch, m.k), tensor.WithBacking(ids)))
		if err := m.evalVM.RunAll(); err != nil {
			return nil, err
		}
		scores := m.evalScores.Value().Data().([]float32)
		classes := len(scores) / batch
		for j := range min(batch, len(files)-s) {
			row := scores[j*classes : (j+1)*classes]
			best := 0
			for c := range row {
				if row[c] > row[best] {
					best = c
				}
			}
			preds = append(preds, best)
		}
		m.evalVM.Reset()
	}
	return preds, nil
}

// normal returns an initialiser drawing from N(0, std²) with a seeded
// generator.
func normal(seed uint64, std float64) gorgonia.InitWFn {
	return func(dt tensor.Dtype, s ...int) any {
		r := rand.New(rand.NewPCG(seed, 1))
		v := make([]float32, tensor.Shape(s).TotalSize())
		for i := range v {
			v[i] = float32(r.NormFloat64() * std)
		}
		return v
	}
}
