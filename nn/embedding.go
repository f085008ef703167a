package nn

import (
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
	"github.com/gathergrad/gather/internal/rowgrad"
	"github.com/gathergrad/gather/table"
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

	cfg     config
	lookups []sparseLookup // sparse mode: one per Lookup
	grad    rowgrad.Buffer // sparse mode: Step's row gradient, reused
	// rowGrads counts the row gradients built, which decides when the
	// taps are checked (see tapCheckDue).
	rowGrads int

	home    home        // where the rows live
	coll    *Collection // the collection that looks the table up, if any
	changed *changes    // the rows changed since the last Delta (TrackChanges)
	closed  bool        // Close was called
}

// NewEmbedding adds a [vocab, dim] table of dtype dt (Float32 or Float64)
// named name to g. The name must be new to g: a name that a node of g
// already has is an error wrapping gather.ErrGraph, never a shared table.
// A nil graph is an ErrGraph error too; an initialiser that returns values
// of the wrong type or number is an ErrDtype or ErrShape error.
func NewEmbedding(g *gorgonia.ExprGraph, name string, vocab, dim int, dt tensor.Dtype, opts ...NewEmbeddingOption) (*Embedding, error) {
	prefix := fmt.Sprintf("embedding %q", name)
	cfg, err := newConfig(prefix, forNewEmbedding, opts)
	if err != nil {
		return nil, err
	}
	if cfg.init == nil {
		cfg.init = normalInit(cfg.seed)
	}
	if err := checkNewNode(prefix, g, name); err != nil {
		return nil, err
	}
	if vocab <= 0 || dim <= 0 {
		return nil, fmt.Errorf("%s: vocabulary %d and dimension %d must be positive: %w", prefix, vocab, dim, gather.ErrShape)
	}
	n, err := operand.Size("embedding", "table", tensor.Shape{vocab, dim})
	if err != nil {
		return nil, err
	}
	if err := operand.CheckFloat(prefix, "dtype", dt); err != nil {
		return nil, err
	}
	if cfg.hasPad {
		if cfg.pad, err = operand.NormIndex(prefix, cfg.pad, vocab); err != nil {
			return nil, err
		}
	}
	var w *tensor.Dense
	if cfg.weights != nil {
		w, err = copyWeights(prefix, cfg.weights, dt, vocab, dim)
	} else {
		w, err = initTable(prefix, cfg.init, dt, vocab, dim, n)
	}
	if err != nil {
		return nil, err
	}
	if cfg.hasPad && cfg.weights == nil {
		row, err := w.Slice(tensor.S(cfg.pad))
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", prefix, err, gather.ErrShape)
		}
		row.Zero()
	}
	table := gorgonia.NewMatrix(g, dt, gorgonia.WithShape(vocab, dim), gorgonia.WithName(name), gorgonia.WithValue(w))
	h := &heap{w: w}
	h.e = &Embedding{Table: table, cfg: cfg, home: h}
	return h.e, nil
}

// checkNewNode reports an error unless g is a graph with no node named name.
func checkNewNode(prefix string, g *gorgonia.ExprGraph, name string) error {
	if g == nil {
		return fmt.Errorf("%s: the graph is nil; make one with gorgonia.NewGraph: %w", prefix, gather.ErrGraph)
	}
	if name == "" {
		return fmt.Errorf("%s: the table needs a name (checkpoints and errors use it): %w", prefix, gather.ErrGraph)
	}
	if len(g.ByName(name)) > 0 {
		return fmt.Errorf("%s: the graph already has a node named %q; give each table its own name: %w", prefix, name, gather.ErrGraph)
	}
	return nil
}

