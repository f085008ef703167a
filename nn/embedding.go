package nn

import (
	"fmt"
	"math"
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
	buf     rowBuf         // sparse mode: Step's row gradient, reused
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

	maxNorm float64 // 0 for none
	freq    bool    // scale gradients by id frequency
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

// EmbeddingMaxNorm makes every lookup and bag first rescale, in place,
// each row its ids name whose L2 norm exceeds maxNorm, by
// maxNorm/(norm+1e-7) (PyTorch's max_norm); the gradient is that of a
// lookup of the rescaled table. This is the one case in which running the
// graph changes the table. Several lookups of one table in one graph each
// read rescaled rows, whatever order they run in.
func EmbeddingMaxNorm(maxNorm float64) EmbeddingOption {
	return func(c *embeddingConfig) { c.maxNorm = maxNorm }
}

// EmbeddingScaleGradByFreq divides each row's gradient by the number of
// times its id occurs in the ids of that lookup or bag (PyTorch's
// scale_grad_by_freq), for lookups and for sum and mean bags; the padding
// row still gets none. It applies to dense and row-sparse gradients.
func EmbeddingScaleGradByFreq() EmbeddingOption {
	return func(c *embeddingConfig) { c.freq = true }
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
	if cfg.maxNorm < 0 || math.IsNaN(cfg.maxNorm) {
		return nil, fmt.Errorf("embedding %q: max norm %v must be positive: %w", name, cfg.maxNorm, gather.ErrOption)
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
	table, err := e.renormed(ids, "embedding")
	if err != nil {
		return nil, err
	}
	vecs, err := gather.Gather(table, ids, 0, e.options("embedding")...)
	if err != nil || e.cfg.frozen || !e.cfg.sparse {
		return vecs, err
	}
	return e.tap(vecs, sparseLookup{ids: ids, freq: e.cfg.freq})
}

// Bag returns the pooled lookup of bags of ids in the table, as
// EmbeddingBag(e.Table, ids, offsets, weights, mode) with the embedding's
// own options: its padding id is skipped, a frozen table gets no
// gradient, and a sparse table a row-sparse one (RowGrad and Step cover
// its bags as they cover its lookups). An id out of range is an
// *gather.IndexError naming the table.
func (e *Embedding) Bag(ids, offsets, weights *gorgonia.Node, mode BagMode) (*gorgonia.Node, error) {
	if mode == BagMax && e.cfg.freq {
		return nil, fmt.Errorf("embedding %q: gradient scaling by frequency applies to sum and mean bags, not max: %w", e.Table.Name(), gather.ErrOption)
	}
	table, err := e.renormed(ids, opBag)
	if err != nil {
		return nil, err
	}
	pooled, err := EmbeddingBag(table, ids, offsets, weights, mode, e.options(opBag)...)
	if err != nil {
		return nil, fmt.Errorf("embedding %q: %w", e.Table.Name(), err)
	}
	if e.cfg.frozen || !e.cfg.sparse {
		return pooled, nil
	}
	in := gorgonia.Nodes{table, ids}
	if offsets != nil {
		in = append(in, offsets)
	}
	if weights != nil {
		in = append(in, weights)
	}
	return e.tap(pooled, sparseLookup{ids: ids, bag: pooled.Op().(*bagOp), inputs: in, freq: e.cfg.freq})
}

// options returns the options of the op of a lookup (op "embedding") or a
// bag (op "embedding_bag") of the table.
func (e *Embedding) options(op string) []gather.Option {
	opts := []gather.Option{gather.WithLayer(op, e.Table.Name(), "ids")}
	if e.cfg.hasPad {
		opts = append(opts, gather.WithPaddingIndex(e.cfg.pad))
	}
	if e.cfg.frozen || e.cfg.sparse {
		opts = append(opts, gather.WithoutGrad())
	} else if e.cfg.freq {
		opts = append(opts, gather.WithScaleGradByFreq())
	}
	return opts
}

// renormed returns the table as a lookup of ids should read it: with
// EmbeddingMaxNorm, the output of a renormOp over those ids, else the
// table itself.
func (e *Embedding) renormed(ids *gorgonia.Node, op string) (*gorgonia.Node, error) {
	if e.cfg.maxNorm == 0 {
		return e.Table, nil
	}
	if ids == nil {
		return nil, fmt.Errorf("embedding %q: ids must be a node: %w", e.Table.Name(), gather.ErrShape)
	}
	if err := dense.CheckIndexDtype("embedding", "ids", ids.Dtype()); err != nil {
		return nil, err
	}
	vocab, dim := e.Table.Shape()[0], e.Table.Shape()[1]
	o := &renormOp{maxNorm: e.cfg.maxNorm, dtype: e.Table.Dtype(), idType: ids.Dtype(), vocab: vocab, dim: dim,
		idDims: ids.Dims(), lbl: dense.Label{Op: op, Name: e.Table.Name(), Arg: "ids"}}
	t, err := gorgonia.ApplyOp(o, e.Table, ids)
	if err != nil {
		return nil, fmt.Errorf("embedding %q: %w", e.Table.Name(), dense.Graph(err))
	}
	return t, nil
}

// tap routes the gradient of out, the output of a lookup of a sparse
// embedding, to a new input of zeros (see tapOp), and records the lookup
// for RowGrad.
func (e *Embedding) tap(out *gorgonia.Node, l sparseLookup) (*gorgonia.Node, error) {
	g := e.Table.Graph()
	name := fmt.Sprintf("%s/tap%d", e.Table.Name(), len(e.lookups))
	zeros := tensor.New(tensor.Of(e.Table.Dtype()), tensor.WithShape(out.Shape().Clone()...))
	l.tap = gorgonia.NewTensor(g, e.Table.Dtype(), out.Dims(), gorgonia.WithShape(out.Shape().Clone()...),
		gorgonia.WithName(name), gorgonia.WithValue(zeros))
	passed, err := gorgonia.ApplyOp(&tapOp{dtype: e.Table.Dtype(), shape: out.Shape().Clone()}, out, l.tap)
	if err != nil {
		return nil, fmt.Errorf("embedding %q: %w", e.Table.Name(), dense.Graph(err))
	}
	e.lookups = append(e.lookups, l)
	return passed, nil
}

// Learnables returns the nodes a dense solver should update: the table, or
// nothing for a frozen or sparse embedding (see EmbeddingSparse).
func (e *Embedding) Learnables() gorgonia.Nodes {
	if e.cfg.frozen || e.cfg.sparse {
		return nil
	}
	return gorgonia.Nodes{e.Table}
}
