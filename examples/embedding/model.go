package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/machine"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// model is a fixed-window neural language model (Bengio et al., 2003): the
// embeddings of the previous context tokens, concatenated, feed a tanh
// layer and a softmax over the vocabulary.
//
//	ids [batch, context] --Gather--> [batch, context, dim] -> [batch, context*dim]
//	  -> tanh(x W1 + b1) [batch, hidden] -> h W2 + b2 [batch, vocab]
//	  -> CrossEntropy(logits, targets [batch])
type model struct {
	g       *gorgonia.ExprGraph
	emb     *nn.Embedding
	ids     *tensor.Dense // [batch, context] token ids, refilled each step
	targets *tensor.Dense // [batch] next-token ids
	logits  *gorgonia.Node
	loss    *gorgonia.Node
	learn   gorgonia.Nodes // what the dense solver updates
	dense   gorgonia.Nodes // the dense layers' weights and biases
	vm      gorgonia.VM
	solver  optim.Dense
	sparse  *optim.SparseAdam // the table's optimiser with -sparse, else nil
	batch   int
	context int
}

// normal returns an initialiser drawing from N(0, std²) with rng, so that
// a run is repeatable for a seed.
func normal(rng *rand.Rand, std float64) gorgonia.InitWFn {
	return func(dt tensor.Dtype, s ...int) any {
		v := make([]float32, tensor.Shape(s).TotalSize())
		for i := range v {
			v[i] = float32(rng.NormFloat64() * std)
		}
		return v
	}
}

func zeros(dt tensor.Dtype, s ...int) any { return make([]float32, tensor.Shape(s).TotalSize()) }

func newModel(cfg config, vocab int) (*model, error) {
	rng := rand.New(rand.NewPCG(cfg.seed, 0x5eed))
	m := &model{g: gorgonia.NewGraph(), batch: cfg.batch, context: cfg.context}
	g := m.g
	var err error
	embOpts := []nn.NewEmbeddingOption{nn.WithInit(normal(rng, 0.1))}
	if cfg.sparse {
		embOpts = append(embOpts, nn.WithSparse())
		m.sparse = optim.NewSparseAdam(cfg.lr)
	}
	if cfg.table != "" {
		m.emb, err = openTable(g, cfg, vocab, m.sparse)
	} else {
		m.emb, err = nn.NewEmbedding(g, "embedding", vocab, cfg.dim, tensor.Float32, embOpts...)
	}
	if err != nil {
		return nil, err
	}
	m.ids = tensor.New(tensor.WithShape(cfg.batch, cfg.context), tensor.WithBacking(make([]int, cfg.batch*cfg.context)))
	m.targets = tensor.New(tensor.WithShape(cfg.batch), tensor.WithBacking(make([]int, cfg.batch)))
	ids := gorgonia.NewMatrix(g, tensor.Int, gorgonia.WithShape(cfg.batch, cfg.context), gorgonia.WithName("ids"), gorgonia.WithValue(m.ids))
	targets := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(cfg.batch), gorgonia.WithName("targets"), gorgonia.WithValue(m.targets))

	in := cfg.context * cfg.dim
	w1 := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(in, cfg.hidden), gorgonia.WithName("w1"),
		gorgonia.WithInit(normal(rng, 1/math.Sqrt(float64(in)))))
	b1 := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(1, cfg.hidden), gorgonia.WithName("b1"), gorgonia.WithInit(zeros))
	w2 := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(cfg.hidden, vocab), gorgonia.WithName("w2"),
		gorgonia.WithInit(normal(rng, 1/math.Sqrt(float64(cfg.hidden)))))
	b2 := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(1, vocab), gorgonia.WithName("b2"), gorgonia.WithInit(zeros))

	vecs, err := m.emb.Lookup(ids)
	if err != nil {
		return nil, err
	}
	x, err := gorgonia.Reshape(vecs, tensor.Shape{cfg.batch, in})
	if err != nil {
		return nil, err
	}
	h, err := affine(x, w1, b1)
	if err != nil {
		return nil, err
	}
	if h, err = gorgonia.Tanh(h); err != nil {
		return nil, err
	}
	if m.logits, err = affine(h, w2, b2); err != nil {
		return nil, err
	}
	if m.loss, err = nn.CrossEntropy(m.logits, targets); err != nil {
		return nil, err
	}
	// With -sparse the table is not among the dense learnables: its
	// gradient comes from GradNodes as rows, and SparseAdam applies it.
	m.learn = append(m.emb.Learnables(), w1, b1, w2, b2)
	if _, err := gorgonia.Grad(m.loss, append(m.learn, m.emb.GradNodes()...)...); err != nil {
		return nil, fmt.Errorf("building gradients: %w", err)
	}
	if m.vm, err = machine.New(g, machine.WithGrads(m.learn...)); err != nil {
		return nil, err
	}
	m.solver = optim.NewAdam(cfg.lr)
	if cfg.solver == "sgd" {
		m.solver = &optim.SGD{LearnRate: cfg.lr}
	}
	m.dense = gorgonia.Nodes{w1, b1, w2, b2}
	return m, nil
}