// initTable calls init for a [vocab, dim] table of n values of dtype dt and
// checks what it returns.
func initTable(prefix string, init gorgonia.InitWFn, dt tensor.Dtype, vocab, dim, n int) (*tensor.Dense, error) {
	v := init(dt, vocab, dim)
	var got int
	switch x := v.(type) {
	case []float32:
		if dt != tensor.Float32 {
			return nil, fmt.Errorf("%s: the initialiser returned []float32 for a %v table: %w", prefix, dt, gather.ErrDtype)
		}
		got = len(x)
	case []float64:
		if dt != tensor.Float64 {
			return nil, fmt.Errorf("%s: the initialiser returned []float64 for a %v table: %w", prefix, dt, gather.ErrDtype)
		}
		got = len(x)
	default:
		return nil, fmt.Errorf("%s: the initialiser returned a %T; it must return a []%v: %w", prefix, v, dt, gather.ErrDtype)
	}
	if got != n {
		return nil, fmt.Errorf("%s: the initialiser returned %d values for a (%d, %d) table of %d: %w", prefix, got, vocab, dim, n, gather.ErrShape)
	}
	return tensor.New(tensor.WithShape(vocab, dim), tensor.WithBacking(v)), nil
}

// copyWeights returns a copy of t, checked to be a [vocab, dim] tensor of
// dtype dt.
func copyWeights(prefix string, t tensor.Tensor, dt tensor.Dtype, vocab, dim int) (*tensor.Dense, error) {
	d, err := operand.Read("embedding", "weights", t)
	if err != nil {
		return nil, err
	}
	if d.Dtype() != dt {
		return nil, fmt.Errorf("%s: the weights are %v, the table %v: %w", prefix, d.Dtype(), dt, gather.ErrDtype)
	}
	if !operand.SameShape(d.Shape(), []int{vocab, dim}) {
		return nil, fmt.Errorf("%s: the weights have shape %v, the table (%d, %d): %w", prefix, d.Shape(), vocab, dim, gather.ErrShape)
	}
	return d.Clone().(*tensor.Dense), nil
}

// normalInit returns an initialiser drawing from N(0, 1), as
// kernel.Normal draws with seed (so that table.Create draws the same
// values for the same seed).
func normalInit(seed uint64) gorgonia.InitWFn {
	return func(dt tensor.Dtype, s ...int) any {
		n := tensor.Shape(s).TotalSize()
		dim := 1
		if len(s) > 1 {
			dim = n / max(s[0], 1)
		}
		// Normal writes every value, so the memory is not cleared first
		// (kernel.Uninit): for a large table that saves a pass on one
		// thread as long as the parallel draw itself.
		// It is written for the first time here, so 2 MB pages make the
		// first touch one page fault per 2 MB instead of per 4 KB.
		if dt == tensor.Float32 {
			v := kernel.Uninit[float32](n)
			fileio.PreferHugePagesFor(v)
			kernel.Normal(v, seed, dim, 0)
			return v
		}
		v := kernel.Uninit[float64](n)
		fileio.PreferHugePagesFor(v)
		kernel.Normal(v, seed, dim, 0)
		return v
	}
}

// Lookup returns the rows of the table for ids, a node of Int, Int32 or
// Int64 ids of any shape; the result has shape ids.shape + [dim]. As for
// PyTorch's nn.Embedding, every id must lie in [0, vocab): any other,
// negative ones included, is an *gather.IndexError naming the table when
// the graph runs.
func (e *Embedding) Lookup(ids *gorgonia.Node) (_ *gorgonia.Node, err error) {
	if e.closed {
		return nil, fmt.Errorf("embedding %q: %w", e.Table.Name(), table.ErrClosed)
	}
	if ids == nil {
		return nil, fmt.Errorf("embedding %q: ids must be a node: %w", e.Table.Name(), gather.ErrShape)
	}
	if e.coll != nil {
		return nil, fmt.Errorf("embedding %q: the table is in a collection, which looks it up: %w", e.Table.Name(), gather.ErrOption)
	}
	idx, err := e.home.index(ids, "embedding") // for a cache, the slots
	if err != nil {
		return nil, err
	}
	table, err := e.renormed(idx, "embedding")
	if err != nil {
		return nil, err
	}
	vecs, err := gather.Gather(table, idx, 0, e.options("embedding")...)
	if err != nil || e.cfg.frozen || !e.cfg.sparse {
		return vecs, err
	}
	return e.tap(vecs, &capture{ids: ids, freq: e.cfg.freq})
}

