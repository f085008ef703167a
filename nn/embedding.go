package nn

import (
	"fmt"

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
	init   gorgonia.InitWFn
	hasPad bool
	pad    int
	frozen bool
	sparse bool
}

// EmbeddingInit sets the initialiser of the table. The default draws from
// N(0, 1), as PyTorch does, with Gorgonia's unseeded generator.
func EmbeddingInit(fn gorgonia.InitWFn) EmbeddingOption {
	return func(c *embeddingConfig) { c.init = fn }
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
// O(vocab × dim). The table is then not differentiated by gorgonia.Grad:
// pass GradNodes to gorgonia.Grad with the model's other learnables, and
// after each run update the table with RowGrad and a row-sparse optimiser
// (SparseSGD, SparseAdam):
//
//	gorgonia.Grad(loss, append(learnables, emb.GradNodes()...)...)
//	...
//	vm.RunAll()
//	g, err := emb.RowGrad()
//	err = adam.Step(emb.Table.Value().(*tensor.Dense), g)
func EmbeddingSparse() EmbeddingOption {
	return func(c *embeddingConfig) { c.sparse = true }
}

// NewEmbedding adds a [vocab, dim] table of dtype dt (Float32 or Float64)
// named name to g.
func NewEmbedding(g *gorgonia.ExprGraph, name string, vocab, dim int, dt tensor.Dtype, opts ...EmbeddingOption) (*Embedding, error) {
	cfg := embeddingConfig{init: gorgonia.Gaussian(0, 1)}
	for _, o := range opts {
		o(&cfg)
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
			return nil, fmt.Errorf("embedding %q: %w", name, err)
		}
		row.Zero()
	}
	return &Embedding{Table: table, cfg: cfg}, nil
}

// Lookup returns the rows of the table for ids, a node of Int, Int32 or
// Int64 ids of any shape; the result has shape ids.shape + [dim]. An id
// outside [-vocab, vocab-1] is an *IndexError when the graph runs.
func (e *Embedding) Lookup(ids *gorgonia.Node) (*gorgonia.Node, error) {
	var opts []gather.Option
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
	// Sparse: add an input of zeros whose gradient is the lookup's.
	g := e.Table.Graph()
	tapName := fmt.Sprintf("%s/tap%d", e.Table.Name(), len(e.lookups))
	zeros := tensor.New(tensor.Of(e.Table.Dtype()), tensor.WithShape(vecs.Shape().Clone()...))
	tap := gorgonia.NewTensor(g, e.Table.Dtype(), vecs.Dims(), gorgonia.WithShape(vecs.Shape().Clone()...),
		gorgonia.WithName(tapName), gorgonia.WithValue(zeros))
	out, err := gorgonia.Add(vecs, tap)
	if err != nil {
		return nil, fmt.Errorf("embedding %q: %w", e.Table.Name(), err)
	}
	e.lookups = append(e.lookups, sparseLookup{ids: ids, tap: tap})
	return out, nil
}

// Learnables returns the nodes a dense solver should update: the table, or
// nothing for a frozen or sparse embedding (see EmbeddingSparse).
func (e *Embedding) Learnables() gorgonia.Nodes {
	if e.cfg.frozen || e.cfg.sparse {
		return nil
	}
	return gorgonia.Nodes{e.Table}
}
