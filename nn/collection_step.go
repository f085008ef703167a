package nn

import (
	"context"
	"fmt"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/rowgrad"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// Step updates every trainable table by opt from the gradient the
// backward pass of the last run that computed it captured, as
// Embedding.Step does for its lookups: each table once, from the
// gradients of all its features (in feature order), as one step of its
// home (a cache's Step, a file's mapping, the heap's table), each
// table's rows split across goroutines by its rule; tables in caches by
// table.StepTogether, which steps the Shared tables of one Redis Cluster
// together, in one pipelined round trip per master for all of them. Unfused, each table's
// row gradient is built in memory kept for the next step; Fused, none is
// built (CollectionOptions.Fused). Once its memory has grown, a step of
// tables in memory allocates nothing.
//
// opt's settings are checked before any table moves. A Step with no run
// that computed the gradient since the last Step is an error wrapping
// gather.ErrGraph and changes nothing. A table's home that fails (a cache
// whose store is gone) is an error naming the table; the other tables
// have moved.
func (c *Collection) Step(ctx context.Context, opt optim.Sparse) error {
	if opt == nil {
		return fmt.Errorf("collection: Step needs an optimiser, such as &optim.SparseSGD{...}: %w", gather.ErrOption)
	}
	if err := c.checkCaptured(); err != nil {
		return err
	}
	for _, g := range c.groups {
		if g.e.cfg.frozen {
			continue
		}
		dim := g.dim
		if g.empty == nil {
			g.empty = &optim.RowGrad{Values: tensor.New(tensor.Of(c.dtype), tensor.WithShape(0, dim))}
		}
		if err := opt.Check(1, g.empty, dim); err != nil {
			return fmt.Errorf("collection: table %q: %w", g.e.Name(), err)
		}
	}
	if c.opts.Fused {
		if err := c.checkFinite(); err != nil {
			return err
		}
	}
	if tapCheckDue(c.grads) {
		if err := checkTap(fmt.Sprintf("collection of %q", c.groups[0].e.Name()), c.tap); err != nil {
			return err
		}
	}
	c.grads++
	// The tables in memory and files, then those in caches together.
	for _, g := range c.local {
		g.err = c.stepGroup(ctx, g, opt)
	}
	c.stepCaches(ctx, opt)
	var first error
	for _, g := range c.groups {
		if g.e.cfg.frozen {
			continue
		}
		g.fresh = false
		if g.err == nil {
			g.e.markChanged(g.cids)
		} else if first == nil {
			first = fmt.Errorf("collection: table %q: %w", g.e.Name(), g.err)
		}
		g.err = nil
	}
	return first
}

// local reports whether g's table is in memory or a file (the heap's
// table or a mapping), which no other table's step touches.
func (g *collGroup) local() bool { return g.e.home.cache() == nil }

// checkCaptured reports an error unless every trainable table's gradient
// was captured since the last Step.
func (c *Collection) checkCaptured() error {
	if c.op == nil {
		return fmt.Errorf("collection: Step before Bag: %w", gather.ErrGraph)
	}
	for _, g := range c.groups {
		if g.e.closed {
			return fmt.Errorf("collection: table %q: %w", g.e.Name(), table.ErrClosed)
		}
		if !g.e.cfg.frozen && !g.fresh {
			return fmt.Errorf("collection: no run of the graph computed a gradient since the last Step: run it (vm.RunAll) with the gradient of GradNodes first: %w", gather.ErrGraph)
		}
	}
	return nil
}

// stepCaches steps the trainable tables in caches (CachedEmbedding), by
// table.StepTogether: the Shared tables of a Redis Cluster together, in
// one pipelined round trip per master. Each group's error is set in
// g.err.
func (c *Collection) stepCaches(ctx context.Context, opt optim.Sparse) {
	var caches []*table.Cached
	var grads []*optim.RowGrad
	var groups []*collGroup
	for _, g := range c.groups {
		if g.e.cfg.frozen || g.local() {
			continue
		}
		rg, err := c.rowGrad(g)
		if err != nil {
			g.err = err
			return
		}
		caches, grads, groups = append(caches, g.e.home.cache()), append(grads, rg), append(groups, g)
	}
	if len(groups) == 0 {
		return
	}
	if err := table.StepTogether(ctx, opt, caches, grads); err != nil {
		groups[0].err = err
		return
	}
	for _, g := range groups {
		g.e.home.stepped()
	}
}

// stepGroup steps the table of g.
func (c *Collection) stepGroup(ctx context.Context, g *collGroup, opt optim.Sparse) error {
	if c.opts.Fused {
		if b, ok := g.e.home.(blockStepper); ok {
			g.order, g.at = kernel.SortRows(g.cids, g.e.home.Vocab(), &g.sort), 0
			if g.next == nil {
				g.next = func(rg *optim.RowGrad) bool { return c.nextBlock(g, rg) }
			}
			return b.stepBlocks(ctx, opt, g.next)
		}
	}
	rg, err := c.rowGrad(g)
	if err != nil {
		return err
	}
	return g.e.home.step(ctx, opt, rg)
}

// rowGrad returns the row gradient of g's table, built in g's memory.
func (c *Collection) rowGrad(g *collGroup) (*optim.RowGrad, error) {
	e, dim := g.e, g.dim
	if c.opts.Fused { // a home that steps no blocks: each id's gradient, now
		operand.PickFloat(c.dtype, fusedPositions[float32], fusedPositions[float64])(g, dim)
	}
	n := len(g.cids)
	if n == 0 {
		g.idsT = tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(0))
		g.posT = tensor.New(tensor.Of(c.dtype), tensor.WithShape(0, dim))
	} else {
		g.idsT = operand.Header(g.idsT, g.cids, n)
		if c.dtype == tensor.Float32 {
			g.posT = operand.Header(g.posT, g.pos.f32[:n*dim], n, dim)
		} else {
			g.posT = operand.Header(g.posT, g.pos.f64[:n*dim], n, dim)
		}
	}
	return rowgrad.Build(g.idsT, g.posT, e.home.Vocab(), e.padding(), &g.buf)
}