// openTable opens the -table file behind a cache of -cache-mb, creating
// it first if it does not exist: vocab rows of N(0, 1) (PyTorch's
// nn.Embedding draws its table so), each with SparseAdam's state.
func openTable(g *gorgonia.ExprGraph, cfg config, vocab int, opt *optim.SparseAdam) (*nn.Embedding, error) {
	cols := opt.Columns(cfg.dim)
	if _, err := os.Stat(cfg.table); errors.Is(err, os.ErrNotExist) {
		if err := table.Create(cfg.table, "embedding", vocab, cfg.dim, tensor.Float32, table.WithSeed(cfg.seed), table.WithState(cols...)); err != nil {
			return nil, err
		}
	}
	c, err := table.OpenCached(context.Background(), cfg.table, table.CacheOptions{Budget: int64(cfg.cacheMB) << 20}, table.FileOptions{})
	if err != nil {
		return nil, err
	}
	if vocab64 := c.Schema().Rows; vocab64 != int64(vocab) {
		c.Close(context.Background())
		return nil, fmt.Errorf("%s holds %d rows; this corpus's vocabulary has %d", cfg.table, vocab64, vocab)
	}
	emb, err := nn.CachedEmbedding(context.Background(), g, c)
	if err != nil {
		c.Close(context.Background())
	}
	return emb, err
}

// parts returns what a checkpoint of the model holds: the table, the dense
// layers and, with -sparse, SparseAdam's state. A -table keeps itself, its
// state included, in its own file.
func (m *model) parts() []checkpoint.Part {
	parts := []checkpoint.Part{checkpoint.Nodes(m.dense...), optim.DenseState("solver", m.solver, m.learn...)}
	w, inMemory := m.emb.Home().(nn.Weights)
	if !inMemory {
		return parts
	}
	parts = append(parts, m.emb)
	if m.sparse != nil {
		parts = append(parts, optim.State(w, m.sparse))
	}
	return parts
}

// close closes a -table, syncing it; it does nothing for a table in
// memory.
func (m *model) close() error { return m.emb.Close(context.Background()) }

// prefetch gives a table in a file the ids of the next batch, whose
// positions rng draws as the training loop will.
func (m *model) prefetch(text []int, rng *rand.Rand, n int) {
	h, cached := m.emb.Home().(nn.Cache)
	if !cached {
		return
	}
	ids := make([]int64, 0, n*m.context)
	for range n {
		p := m.context + rng.IntN(len(text)-m.context)
		for _, t := range text[p-m.context : p] {
			ids = append(ids, int64(t))
		}
	}
	h.Prefetch(ids)
}

// affine is x w + b, with b of shape [1, n] broadcast over the rows of x.
func affine(x, w, b *gorgonia.Node) (*gorgonia.Node, error) {
	xw, err := gorgonia.Mul(x, w)
	if err != nil {
		return nil, err
	}
	return gorgonia.BroadcastAdd(xw, b, nil, []byte{0})
}

