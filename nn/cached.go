package nn

import (
	"context"
	"fmt"
	"slices"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
	"github.com/gathergrad/gather/table"
)

// CachedEmbedding returns a row-sparse embedding of g, named as c, whose
// rows live in c's store and are looked up in c's cache: a table larger
// than memory (table.OpenCached), or on another machine, trained at the
// speed of its hot rows. Lookups, bags, Step and the optimisers work on
// it as on a table in memory, to the same bits.
//
// Each run of the graph brings the rows its lookups name into the cache
// (table.Cached.Fetch, all of them together, where they stay until Step);
// Step updates them and their optimiser state in the cache, marking them
// for write-back; Sync writes them to the store. Its Home is a Cache: its
// Prefetch, given the next batch's ids before a run, reads that batch's
// misses while the run and its Step compute.
//
// A Shared table (table.CacheOptions.Shared) is trained by several
// workers at once on a Redis Cluster: Step (table.Cached.Step) sends the
// gradient to the servers, which apply the optimiser to their rows, and
// applies it to the cached rows too,
// which are read again once SharedOptions.MaxAge batches old; Sync has
// nothing to write.
//
// The optimiser given to Step must keep the columns c holds (those c was created with, such as table.WithState(opt.Columns(dim)...)).
// Options: WithPadding (the padding row is kept in the cache for good),
// WithMaxNorm, WithScaleGradByFreq and WithFrozen; WithSparse is implied.
// The ids of one run, over all lookups and bags of the table, must fit
// the cache: more ids than it holds rows is an error wrapping
// table.ErrCapacity when the lookup is built, naming both. ctx bounds
// the read of the padding row.
func CachedEmbedding(ctx context.Context, g *gorgonia.ExprGraph, c *table.Cached, opts ...OpenOption) (*Embedding, error) {
	if c == nil {
		return nil, fmt.Errorf("embedding: CachedEmbedding needs a table (table.OpenCached or table.NewCached): %w", gather.ErrOption)
	}
	sc := c.Schema()
	name := sc.Name
	prefix := fmt.Sprintf("embedding %q", name)
	cfg, err := newConfig(prefix, forOpen, opts)
	if err != nil {
		return nil, err
	}
	if err := checkNewNode(prefix, g, name); err != nil {
		return nil, err
	}
	vocab, dim := sc.Rows, sc.Dim
	h := &cached{c: c}
	e := &Embedding{cfg: cfg, home: h}
	h.e = e
	if cfg.hasPad {
		if e.cfg.pad, err = operand.NormIndex(prefix, cfg.pad, int(vocab)); err != nil {
			return nil, err
		}
		s, err := c.Pin(ctx, int64(e.cfg.pad))
		if err != nil {
			return nil, fmt.Errorf("%s: keeping the padding row in the cache: %w", prefix, err)
		}
		h.padSlot = int(s)
	}
	if !cfg.frozen {
		e.cfg.sparse = true
	}
	w := c.Weight()
	e.Table = gorgonia.NewMatrix(g, w.Dtype(), gorgonia.WithShape(w.Shape()[0], dim), gorgonia.WithName(name), gorgonia.WithValue(w))
	return e, nil
}

// slotIDs returns the node of the cache slots of ids, a lookup's ids in
// the cache h (see fetchOp), after checking that the run's ids fit the
// cache.
func (e *Embedding) slotIDs(h *cached, ids *gorgonia.Node, op string) (*gorgonia.Node, error) {
	prefix := fmt.Sprintf("embedding %q", e.Table.Name())
	if err := operand.CheckIndexDtype(op, "ids", ids.Dtype()); err != nil {
		return nil, err
	}
	n := ids.Shape().TotalSize()
	for _, f := range h.fetches {
		n += f.shape.TotalSize()
	}
	if slots := h.c.Weight().Shape()[0]; min(int64(n), h.c.Schema().Rows) > int64(slots) {
		return nil, fmt.Errorf("%s: a run names up to %d ids over its lookups; the cache holds %d rows: give it a larger budget: %w",
			prefix, n, slots, table.ErrCapacity)
	}
	o := &fetchOp{e: e, h: h, shape: ids.Shape().Clone(), idType: ids.Dtype(),
		lbl: operand.Label{Op: op, Name: e.Table.Name(), Arg: "ids", NonNegative: true}}
	o.passGrad = passGrad{what: prefix + ": fetch", Op: opkit.New(opkit.Sig{
		Name: fmt.Sprintf("Fetch{%q, %d}", e.Table.Name(), len(h.fetches)), Diff: []bool{false},
		In: []hm.Type{operand.Type(ids.Dims(), ids.Dtype())}, Dtype: tensor.Int, Shape: o.shape}, fmt.Sprintf("%p", o))}
	h.fetches = append(h.fetches, o)
	return opkit.Apply(prefix, o, ids)
}

// fetchOp brings the rows its ids name into a CachedEmbedding's cache and
// returns their slots, the ids of the cache's rows (Weight), for the
// lookup after it. The first fetchOp of a run starts the cache's batch;
// the last starts the prefetch of the next batch's ids (Prefetch).
type fetchOp struct {
	passGrad
	e      *Embedding
	h      *cached
	shape  tensor.Shape
	idType tensor.Dtype
	lbl    operand.Label
	ids    []int64
	slots  []int32
}

func (o *fetchOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity(o.lbl.Op, " fetch", len(in), 1); err != nil {
		return nil, err
	}
	e, h := o.e, o.h
	if e.closed {
		return nil, fmt.Errorf("embedding %q: the graph ran after Close: %w", o.lbl.Name, table.ErrClosed)
	}
	ix, err := operand.ReadIndices(o.lbl.Op, "ids", in[0])
	if err != nil {
		return nil, err
	}
	if err := operand.CheckIndices(o.lbl, ix, 0, int(h.c.Schema().Rows)); err != nil {
		return nil, err
	}
	n := ix.Shape.TotalSize()
	o.ids, o.slots = slices.Grow(o.ids[:0], n)[:n], slices.Grow(o.slots[:0], n)[:n]
	for p := range n {
		o.ids[p] = ix.At(p)
	}
	if h.fetched == 0 || h.fetched >= len(h.fetches) {
		h.c.NewBatch()
		h.fetched = 0
	}
	if err := h.c.Fetch(h.context(), o.ids, o.slots); err != nil {
		return nil, fmt.Errorf("embedding %q: %w", o.lbl.Name, err)
	}
	h.fetched++
	if h.fetched == len(h.fetches) && len(h.next) > 0 {
		h.c.Prefetch(h.context(), h.next)
		h.next = h.next[:0]
	}
	out := make([]int, n)
	for p, s := range o.slots {
		out[p] = int(s)
	}
	return tensor.New(tensor.WithShape(o.shape.Clone()...), tensor.WithBacking(out)), nil
}

var _ gorgonia.ADOp = (*fetchOp)(nil)
