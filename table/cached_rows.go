package table

import (
	"context"
	"fmt"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"
)

// Schema returns what the table's rows are.
func (c *Cached) Schema() driver.Schema {
	return driver.Schema{Name: c.name, Rows: c.store.Rows(), Dim: c.dim, Dtype: c.dt, Format: c.format(), Columns: c.cols}
}

// Weight returns the cache's rows' values, a [slots, dim] tensor: the row
// Fetch put in slot s is row s. Lookups read it; Step updates it in
// place.
func (c *Cached) Weight() *tensor.Dense { return c.weight }

// Fetch sets slots[k] to the slot of row ids[k], adding the rows to the
// current batch: it reads the rows the cache misses (from the last
// Prefetch, or from the store, together) and evicts the least recently
// used rows the batch does not name, dirty ones written back first. The
// batch's rows stay in their slots until NewBatch. An id outside [0,
// vocab), or a batch of more distinct rows than the cache holds
// (ErrCapacity, naming both), is an error.
//
// For a table in a file, a Fetch that finds the journal past
// FileOptions.JournalLimit syncs the table first (Sync), or fails with
// ErrJournalFull under FileOptions.ManualSync.
func (c *Cached) Fetch(ctx context.Context, ids []int64, slots []int32) error {
	if c.closed {
		return fmt.Errorf("table %q: %w", c.name, ErrClosed)
	}
	if c.journal != nil && c.limit >= 0 && c.journal.Size() > c.limit {
		if c.manual {
			return fmt.Errorf("table %q: the journal holds %d bytes, past the limit of %d; call Sync: %w", c.name, c.journal.Size(), c.limit, ErrJournalFull)
		}
		if err := c.Sync(ctx); err != nil {
			return err
		}
	}
	if err := c.cache.FetchMore(ctx, ids, slots); err != nil {
		return fmt.Errorf("table %q: %w", c.name, err)
	}
	return nil
}

// NewBatch ends the current batch: its rows may be evicted from now on.
func (c *Cached) NewBatch() {
	if !c.closed {
		c.cache.NewBatch()
	}
}

// Prefetch starts reading, on another goroutine, the rows of ids the
// cache does not hold, for the next Fetch: call it with the next batch's
// ids after the current batch's Fetch, and the reads overlap the current
// step. It is a hint: it never changes what Fetch returns, and rows it
// reads enter the cache only at the Fetch that names them. While it
// reads, the caller may read and change the slots (lookups, optimiser
// steps); Fetch, Sync, Read and Close wait for it.
func (c *Cached) Prefetch(ctx context.Context, ids []int64) {
	if !c.closed {
		c.cache.Prefetch(ctx, ids)
	}
}

// Pin fetches row id and keeps it in the cache until Close, such as a
// padding row every batch may name; call it before the first Fetch.
func (c *Cached) Pin(ctx context.Context, id int64) (int32, error) {
	if c.closed {
		return 0, fmt.Errorf("table %q: %w", c.name, ErrClosed)
	}
	s, err := c.cache.Pin(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("table %q: %w", c.name, err)
	}
	return s, nil
}