// fill loads the windows ending before positions of text into the batch.
func (m *model) fill(text []int, positions []int) {
	ids, targets := m.ids.Ints(), m.targets.Ints()
	for b, p := range positions {
		copy(ids[b*m.context:(b+1)*m.context], text[p-m.context:p])
		targets[b] = text[p]
	}
}

// run computes the loss (and the gradients) of the loaded batch.
func (m *model) run() (float64, error) {
	defer m.vm.Reset()
	if err := m.vm.RunAll(); err != nil {
		return 0, err
	}
	return float64(m.loss.Value().Data().(float32)), nil
}

// step trains on the loaded batch and returns its loss before the update.
func (m *model) step() (float64, error) {
	loss, err := m.run()
	if err != nil {
		return 0, err
	}
	if m.sparse != nil {
		if err := m.emb.Step(context.Background(), m.sparse); err != nil {
			return 0, err
		}
	}
	return loss, m.solver.Step(gorgonia.NodesToValueGrads(m.learn))
}

// evaluate returns the mean loss over positions of text, in whole batches.
// The machine adds each run's gradients into the learnables' gradients,
// which the solver clears after using them; evaluation clears them itself,
// so that held-out text never reaches a training step.
func (m *model) evaluate(text []int, positions []int) (float64, error) {
	defer m.clearGrads()
	var sum float64
	n := 0
	for i := 0; i+m.batch <= len(positions); i += m.batch {
		m.fill(text, positions[i:i+m.batch])
		loss, err := m.run()
		if err != nil {
			return 0, err
		}
		sum += loss
		n++
	}
	return sum / float64(n), nil
}

// clearGrads zeroes the gradients of the learnables.
func (m *model) clearGrads() {
	for _, n := range m.learn {
		if g, err := n.Grad(); err == nil {
			g.(*tensor.Dense).Zero()
		}
	}
}

// continuation extends prompt greedily by n tokens.
func (m *model) continuation(prompt []int, n int) ([]int, error) {
	defer m.clearGrads()
	text := append([]int{}, prompt...)
	positions := make([]int, m.batch)
	for range n {
		text = append(text, 0) // the slot being predicted
		for b := range positions {
			positions[b] = len(text) - 1
		}
		m.fill(text, positions)
		if _, err := m.run(); err != nil {
			return nil, err
		}
		logits := m.logits.Value().Data().([]float32)
		vocab := len(logits) / m.batch
		best := 1 // never predict unk
		for j := 2; j < vocab; j++ {
			if logits[j] > logits[best] {
				best = j
			}
		}
		text[len(text)-1] = best
	}
	return text[len(prompt):], nil
}

// table returns the learned embedding table, row by row.
func (m *model) table() (rows [][]float32) {
	t := m.emb.Table.Value().(*tensor.Dense)
	v, dim := t.Float32s(), t.Shape()[1]
	for i := 0; i < t.Shape()[0]; i++ {
		rows = append(rows, v[i*dim:(i+1)*dim])
	}
	return rows
}

// neighbours returns the k rows most similar (by cosine) to row i.
func neighbours(rows [][]float32, i, k int) []int {
	norm := func(v []float32) float64 {
		var s float64
		for _, x := range v {
			s += float64(x) * float64(x)
		}
		return math.Sqrt(s)
	}
	type scored struct {
		j int
		c float64
	}
	var best []scored
	ni := norm(rows[i])
	for j, r := range rows {
		if j == i || j == 0 {
			continue
		}
		var dot float64
		for d := range r {
			dot += float64(r[d]) * float64(rows[i][d])
		}
		c := dot / (ni*norm(r) + 1e-12)
		best = append(best, scored{j, c})
		for x := len(best) - 1; x > 0 && best[x].c > best[x-1].c; x-- {
			best[x], best[x-1] = best[x-1], best[x]
		}
		if len(best) > k {
			best = best[:k]
		}
	}
	out := make([]int, len(best))
	for x, s := range best {
		out[x] = s.j
	}
	return out
}
