package nn

import (
	"context"
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/rule"
	"github.com/gathergrad/gather/table"
)

// A home is where an Embedding's rows live: the Go heap (NewEmbedding),
// a file mapped into memory (OpenEmbedding), or a cache in front of a
// store (CachedEmbedding). Lookups, bags and steps go through it, one
// path for all three.
type home interface {
	// index returns the node of the rows of e.Table that ids name: ids
	// itself, or a cache's slots.
	index(e *Embedding, ids *gorgonia.Node, op string) (*gorgonia.Node, error)
	// read returns the table node as a lookup of the rows idx names
	// reads it.
	read(e *Embedding, idx *gorgonia.Node) (*gorgonia.Node, error)
	// vocab returns the number of the table's rows.
	vocab() int
	// padRow returns the row of e.Table that holds the padding row pad.
	padRow(pad int) int
	// weight returns the table in memory.
	weight() (*tensor.Dense, error)
	// rows returns the table in memory with opt's state (optim.Param).
	rows(opt optim.Sparse) (*optim.MemoryTable, error)
	// step updates the rows of g by opt.
	step(ctx context.Context, opt optim.Sparse, g *optim.RowGrad) error
	// reset starts the rows of fresh afresh (RawIDs).
	reset(ctx context.Context, fresh []table.Assignment, init table.RowInit) error
	// prefetch gives the ids of the next run.
	prefetch(ids [][]int64)
	sync(ctx context.Context) error
	close() error
}

// heap is a table in the Go heap: the tensor of e.Table, and the state of
// the optimiser that steps it.
type heap struct {
	w    *tensor.Dense
	tab  *optim.MemoryTable // made by the first step or State, for its optimiser
	cols []rule.Column      // the columns of tab's state
}

func (h *heap) index(_ *Embedding, ids *gorgonia.Node, _ string) (*gorgonia.Node, error) {
	return ids, nil
}

func (h *heap) read(e *Embedding, _ *gorgonia.Node) (*gorgonia.Node, error) { return e.Table, nil }
func (h *heap) weight() (*tensor.Dense, error)                              { return h.w, nil }
func (h *heap) vocab() int                                                  { return h.w.Shape()[0] }
func (h *heap) padRow(pad int) int                                          { return pad }
func (h *heap) prefetch([][]int64)                                          {}

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
	if want := opt.Columns(dim); !rule.SameColumns(want, h.cols) {
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

func (h *heap) sync(context.Context) error {
	return fmt.Errorf("it lives in memory, not in a file; keep it with checkpoint.Save: %w", gather.ErrOption)
}

func (h *heap) close() error { return nil }

// mapped is a table in a file mapped into memory: a heap table whose
// tensor is the mapping, each lookup preceded by a willNeedOp, each step
// with an I/O error on the mapping turned into an error.
type mapped struct {
	heap
	file *table.File
}

func (m *mapped) read(e *Embedding, idx *gorgonia.Node) (*gorgonia.Node, error) {
	return e.willNeed(m.file, idx)
}

func (m *mapped) step(ctx context.Context, opt optim.Sparse, g *optim.RowGrad) error {
	return m.file.Guard(func() error { return m.heap.step(ctx, opt, g) })
}

func (m *mapped) sync(context.Context) error { return m.file.Sync() }
func (m *mapped) close() error               { return m.file.Close() }

// cached is a table whose rows live in a store, the rows of a run in a
// cache (CachedEmbedding).
type cached struct {
	c       *table.Cached
	padSlot int
	fetches []*fetchOp // one per lookup or bag
	fetched int        // how many of them ran since the batch began
	next    []int64    // the next batch's ids (Prefetch)
}

func (h *cached) index(e *Embedding, ids *gorgonia.Node, op string) (*gorgonia.Node, error) {
	return e.slotIDs(h, ids, op)
}

func (h *cached) read(e *Embedding, _ *gorgonia.Node) (*gorgonia.Node, error) { return e.Table, nil }
func (h *cached) vocab() int                                                  { return int(h.c.Schema().Rows) }

func (h *cached) padRow(int) int { return h.padSlot }

func (h *cached) weight() (*tensor.Dense, error) {
	return nil, fmt.Errorf("its rows live in a cache in front of their store, not in one tensor; "+
		"read rows with Cached().Read, keep them with Sync: %w", gather.ErrOption)
}

func (h *cached) rows(optim.Sparse) (*optim.MemoryTable, error) {
	_, err := h.weight()
	return nil, err
}

func (h *cached) prefetch(ids [][]int64) {
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

func (h *cached) sync(ctx context.Context) error { return h.c.Sync(ctx) }
func (h *cached) close() error                   { return h.c.Close() }
