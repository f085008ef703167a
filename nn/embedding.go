package nn

import (
	"fmt"
	"math/rand/v2"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/dense"
)

// An Embedding is a learnable table of vocab rows of dim values, looked up
// by Gather: the Go counterpart of PyTorch's nn.Embedding.
//
//	emb, _ := nn.NewEmbedding(g, "emb", 10000, 64, tensor.Float32)
//	vecs, _ := emb.Lookup(ids)                      // ids [batch, seq] -> [batch, seq, 64]
//	...
//	gorgonia.Grad(cost, emb.Learnables()...)
type Embedding struct {
	// Table is the [vocab, dim] weight node. Its value is the table itself;
	// solvers update it in place.
	Table *gorgonia.Node

	cfg     embeddingConfig
	lookups []sparseLookup // sparse mode: one per Lookup
}

// An EmbeddingOption changes how NewEmbedding builds its table.
type EmbeddingOption func(*embeddingConfig)

type embeddingConfig struct {
	init   gorgonia.InitWFn // nil: N(0, 1) from seed
	seed   uint64
	hasPad bool
	pad    int
	frozen bool
	sparse bool
}

// EmbeddingInit sets the initialiser of the table. The default draws from
// N(0, 1), as PyTorch does, from a generator seeded by EmbeddingSeed.
func EmbeddingInit(fn gorgonia.InitWFn) EmbeddingOption {
	return func(c *embeddingConfig) { c.init = fn }
}

// EmbeddingSeed seeds the default initialiser. Without it the seed is 0, so
// a program builds the same table on every run; give each table of a
// model its own seed to make them differ.
func EmbeddingSeed(seed uint64) EmbeddingOption {
	return func(c *embeddingConfig) { c.seed = seed }
}

// normalInit returns an initialiser drawing from N(0, 1) with a PCG
// generator seeded by seed.
func normalInit(seed uint64) gorgonia.InitWFn {
	return func(dt tensor.Dtype, s ...int) any {
		r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
		n := tensor.Shape(s).TotalSize()
		if dt == tensor.Float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(r.NormFloat64())
			}
			return v
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = r.NormFloat64()
		}
		return v
	}
}

// EmbeddingPadding makes id i a padding id (PyTorch's padding_idx): its row
// starts at zero, looks up as zeros, and never receives a gradient.
// Negative i counts from the end of the vocabulary.
func EmbeddingPadding(i int) EmbeddingOption {
	return func(c *embeddingConfig) { c.hasPad, c.pad = true, i }
}

// EmbeddingFrozen makes the table constant: lookups pass it no gradient and
// Learnables is empty, as for a pretrained table being kept fixed.
func EmbeddingFrozen() EmbeddingOption {
	return func(c *embeddingConfig) { c.frozen = true }
}

// EmbeddingSparse makes the table's gradient row-sparse (PyTorch's
// sparse=True): a training step costs O(batch × dim) instead of
// O(vocab × dim). The table is then not differentiated by gorgonia.Grad;
// the graph differentiates GradNodes instead, and Step hands the rows a
// run touched to a row-sparse optimiser (SparseSGD, SparseAdam). GradNodes
// go to gorgonia.Grad only: the dense solver and BindDualValues get the
// other learnables (RowGrad fails if a solver moved them):
//
//	gorgonia.Grad(loss, append(dense, emb.GradNodes()...)...)
//	vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(dense...))
//	adam := nn.NewSparseAdam(1e-3)
//	for ... {
//		vm.RunAll()
//		emb.Step(adam)                                 // the table's touched rows
//		solver.Step(gorgonia.NodesToValueGrads(dense)) // the rest
//		vm.Reset()
//	}
func EmbeddingSparse() EmbeddingOption {
	return func(c *embeddingConfig) { c.sparse = true }
}