// Bag returns the pooled lookup of bags of ids in the table, as
// EmbeddingBag(e.Table, ids, offsets, weights, mode) with the embedding's
// own options: its padding id is skipped, a frozen table gets no
// gradient, and a sparse table a row-sparse one (RowGrad and Step cover
// its bags as they cover its lookups). It accepts WithIncludeLastOffset. An id
// outside [0, vocab) is an *gather.IndexError naming the table.
func (e *Embedding) Bag(ids, offsets, weights *gorgonia.Node, mode BagMode, opts ...BagOption) (*gorgonia.Node, error) {
	prefix := fmt.Sprintf("embedding %q", e.Table.Name())
	bc, err := newConfig(prefix, forBagMethod, opts)
	if err != nil {
		return nil, err
	}
	if e.closed {
		return nil, fmt.Errorf("%s: %w", prefix, table.ErrClosed)
	}
	if mode == BagMax && e.cfg.freq {
		return nil, fmt.Errorf("%s: gradient scaling by frequency applies to sum and mean bags, not max: %w", prefix, gather.ErrOption)
	}
	if ids == nil {
		return nil, fmt.Errorf("%s: ids must be a node: %w", prefix, gather.ErrShape)
	}
	if e.coll != nil {
		return nil, fmt.Errorf("%s: the table is in a collection, which looks it up: %w", prefix, gather.ErrOption)
	}
	idx, err := e.home.index(ids, opBag) // for a cache, the slots
	if err != nil {
		return nil, err
	}
	table, err := e.renormed(idx, opBag)
	if err != nil {
		return nil, err
	}
	pooled, err := embeddingBag(table, idx, offsets, weights, mode, e.opConfig(opBag), bc.includeLast)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", prefix, err)
	}
	if e.cfg.frozen || !e.cfg.sparse {
		return pooled, nil
	}
	in := bagOpInputs(table, idx, offsets, weights)
	return e.tap(pooled, &capture{ids: ids, bag: pooled.Op().(*bagOp), inputs: in, freq: e.cfg.freq})
}

// opConfig returns the configuration of the op of a lookup (op
// "embedding") or a bag (op "embedding_bag") of the table.
func (e *Embedding) opConfig(op string) operand.Config {
	c := operand.Config{GradScale: 1, Layer: operand.Label{Op: op, Name: e.Table.Name(), Arg: "ids", NonNegative: true}}
	if e.cfg.hasPad {
		c.HasPad, c.Pad = true, e.home.padRow(e.cfg.pad)
	}
	if e.cfg.frozen || e.cfg.sparse {
		c.NoGrad = true
	} else if e.cfg.freq {
		c.ScaleByFreq = true
	}
	return c
}

// options returns opConfig(op) as the options of package gather's ops.
func (e *Embedding) options(op string) []gather.GatherOption {
	c := e.opConfig(op)
	return []gather.GatherOption{operand.Func(func(d *operand.Config) { *d = c })}
}

// renormed returns the table as a lookup of ids should read it: as its
// home reads it (for a file table, after a willNeedOp over those ids);
// with WithMaxNorm, the output of a renormOp over them.
func (e *Embedding) renormed(ids *gorgonia.Node, op string) (*gorgonia.Node, error) {
	table, err := e.home.read(ids)
	if err != nil || e.cfg.maxNorm == 0 {
		return table, err
	}
	if ids == nil {
		return nil, fmt.Errorf("embedding %q: ids must be a node: %w", e.Table.Name(), gather.ErrShape)
	}
	if err := operand.CheckIndexDtype("embedding", "ids", ids.Dtype()); err != nil {
		return nil, err
	}
	vocab, dim := e.Table.Shape()[0], e.Table.Shape()[1]
	o := &renormOp{maxNorm: e.cfg.maxNorm, dtype: e.Table.Dtype(), idType: ids.Dtype(), vocab: vocab, dim: dim,
		idDims: ids.Dims(), lbl: operand.Label{Op: op, Name: e.Table.Name(), Arg: "ids"}}
	o.passGrad = passGrad{what: fmt.Sprintf("embedding %q: max-norm", o.lbl.Name), Op: opkit.New(opkit.Sig{
		Name: fmt.Sprintf("MaxNorm{%v, %q}", o.maxNorm, o.lbl.Name), PassThrough: true, Diff: []bool{true, false},
		In: []hm.Type{operand.Type(2, o.dtype), operand.Type(o.idDims, o.idType)}, Dtype: o.dtype, Shape: tensor.Shape{vocab, dim}})}
	return opkit.Apply(fmt.Sprintf("embedding %q", e.Table.Name()), o, table, ids)
}

