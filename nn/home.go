package nn

import (
	"context"
	"fmt"
	"slices"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// A Home is where an Embedding's rows live (Embedding.Home): the Go
// heap (NewEmbedding), a file mapped into memory (OpenEmbedding) or a
// cache in front of a store (CachedEmbedding). Lookups, bags and steps
// work alike on all three; what a home can do beyond them it says by
// the methods it has, found by assertion, as a database/sql driver's
// optional interfaces are:
//
//	if w, ok := emb.Home().(nn.Weights); ok { // the heap's and the file's
//		t, _ := w.Weight()
//		...
//	}
//	if s, ok := emb.Home().(nn.Syncer); ok { // the file's and the cache's
//		err = s.Sync(ctx)
//	}
//
// The cache's home is also a Cache: its table.Cached, the next batch's
// ids (Prefetch) and the context of its fetches.
type Home interface {
	// Vocab returns the number of the table's rows.
	Vocab() int
}

// Weights is a home that holds the whole table in memory. It is an
// optim.Param: optim.State(w, opt) is the optimiser's state of the
// table.
type Weights interface {
	Home
	// Name returns the table's name, the embedding's.
	Name() string
	// Weight returns the table's value, the [vocab, dim] tensor itself
	// (PyTorch's emb.weight): writes to it change the table. After
	// Close it is an error wrapping table.ErrClosed.
	Weight() (*tensor.Dense, error)
	// Rows returns the table with the state of opt, the optimiser that
	// steps it, and its step count (optim.Param, for optim.State): the
	// state is made, at its columns' Init values, by the first call or
	// Step. A table is stepped by one optimiser: another's state is an
	// error wrapping gather.ErrOption.
	Rows(opt optim.Sparse) (*optim.MemoryTable, error)
}

// A Syncer is a home that keeps its rows beyond the process: Sync makes
// every update so far durable. For OpenEmbedding's file it writes the
// mapping back to the file and the file to its disk; for
// CachedEmbedding's cache it writes the changed rows back to the store
// (table.Cached.Sync). A done ctx stops it with an error wrapping its
// error.
type Syncer interface {
	Home
	Sync(ctx context.Context) error
}

// A Cache is CachedEmbedding's home: its rows in a table.Cached.
type Cache interface {
	Home
	// Cached returns the table.
	Cached() *table.Cached
	// Prefetch gives the ids of the next batch, one slice per lookup or
	// bag (in any order): the run after this one reads their rows that
	// the cache misses while it and its Step compute, once its own rows
	// are fetched. It is a hint and changes no result.
	Prefetch(ids ...[]int64)
	// SetContext sets the context of the fetches of the graph's runs,
	// context.Background() until set: Gorgonia's machines call an op's
	// Do without a context, so this is the one context a home keeps
	// (every method that reaches the store takes its own). A done
	// context stops a run's fetch with an error wrapping its error
	// (context.Canceled or context.DeadlineExceeded).
	SetContext(ctx context.Context)
}

// home is what an Embedding needs of its Home.
type home interface {
	Home
	// index returns the node of the rows of the embedding's Table that
	// ids name: ids itself, or a cache's slots.
	index(ids *gorgonia.Node, op string) (*gorgonia.Node, error)
	// read returns the table node as a lookup of the rows idx names
	// reads it.
	read(idx *gorgonia.Node) (*gorgonia.Node, error)
	// padRow returns the row of e.Table that holds the padding row pad.
	padRow(pad int) int
	// rowTensor returns the tensor index reads the rows of: the table, or
	// a cache's rows.
	rowTensor() *tensor.Dense
	// step updates the rows of g by opt.
	step(ctx context.Context, opt optim.Sparse, g *optim.RowGrad) error
	// reset starts the rows of fresh afresh (RawIDs).
	reset(ctx context.Context, fresh []driver.Assignment, init driver.RowInit) error
	// close closes what the home holds open, and reports whether it
	// holds anything (a table in memory holds nothing).
	close(ctx context.Context) (bool, error)
	// cache returns the cache the rows are brought to, nil for a table
	// in memory or a mapped file (its rows are the ids themselves).
	cache() *table.Cached
	// rowsOf sets rows to the rows of rowTensor that ids name, for a
	// collection's table: the ids themselves, or a cache's slots, the
	// rows fetched into them in one fetch that starts the cache's batch.
	rowsOf(ids, rows []int64) ([]int64, error)
	// readRows returns the rows of the table ids name: rowTensor itself
	// (row ids[k] at row ids[k], byPosition false), or a cache's copy of
	// them, row k for ids[k] (byPosition).
	readRows(ctx context.Context, ids []int64) (src *tensor.Dense, byPosition bool, err error)
	// stepped ends a batch whose rows a grouped step (table.StepTogether)
	// stepped.
	stepped()
}

// heap is a table in the Go heap: the tensor of e.Table, and the state of
// the optimiser that steps it.
type heap struct {
	e    *Embedding
	w    *tensor.Dense
	tab  *optim.MemoryTable // made by the first step or State, for its optimiser
	cols []driver.Column    // the columns of tab's state
}

func (h *heap) index(ids *gorgonia.Node, _ string) (*gorgonia.Node, error) {
	return ids, nil
}

func (h *heap) read(*gorgonia.Node) (*gorgonia.Node, error) { return h.e.Table, nil }
func (h *heap) Vocab() int                                  { return h.w.Shape()[0] }
func (h *heap) Name() string                                { return h.e.Name() }
func (h *heap) padRow(pad int) int                          { return pad }
func (h *heap) rowTensor() *tensor.Dense                    { return h.w }

func (h *heap) Weight() (*tensor.Dense, error) {
	if h.e.closed {
		return nil, fmt.Errorf("embedding %q: %w", h.e.Name(), table.ErrClosed)
	}
	return h.w, nil
}

func (h *heap) Rows(opt optim.Sparse) (*optim.MemoryTable, error) {
	if h.e.closed {
		return nil, fmt.Errorf("embedding %q: %w", h.e.Name(), table.ErrClosed)
	}
	if opt == nil {
		return nil, fmt.Errorf("embedding %q: Rows needs an optimiser: %w", h.e.Name(), gather.ErrOption)
	}
	t, err := h.rows(opt)
	if err != nil {
		return nil, fmt.Errorf("embedding %q: %w", h.e.Name(), err)
	}
	return t, nil
}

// rows returns the table with opt's state, made at the first call: a
// table is stepped by one optimiser, with one set of columns.
func (h *heap) rows(opt optim.Sparse) (*optim.MemoryTable, error) {
	if h.tab == nil {
		t, err := optim.NewMemoryTable(h.w, opt)
		if err != nil {
			return nil, err
		}
		h.tab, h.cols = t, opt.Columns(h.w.Shape()[1])
	}
	dim := h.w.Shape()[1]
	if want := opt.Columns(dim); !driver.SameColumns(want, h.cols) {
		return nil, fmt.Errorf("the table keeps the state of another optimiser than %T; use one optimiser per table: %w", opt, gather.ErrOption)
	}
	return h.tab, nil
}

func (h *heap) step(ctx context.Context, opt optim.Sparse, g *optim.RowGrad) error {
	t, err := h.rows(opt)
	if err != nil {
		return err
	}
	return t.Step(ctx, opt, g)
}

func (h *heap) close(context.Context) (bool, error) { return false, nil }
func (h *heap) cache() *table.Cached                { return nil }
func (h *heap) stepped()                            {}

func (h *heap) rowsOf(ids, _ []int64) ([]int64, error) { return ids, nil }

func (h *heap) readRows(context.Context, []int64) (*tensor.Dense, bool, error) {
	return h.w, false, nil
}

// mapped is a table in a file mapped into memory: a heap table whose
// tensor is the mapping, each lookup preceded by a willNeedOp, each step
// with an I/O error on the mapping turned into an error.
type mapped struct {
	heap
	file *table.File
}

func (m *mapped) read(idx *gorgonia.Node) (*gorgonia.Node, error) {
	return m.e.willNeed(m.file, idx)
}

func (m *mapped) step(ctx context.Context, opt optim.Sparse, g *optim.RowGrad) error {
	return m.file.Guard(func() error { return m.heap.step(ctx, opt, g) })
}

func (m *mapped) Sync(ctx context.Context) error {
	if m.e.closed {
		return fmt.Errorf("embedding %q: %w", m.e.Name(), table.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("embedding %q: %w", m.e.Name(), err)
	}
	if err := m.file.Sync(); err != nil {
		return fmt.Errorf("embedding %q: %w", m.e.Name(), err)
	}
	return nil
}
func (m *mapped) close(context.Context) (bool, error) { return true, m.file.Close() }

// cached is a table whose rows live in a store, the rows of a run in a
// cache (CachedEmbedding).
type cached struct {
	e       *Embedding
	c       *table.Cached
	ctx     context.Context // the context of the fetches (SetContext)
	padSlot int
	fetches []*fetchOp // one per lookup or bag
	fetched int        // how many of them ran since the batch began
	next    []int64    // the next batch's ids (Prefetch)
	slots   []int32    // rowsOf's
}

func (h *cached) index(ids *gorgonia.Node, op string) (*gorgonia.Node, error) {
	return h.e.slotIDs(h, ids, op)
}

func (h *cached) read(*gorgonia.Node) (*gorgonia.Node, error) { return h.e.Table, nil }
func (h *cached) Vocab() int                                  { return int(h.c.Schema().Rows) }
func (h *cached) Cached() *table.Cached                       { return h.c }
func (h *cached) SetContext(ctx context.Context)              { h.ctx = ctx }

// context returns the context of the fetches.
func (h *cached) context() context.Context {
	if h.ctx == nil {
		return context.Background()
	}
	return h.ctx
}

func (h *cached) padRow(int) int { return h.padSlot }

func (h *cached) rowTensor() *tensor.Dense { return h.c.Weight() }

func (h *cached) Prefetch(ids ...[]int64) {
	h.next = h.next[:0]
	for _, s := range ids {
		h.next = append(h.next, s...)
	}
}

// step has the cache step the rows of g (table.Cached.Step), which then
// end the batch.
func (h *cached) step(ctx context.Context, opt optim.Sparse, g *optim.RowGrad) error {
	if err := h.c.Step(ctx, opt, g); err != nil {
		return err
	}
	h.fetched = 0
	return nil
}

func (h *cached) Sync(ctx context.Context) error {
	if err := h.c.Sync(ctx); err != nil {
		return fmt.Errorf("embedding %q: %w", h.e.Name(), err)
	}
	return nil
}

var (
	_ Weights = (*heap)(nil)
	_ Weights = (*mapped)(nil)
	_ Syncer  = (*mapped)(nil)
	_ Syncer  = (*cached)(nil)
	_ Cache   = (*cached)(nil)
)

func (h *cached) close(ctx context.Context) (bool, error) { return true, h.c.Close(ctx) }
func (h *cached) cache() *table.Cached                    { return h.c }
func (h *cached) stepped()                                { h.fetched = 0 }

func (h *cached) rowsOf(ids, rows []int64) ([]int64, error) {
	n := len(ids)
	h.slots = slices.Grow(h.slots[:0], n)[:n]
	h.c.NewBatch()
	if err := h.c.Fetch(h.context(), ids, h.slots); err != nil {
		return rows, err
	}
	if len(h.next) > 0 {
		h.c.Prefetch(h.context(), h.next)
		h.next = h.next[:0]
	}
	rows = slices.Grow(rows[:0], n)[:n]
	for p, s := range h.slots {
		rows[p] = int64(s)
	}
	return rows, nil
}

func (h *cached) readRows(ctx context.Context, ids []int64) (*tensor.Dense, bool, error) {
	src, err := h.c.Read(ctx, ids)
	return src, true, err
}