// A blockStepper is a home that steps its rows from a row gradient given
// in blocks (optim.MemoryTable.StepBlocks).
type blockStepper interface {
	stepBlocks(ctx context.Context, opt optim.Sparse, next func(g *optim.RowGrad) bool) error
}

func (h *heap) stepBlocks(ctx context.Context, opt optim.Sparse, next func(g *optim.RowGrad) bool) error {
	t, err := h.rows(opt)
	if err != nil {
		return err
	}
	return t.StepBlocks(ctx, opt, next)
}

func (m *mapped) stepBlocks(ctx context.Context, opt optim.Sparse, next func(g *optim.RowGrad) bool) error {
	return m.file.Guard(func() error { return m.heap.stepBlocks(ctx, opt, next) })
}

// fusedBlock is how many rows a block of the fused step holds.
const fusedBlock = 256

// nextBlock sets rg to the next block of the fused step of g's table, at
// most fusedBlock rows from g.order on, and reports whether there was
// one: the rows in ascending order, each the sum, in the order of its
// ids, of what each id received, as rowgrad.Build sums them.
func (c *Collection) nextBlock(g *collGroup, rg *optim.RowGrad) bool {
	order, k, start := g.order, g.at, g.at
	rows := g.block[:0]
	for k < len(order) && len(rows) < fusedBlock {
		r := order[k].Row
		if r != g.pad {
			rows = append(rows, int64(r))
		}
		for k < len(order) && order[k].Row == r { // a row's pairs stay in one block
			k++
		}
	}
	g.block, g.at = rows, k
	if len(rows) == 0 {
		return false
	}
	dim := g.dim
	if g.blockT == nil {
		g.blockT = map[int]*tensor.Dense{}
	}
	vals := g.blockT[len(rows)]
	if c.dtype == tensor.Float32 {
		v := grow[float32](&g.vals, fusedBlock*dim)
		vals = operand.Header(vals, v[:len(rows)*dim], len(rows), dim)
		sumBlock(v, g.grad.f32, g, order[start:k], dim)
	} else {
		v := grow[float64](&g.vals, fusedBlock*dim)
		vals = operand.Header(vals, v[:len(rows)*dim], len(rows), dim)
		sumBlock(v, g.grad.f64, g, order[start:k], dim)
	}
	g.blockT[len(rows)] = vals
	rg.Rows, rg.Values = rows, vals
	return true
}

// sumBlock sets dst to the gradients of the rows of order (sorted by row,
// then position) but padding, one after another: each id's gradient is
// coef·grad[its bag], rounded, and a row's are summed in the order of its
// positions, as kernel.BagPositionGrad and kernel.SumRows compute them.
func sumBlock[T kernel.Float](dst, grad []T, g *collGroup, order []kernel.RowPos, dim int) {
	slot, prev := -1, -1
	for _, o := range order {
		if o.Row == g.pad {
			continue
		}
		off := g.gOff[o.Pos]
		src, c := grad[off:off+dim], T(g.coef[o.Pos])
		if o.Row != prev { // the row's first id
			slot, prev = slot+1, o.Row
			out := dst[slot*dim : slot*dim+dim]
			if c == 1 { // T(1·v) is v
				copy(out, src)
				continue
			}
			for j, v := range src {
				out[j] = T(c * v)
			}
			continue
		}
		out := dst[slot*dim : slot*dim+dim]
		if c == 1 {
			for j, v := range src {
				out[j] += v
			}
			continue
		}
		for j, v := range src {
			out[j] += T(c * v)
		}
	}
}

// fusedPositions sets g.pos to the gradient each id of g received, from
// the captured gradient.
func fusedPositions[T kernel.Float](g *collGroup, dim int) {
	p, gs := grow[T](&g.pos, len(g.cids)*dim), *slot[T](&g.grad)
	for i := range g.cids {
		out := p[i*dim : (i+1)*dim]
		if g.gOff[i] < 0 {
			clear(out)
			continue
		}
		c, src := T(g.coef[i]), gs[g.gOff[i]:][:dim]
		for j := range out {
			out[j] = T(c * src[j])
		}
	}
}