// tap routes the gradient of out, the output of a lookup of a sparse
// embedding, to a new input of zeros (see tapOp), whose gradient captures
// the run's ids and row gradient in c, and records the lookup for
// RowGrad.
func (e *Embedding) tap(out *gorgonia.Node, c *capture) (*gorgonia.Node, error) {
	g := e.Table.Graph()
	name := fmt.Sprintf("%s/tap%d", e.Table.Name(), len(e.lookups))
	zeros := tensor.New(tensor.Of(e.Table.Dtype()), tensor.WithShape(out.Shape().Clone()...))
	l := sparseLookup{cap: c}
	l.tap = gorgonia.NewTensor(g, e.Table.Dtype(), out.Dims(), gorgonia.WithShape(out.Shape().Clone()...),
		gorgonia.WithName(name), gorgonia.WithValue(zeros))
	c.table, c.vocab = fmt.Sprintf("embedding %q", e.Table.Name()), e.home.Vocab()
	if c.bag != nil {
		c.shape = append(c.bag.idShape.Clone(), c.bag.dim)
	}
	tap := &tapOp{dtype: e.Table.Dtype(), shape: out.Shape().Clone(), cap: c}
	t := operand.Type(out.Dims(), tap.dtype)
	tap.passGrad = passGrad{what: c.table, Op: opkit.New(opkit.Sig{Name: "Tap", PassThrough: true, Diff: []bool{true, true},
		In: []hm.Type{t, t}, Dtype: tap.dtype, Shape: tap.shape}, fmt.Sprintf("%p", c))}
	passed, err := gorgonia.ApplyOp(tap, out, l.tap)
	if err != nil {
		return nil, fmt.Errorf("embedding %q: %w", e.Table.Name(), errs.Graph(err))
	}
	e.lookups = append(e.lookups, l)
	return passed, nil
}

// Learnables returns the nodes a dense solver should update: the table, or
// nothing for a frozen or sparse embedding (see WithSparse). A sparse
// table's gradient comes through GradNodes instead (Grad's errors say
// so).
func (e *Embedding) Learnables() gorgonia.Nodes {
	if e.cfg.frozen || e.cfg.sparse {
		return nil
	}
	return gorgonia.Nodes{e.Table}
}

// State returns the table under "<name>.weight", the key PyTorch's
// nn.Embedding uses in a state dict: with it an *Embedding is a
// checkpoint.Part, saved by checkpoint.Save and restored by
// checkpoint.Load. The tensor is the table itself, not a copy.
func (e *Embedding) State() (map[string]tensor.Tensor, error) {
	t, err := e.weights()
	if err != nil {
		return nil, err
	}
	return map[string]tensor.Tensor{e.Table.Name() + ".weight": t}, nil
}

// SetState copies the table checkpoint.Load read into the embedding's
// table, in place, so that graphs and machines built on it see the new
// values.
func (e *Embedding) SetState(tensors map[string]*tensor.Dense) error {
	t, err := e.weights()
	if err != nil {
		return err
	}
	key := e.Table.Name() + ".weight"
	if err := checkpoint.CopyInto(t, tensors[key]); err != nil {
		return fmt.Errorf("embedding %q: %w", e.Table.Name(), err)
	}
	return nil
}

// Name returns the table's name, which its checkpoint keys and its
// optimiser state's keys begin with.
func (e *Embedding) Name() string { return e.Table.Name() }

// Home returns where the embedding's rows live: the heap, a mapped file
// or a cache, each with the abilities its interfaces say (Weights,
// Syncer, Cache).
func (e *Embedding) Home() Home { return e.home }

// weights returns the table in memory, or an error naming the home that
// keeps it elsewhere.
func (e *Embedding) weights() (*tensor.Dense, error) {
	w, ok := e.home.(Weights)
	if !ok {
		return nil, fmt.Errorf("embedding %q: its rows live in a cache in front of their store, not in one tensor; "+
			"read them with table.Cached.Read, keep them with its Sync: %w", e.Table.Name(), gather.ErrOption)
	}
	return w.Weight()
}