// NewEmbedding adds a [vocab, dim] table of dtype dt (Float32 or Float64)
// named name to g.
func NewEmbedding(g *gorgonia.ExprGraph, name string, vocab, dim int, dt tensor.Dtype, opts ...EmbeddingOption) (*Embedding, error) {
	var cfg embeddingConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.init == nil {
		cfg.init = normalInit(cfg.seed)
	}
	if vocab <= 0 || dim <= 0 {
		return nil, fmt.Errorf("embedding %q: vocabulary %d and dimension %d must be positive: %w", name, vocab, dim, gather.ErrShape)
	}
	if _, err := dense.Size("embedding", "table", tensor.Shape{vocab, dim}); err != nil {
		return nil, err
	}
	if dt != tensor.Float32 && dt != tensor.Float64 {
		return nil, fmt.Errorf("embedding %q: dtype must be float32 or float64, got %v: %w", name, dt, gather.ErrDtype)
	}
	if cfg.hasPad {
		if cfg.pad < -vocab || cfg.pad >= vocab {
			return nil, fmt.Errorf("embedding %q: padding id %d is out of range [%d, %d]: %w", name, cfg.pad, -vocab, vocab-1, gather.ErrIndexOutOfRange)
		}
		if cfg.pad < 0 {
			cfg.pad += vocab
		}
	}
	table := gorgonia.NewMatrix(g, dt, gorgonia.WithShape(vocab, dim), gorgonia.WithName(name), gorgonia.WithInit(cfg.init))
	if cfg.hasPad {
		w, ok := table.Value().(*tensor.Dense)
		if !ok {
			return nil, fmt.Errorf("embedding %q: the initialiser gave a %T: %w", name, table.Value(), gather.ErrDtype)
		}
		row, err := w.Slice(tensor.S(cfg.pad))
		if err != nil {
			return nil, fmt.Errorf("embedding %q: %w: %w", name, err, gather.ErrShape)
		}
		row.Zero()
	}
	return &Embedding{Table: table, cfg: cfg}, nil
}

// Lookup returns the rows of the table for ids, a node of Int, Int32 or
// Int64 ids of any shape; the result has shape ids.shape + [dim]. An id
// outside [-vocab, vocab-1] is an *IndexError when the graph runs.
func (e *Embedding) Lookup(ids *gorgonia.Node) (*gorgonia.Node, error) {
	opts := []gather.Option{gather.WithLayer("embedding", e.Table.Name(), "ids")}
	if e.cfg.hasPad {
		opts = append(opts, gather.WithPaddingIndex(e.cfg.pad))
	}
	if e.cfg.frozen || e.cfg.sparse {
		opts = append(opts, gather.WithoutGrad())
	}
	vecs, err := gather.Gather(e.Table, ids, 0, opts...)
	if err != nil || e.cfg.frozen || !e.cfg.sparse {
		return vecs, err
	}
	return e.tap(vecs, sparseLookup{ids: ids})
}

// Bag returns the pooled lookup of bags of ids in the table, as
// EmbeddingBag(e.Table, ids, offsets, weights, mode) with the embedding's
// own options: its padding id is skipped, a frozen table gets no
// gradient, and a sparse table a row-sparse one (RowGrad and Step cover
// its bags as they cover its lookups). An id out of range is an
// *gather.IndexError naming the table.
func (e *Embedding) Bag(ids, offsets, weights *gorgonia.Node, mode BagMode) (*gorgonia.Node, error) {
	opts := []gather.Option{gather.WithLayer(opBag, e.Table.Name(), "ids")}
	if e.cfg.hasPad {
		opts = append(opts, gather.WithPaddingIndex(e.cfg.pad))
	}
	if e.cfg.frozen || e.cfg.sparse {
		opts = append(opts, gather.WithoutGrad())
	}
	pooled, err := EmbeddingBag(e.Table, ids, offsets, weights, mode, opts...)
	if err != nil {
		return nil, fmt.Errorf("embedding %q: %w", e.Table.Name(), err)
	}
	if e.cfg.frozen || !e.cfg.sparse {
		return pooled, nil
	}
	in := gorgonia.Nodes{e.Table, ids}
	if offsets != nil {
		in = append(in, offsets)
	}
	if weights != nil {
		in = append(in, weights)
	}
	return e.tap(pooled, sparseLookup{ids: ids, bag: pooled.Op().(*bagOp), inputs: in})
}

// tap adds to out, the output of a lookup of a sparse embedding, an input
// of zeros whose gradient is out's, and records the lookup for RowGrad.
func (e *Embedding) tap(out *gorgonia.Node, l sparseLookup) (*gorgonia.Node, error) {
	g := e.Table.Graph()
	name := fmt.Sprintf("%s/tap%d", e.Table.Name(), len(e.lookups))
	zeros := tensor.New(tensor.Of(e.Table.Dtype()), tensor.WithShape(out.Shape().Clone()...))
	l.tap = gorgonia.NewTensor(g, e.Table.Dtype(), out.Dims(), gorgonia.WithShape(out.Shape().Clone()...),
		gorgonia.WithName(name), gorgonia.WithValue(zeros))
	sum, err := gorgonia.Add(out, l.tap)
	if err != nil {
		return nil, fmt.Errorf("embedding %q: %w", e.Table.Name(), dense.Graph(err))
	}
	e.lookups = append(e.lookups, l)
	return sum, nil
}

// Learnables returns the nodes a dense solver should update: the table, or
// nothing for a frozen or sparse embedding (see EmbeddingSparse).
func (e *Embedding) Learnables() gorgonia.Nodes {
	if e.cfg.frozen || e.cfg.sparse {
		return nil
	}
	return gorgonia.Nodes{e.Table}
}
