package nn

import (
	"fmt"
	"slices"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/opconfig"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
	"github.com/gathergrad/gather/optim"
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
// for write-back; Sync writes them to the store. Prefetch, given the next
// batch's ids before a run, reads that batch's misses while the run and
// its Step compute.
//
// A Shared table (table.CacheOptions.Shared) is trained by several
// workers at once on a Redis Cluster: Step sends the gradient to the
// servers, which apply the optimiser to their rows (an
// optim.ServerStepper), and applies it to the cached rows too, which are
// read again once CacheOptions.MaxAge batches old; Sync has nothing to
// write.
//
// The optimiser given to Step must be an optim.RowStepper whose columns
// are c's (those c was created with, such as table.WithState(opt.Columns(dim)...)).
// Options: WithPadding (the padding row is kept in the cache for good),
// WithMaxNorm, WithScaleGradByFreq and WithFrozen; WithSparse is implied.
// The ids of one run, over all lookups and bags of the table, must fit
// the cache: more ids than it holds rows is an error wrapping
// table.ErrCapacity when the lookup is built, naming both.
func CachedEmbedding(g *gorgonia.ExprGraph, c *table.Cached, opts ...EmbeddingOption) (*Embedding, error) {
	if c == nil {
		return nil, fmt.Errorf("embedding: CachedEmbedding needs a table (table.OpenCached or table.NewCached): %w", gather.ErrOption)
	}
	name := c.Name()
	prefix := fmt.Sprintf("embedding %q", name)
	cfg, err := newConfig(prefix, "CachedEmbedding", forOpen, opts)
	if err != nil {
		return nil, err
	}
	if err := checkNewNode(prefix, g, name); err != nil {
		return nil, err
	}
	vocab, dim := c.Shape()
	e := &Embedding{cfg: cfg, cached: c}
	if cfg.hasPad {
		if e.cfg.pad, err = opconfig.NormIndex(prefix, cfg.pad, int(vocab)); err != nil {
			return nil, err
		}
		s, err := c.Pin(int64(e.cfg.pad))
		if err != nil {
			return nil, fmt.Errorf("%s: keeping the padding row in the cache: %w", prefix, err)
		}
		e.padSlot = int(s)
	}
	if !cfg.frozen {
		e.cfg.sparse = true
	}
	w := c.Weight()
	e.Table = gorgonia.NewMatrix(g, w.Dtype(), gorgonia.WithShape(c.Slots(), dim), gorgonia.WithName(name), gorgonia.WithValue(w))
	return e, nil
}

// Cached returns the cache of a CachedEmbedding, else nil.
func (e *Embedding) Cached() *table.Cached { return e.cached }

// Prefetch gives a CachedEmbedding the ids of the next batch, one slice
// per lookup or bag (in any order): the run after this one reads their
// rows that the cache misses while it and its Step compute, once its own
// rows are fetched. It is a hint and changes no result. For a table not
// in a cache it does nothing.
func (e *Embedding) Prefetch(ids ...[]int64) {
	if e.cached == nil {
		return
	}
	e.next = e.next[:0]
	for _, s := range ids {
		e.next = append(e.next, s...)
	}
}

// slotIDs returns the node of the cache slots of ids, a lookup's ids in a
// CachedEmbedding (see fetchOp), after checking that the run's ids fit
// the cache.
func (e *Embedding) slotIDs(ids *gorgonia.Node, op string) (*gorgonia.Node, error) {
	prefix := fmt.Sprintf("embedding %q", e.Table.Name())
	if err := operand.CheckIndexDtype(op, "ids", ids.Dtype()); err != nil {
		return nil, err
	}
	n := ids.Shape().TotalSize()
	for _, f := range e.fetches {
		n += f.shape.TotalSize()
	}
	if vocab, _ := e.cached.Shape(); min(int64(n), vocab) > int64(e.cached.Slots()) {
		return nil, fmt.Errorf("%s: a run names up to %d ids over its lookups; the cache holds %d rows: give it a larger budget: %w",
			prefix, n, e.cached.Slots(), table.ErrCapacity)
	}
	o := &fetchOp{e: e, shape: ids.Shape().Clone(), idType: ids.Dtype(),
		lbl: opconfig.Label{Op: op, Name: e.Table.Name(), Arg: "ids", NonNegative: true}}
	o.passGrad = passGrad{what: prefix + ": fetch", Op: opkit.New(opkit.Sig{
		Name: fmt.Sprintf("Fetch{%q, %d}", e.Table.Name(), len(e.fetches)), Diff: []bool{false},
		In: []hm.Type{operand.Type(ids.Dims(), ids.Dtype())}, Dtype: tensor.Int, Shape: o.shape}, fmt.Sprintf("%p", o))}
	e.fetches = append(e.fetches, o)
	t, err := gorgonia.ApplyOp(o, ids)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", prefix, errs.Graph(err))
	}
	return t, nil
}

