package nn

import (
	"context"
	"fmt"
	"slices"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/optim"
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
	rows(opt optim.Sparse) (*optim.Table, error)
	// step updates the rows of g by opt.
	step(ctx context.Context, opt optim.Sparse, g *optim.RowGrad) error
	// prefetch gives the ids of the next run.
	prefetch(ids [][]int64)
	sync(ctx context.Context) error
	close() error
}

// heap is a table in the Go heap: the tensor of e.Table, and the state of
// the optimiser that steps it.
type heap struct {
	w    *tensor.Dense
	tab  *optim.Table   // made by the first step or State, for its optimiser
	cols []table.Column // the columns of tab's state
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
func (h *heap) rows(opt optim.Sparse) (*optim.Table, error) {
	if h.tab == nil {
		t, err := optim.NewTable(h.w, opt)
		if err != nil {
			return nil, err
		}
		h.tab, h.cols = t, opt.Columns(h.w.Shape()[1])
	}
	dim := h.w.Shape()[1]
	if want := opt.Columns(dim); !sameColumns(want, h.cols) {
		return nil, fmt.Errorf("the table keeps the state of another optimiser than %T; use one optimiser per table: %w", opt, gather.ErrOption)
	}
	return h.tab, nil
}

// sameColumns reports whether a and b name the same columns of the same
// widths (their Init values may differ: they only start a table).
func sameColumns(a, b []table.Column) bool {
	return slices.EqualFunc(a, b, func(x, y table.Column) bool { return x.Name == y.Name && x.Width == y.Width })
}

func (h *heap) step(_ context.Context, opt optim.Sparse, g *optim.RowGrad) error {
	t, err := h.rows(opt)
	if err != nil {
		return err
	}
	return t.Step(opt, g)
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
	slots   []int      // the slots of a step's rows
}

func (h *cached) index(e *Embedding, ids *gorgonia.Node, op string) (*gorgonia.Node, error) {
	return e.slotIDs(h, ids, op)
}

func (h *cached) read(e *Embedding, _ *gorgonia.Node) (*gorgonia.Node, error) { return e.Table, nil }
func (h *cached) vocab() int                                                  { v, _ := h.c.Shape(); return int(v) }

func (h *cached) padRow(int) int { return h.padSlot }

func (h *cached) weight() (*tensor.Dense, error) {
	return nil, fmt.Errorf("its rows live in a cache in front of their store, not in one tensor; "+
		"read rows with Cached().Read, keep them with Sync: %w", gather.ErrOption)
}

func (h *cached) rows(optim.Sparse) (*optim.Table, error) {
	_, err := h.weight()
	return nil, err
}

func (h *cached) prefetch(ids [][]int64) {
	h.next = h.next[:0]
	for _, s := range ids {
		h.next = append(h.next, s...)
	}
}

// step updates the rows of g and their state where the cache holds them,
// and, for a Shared table, first on the store's servers, which hold the
// table.
func (h *cached) step(ctx context.Context, opt optim.Sparse, g *optim.RowGrad) error {
	_, dim := h.c.Shape()
	if want, have := opt.Columns(dim), h.c.Columns(); !sameColumns(want, have) {
		return fmt.Errorf("the optimiser %T keeps %v by row; the table holds %v: %w", opt, want, have, gather.ErrOption)
	}
	h.slots = h.slots[:0]
	for _, r := range g.Rows {
		s, ok := h.c.Slot(int64(r))
		if !ok {
			return fmt.Errorf("row %d of the gradient is not in the cache: step after the run that looked it up: %w", r, gather.ErrGraph)
		}
		h.slots = append(h.slots, int(s))
	}
	t := h.c.Steps() + 1
	if h.c.Shared() {
		rule, err := opt.ServerRule(t, g)
		if err != nil {
			return err
		}
		ids := make([]int64, len(g.Rows))
		for k, r := range g.Rows {
			ids[k] = int64(r)
		}
		if err := h.c.ApplyRule(ctx, rule, ids, operand.LittleEndianBytes(g.Values)); err != nil {
			return err
		}
	}
	if err := opt.StepRows(optim.Rows{Weight: h.c.Weight(), State: h.c.State(), Slots: h.slots, Step: t}, g); err != nil {
		return err
	}
	h.c.Round(h.slots, t) // to a half table's format
	h.c.SetSteps(t)
	if !h.c.Shared() {
		for _, s := range h.slots {
			h.c.MarkDirty(int32(s))
		}
	}
	h.fetched = 0
	return nil
}

func (h *cached) sync(ctx context.Context) error { return h.c.Sync(ctx) }
func (h *cached) close() error                   { return h.c.Close() }
