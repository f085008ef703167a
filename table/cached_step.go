package table

import (
	"context"
	"fmt"
	"slices"

	"github.com/gathergrad/gather/table/driver"

	"github.com/gathergrad/gather/internal/errs"
)

// Step applies r to the rows g names and their state where the cache
// holds them, as step Stats().Steps+1, and counts the step: the rows must be in
// the cache, fetched since the last NewBatch. r must keep the table's
// columns. A half table's stepped values are then rounded to its format
// (its Schema's Format). The rows are written back to the store before
// they leave the cache, and at Sync.
//
// A Shared table is stepped first where its rows live: its store's
// servers apply r (driver.Stepper, such as a cluster.Store), as the store's
// step; the cached rows are then stepped alike, as a copy, as this
// cache's step. (A cluster.Store counts the steps made through it, one
// worker's, as the cache does.) On error the step is not counted and no
// cached row changed.
func (c *Cached) Step(ctx context.Context, r driver.Rule, g *driver.RowGrad) error {
	if c.closed {
		return fmt.Errorf("table %q: %w", c.name, ErrClosed)
	}
	if err := c.prepareStep(r, g); err != nil {
		return err
	}
	if c.shared {
		if err := c.store.(driver.Stepper).Step(ctx, r, g); err != nil {
			return err
		}
	}
	return c.stepCached(r, g)
}

// prepareStep checks a step of r with g and sets c.slots to the slots
// of g's rows.
func (c *Cached) prepareStep(r driver.Rule, g *driver.RowGrad) error {
	if c.closed {
		return fmt.Errorf("table %q: %w", c.name, ErrClosed)
	}
	if r == nil || g == nil {
		return fmt.Errorf("table %q: Step needs a rule and a gradient: %w", c.name, errs.ErrOption)
	}
	if err := driver.CheckColumns(r, c.dim, c.cols); err != nil {
		return fmt.Errorf("table %q: %w", c.name, err)
	}
	c.slots = c.slots[:0]
	for _, id := range g.Rows {
		s, ok := c.cache.Slot(id)
		if !ok {
			return fmt.Errorf("table %q: row %d of the gradient is not in the cache: step after the run that fetched it: %w", c.name, id, errs.ErrGraph)
		}
		c.slots = append(c.slots, int64(s))
	}
	return nil
}

// stepCached steps the cached rows of c.slots (prepareStep) and counts
// the step; unless the table is Shared, whose store has stepped them,
// it marks them for writing back.
func (c *Cached) stepCached(r driver.Rule, g *driver.RowGrad) error {
	t := c.steps + 1
	if err := r.StepRows(driver.Rows{Weight: c.weight, State: c.state, Slots: c.slots, Step: t}, g); err != nil {
		return err
	}
	c.round(c.slots, t)
	c.steps = t
	if !c.shared {
		for _, s := range c.slots {
			c.cache.MarkDirty(int32(s))
		}
	}
	return nil
}

// StepTogether steps each of caches by r with its gradient, grads[k] for
// caches[k], as its Step does: the Shared tables whose stores are
// GroupSteppers together, on their stores, by the first such store's
// StepTables, and then each in its cache; the others one after another.
// A table's error stops the step and names the table; on an error of the
// stores' step no cached row has moved. It is how nn.Collection steps a
// model's cached tables, Shared or not.
func StepTogether(ctx context.Context, r driver.Rule, caches []*Cached, grads []*driver.RowGrad) error {
	if len(caches) != len(grads) {
		return fmt.Errorf("table: %d tables and %d gradients: %w", len(caches), len(grads), errs.ErrShape)
	}
	var group []driver.GroupStep
	var grouped []int
	for k, c := range caches {
		if c == nil {
			return fmt.Errorf("table: StepTogether: table %d is nil: %w", k, errs.ErrOption)
		}
		_, ok := c.store.(driver.GroupStepper)
		st, isStore := c.store.(driver.Store)
		if !ok || !isStore || !c.shared {
			continue
		}
		if err := c.prepareStep(r, grads[k]); err != nil {
			return err
		}
		group = append(group, driver.GroupStep{Store: st, Rule: r, Grad: grads[k]})
		grouped = append(grouped, k)
	}
	if len(group) > 0 {
		if err := group[0].Store.(driver.GroupStepper).StepTables(ctx, group); err != nil {
			return err
		}
		for _, k := range grouped {
			c := caches[k]
			if err := c.prepareStep(r, grads[k]); err != nil {
				return err
			}
			if err := c.stepCached(r, grads[k]); err != nil {
				return fmt.Errorf("table %q: %w", c.name, err)
			}
		}
	}
	for k, c := range caches {
		if len(grouped) > 0 && slices.Contains(grouped, k) {
			continue
		}
		if err := c.Step(ctx, r, grads[k]); err != nil {
			return err
		}
	}
	return nil
}

// Reset starts the rows of fresh (IDMap.Map's assignments) afresh: row
// a.Row gets init's values for a.ID (a half table's rounded to its
// format, to nearest) and each state column its Init. It brings the rows
// into the cache as a batch of their own and marks them for writing
// back, so call it between batches, before the batch's Fetch.
//
// A Shared table's rows live where its store keeps them, started there
// by a map beside them (a StoreMapper): Reset of a Shared table is an
// error wrapping gather.ErrOption; Forget the rows the map read instead.
func (c *Cached) Reset(ctx context.Context, fresh []driver.Assignment, init driver.RowInit) error {
	if c.closed {
		return fmt.Errorf("table %q: %w", c.name, ErrClosed)
	}
	if c.shared {
		return fmt.Errorf("table %q: a Shared table's rows are started where they live, by a map beside them (a StoreMapper): Forget the rows its MapRead read, not Reset: %w", c.name, errs.ErrOption)
	}
	if len(fresh) == 0 {
		return nil
	}
	if err := init.Check(); err != nil {
		return fmt.Errorf("table %q: %w", c.name, err)
	}
	ids, slots := make([]int64, len(fresh)), make([]int32, len(fresh))
	for k, a := range fresh {
		ids[k] = a.Row
	}
	c.cache.NewBatch()
	if err := c.Fetch(ctx, ids, slots); err != nil {
		return err
	}
	at := make([]int64, len(slots))
	for k, s := range slots {
		at[k] = int64(s)
	}
	initialRows(c.weight, c.state, c.cols, fresh, at, init)
	c.roundNearest(at)
	for _, s := range slots {
		c.cache.MarkDirty(s)
	}
	return nil
}

// Forget drops the cache's copies of rows, so that the next batch's Fetch
// reads them from the store: the rows a StoreMapper's MapRead read for a
// Shared table. It starts a batch of its own, so call it between
// batches, before the batch's Fetch.
func (c *Cached) Forget(rows []int64) error {
	if c.closed {
		return fmt.Errorf("table %q: %w", c.name, ErrClosed)
	}
	c.cache.NewBatch()
	for _, row := range rows {
		c.cache.Forget(row)
	}
	return nil
}