// fetchOp brings the rows its ids name into a CachedEmbedding's cache and
// returns their slots, the ids of the cache's rows (Weight), for the
// lookup after it. The first fetchOp of a run starts the cache's batch;
// the last starts the prefetch of the next batch's ids (Prefetch).
type fetchOp struct {
	passGrad
	e      *Embedding
	shape  tensor.Shape
	idType tensor.Dtype
	lbl    opconfig.Label
	ids    []int64
	slots  []int32
}

func (o *fetchOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity(o.lbl.Op, " fetch", len(in), 1); err != nil {
		return nil, err
	}
	e := o.e
	if e.closed {
		return nil, fmt.Errorf("embedding %q: the graph ran after Close: %w", o.lbl.Name, table.ErrClosed)
	}
	ix, err := operand.ReadIndices(o.lbl.Op, "ids", in[0])
	if err != nil {
		return nil, err
	}
	vocab, _ := e.cached.Shape()
	if err := operand.CheckIndices(o.lbl, ix, 0, int(vocab)); err != nil {
		return nil, err
	}
	n := ix.Shape.TotalSize()
	o.ids, o.slots = slices.Grow(o.ids[:0], n)[:n], slices.Grow(o.slots[:0], n)[:n]
	for p := range n {
		o.ids[p] = ix.At(p)
	}
	if e.fetched == 0 || e.fetched >= len(e.fetches) {
		e.cached.NewBatch()
		e.fetched = 0
	}
	if err := e.cached.Fetch(o.ids, o.slots); err != nil {
		return nil, fmt.Errorf("embedding %q: %w", o.lbl.Name, err)
	}
	e.fetched++
	if e.fetched == len(e.fetches) && len(e.next) > 0 {
		e.cached.Prefetch(e.next)
		e.next = e.next[:0]
	}
	out := make([]int, n)
	for p, s := range o.slots {
		out[p] = int(s)
	}
	return tensor.New(tensor.WithShape(o.shape.Clone()...), tensor.WithBacking(out)), nil
}

var _ gorgonia.ADOp = (*fetchOp)(nil)

// stepCached is Step for a CachedEmbedding: opt updates the rows of g
// and their state where the cache holds them, and for a Shared table
// first on the server, which holds the table. Step names the embedding
// in its errors.
func (e *Embedding) stepCached(opt optim.Sparse, g *optim.RowGrad) error {
	rs, ok := opt.(optim.RowStepper)
	if !ok {
		return fmt.Errorf("a cached table needs an optimiser that keeps its state by row (optim.RowStepper), not %T: %w", opt, gather.ErrOption)
	}
	_, dim := e.cached.Shape()
	if want, have := rs.Columns(dim), e.cached.Columns(); !slices.Equal(want, have) {
		return fmt.Errorf("the optimiser %T keeps %v by row; the table holds %v: %w", opt, want, have, gather.ErrOption)
	}
	e.stepSlots = e.stepSlots[:0]
	for _, r := range g.Rows {
		s, ok := e.cached.Slot(int64(r))
		if !ok {
			return fmt.Errorf("row %d of the gradient is not in the cache: step after the run that looked it up: %w", r, gather.ErrGraph)
		}
		e.stepSlots = append(e.stepSlots, int(s))
	}
	steps := e.cached.Steps()
	if e.cached.Shared() {
		ss, ok := opt.(optim.ServerStepper)
		if !ok {
			return fmt.Errorf("a Shared table needs an optimiser a server applies (optim.ServerStepper), not %T: %w", opt, gather.ErrOption)
		}
		if err := ss.StepServer(e.cached.Store().(*table.RedisStore), g, steps+1); err != nil {
			return err
		}
	}
	err := rs.StepRows(optim.SlotRows{Weight: e.cached.Weight(), State: e.cached.State(), Slots: e.stepSlots, Steps: &steps}, g)
	if err != nil {
		return err
	}
	if steps != e.cached.Steps() {
		e.cached.SetSteps(steps)
	}
	if !e.cached.Shared() {
		for _, s := range e.stepSlots {
			e.cached.MarkDirty(int32(s))
		}
	}
	e.fetched = 0
	return nil
}
