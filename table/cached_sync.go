package table

import (
	"context"
	"fmt"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
)

// Read returns the rows ids names as they are now, from the cache or the
// store, without bringing them into the cache: a [len(ids), width] tensor,
// each row its dim values and then its state.
func (c *Cached) Read(ctx context.Context, ids []int64) (*tensor.Dense, error) {
	if c.closed {
		return nil, fmt.Errorf("table %q: %w", c.name, ErrClosed)
	}
	c.cache.Wait()
	rb := c.store.RowBytes()
	buf := make([]byte, len(ids)*rb)
	var from []int64
	var at []int
	n := c.store.Rows()
	for k, id := range ids {
		if id < 0 || id >= n {
			return nil, fmt.Errorf("table %q: ids[%d] = %d is outside [0, %d): %w", c.name, k, id, n, errs.ErrIndexOutOfRange)
		}
		if s, ok := c.cache.Slot(id); ok {
			c.cache.CopyRow(s, buf[k*rb:(k+1)*rb])
			continue
		}
		from, at = append(from, id), append(at, k)
	}
	if len(from) > 0 {
		tmp := make([]byte, len(from)*rb)
		if err := c.store.ReadRows(ctx, from, tmp); err != nil {
			return nil, fmt.Errorf("table %q: %w", c.name, err)
		}
		for i, k := range at {
			copy(buf[k*rb:(k+1)*rb], tmp[i*rb:(i+1)*rb])
		}
	}
	return floatsAt(buf, 0, c.dt, len(ids), rb/int(c.dt.Size()))
}

// Sync writes every changed row back to the store, with the step count.
// For a table in a file it is durable when Sync returns: the rows and the
// step count go to the journal, which is committed (fsync), applied to
// the file (fsync) and emptied; a crash at any moment leaves the table as
// this Sync or the one before left it, never a mix. Between syncs the
// journal grows with the changed rows the cache evicts; a Fetch syncs on
// its own once it passes FileOptions.JournalLimit.
func (c *Cached) Sync(ctx context.Context) error {
	if c.closed {
		return fmt.Errorf("table %q: %w", c.name, ErrClosed)
	}
	if c.keepSteps {
		if err := c.journal.SetMeta([]byte(formatSteps(c.steps))); err != nil {
			return fmt.Errorf("table %q: %w", c.name, err)
		}
	}
	if err := c.writeIDMap(ctx); err != nil {
		return fmt.Errorf("table %q: %w", c.name, err)
	}
	if err := c.cache.Sync(ctx); err != nil {
		return fmt.Errorf("table %q: %w", c.name, err)
	}
	return nil
}

// CacheStats counts what a Cached table did: the optimiser's steps kept
// with the table (Steps, the t of SparseAdam's bias corrections, saved
// by Sync with the rows), and what Fetch found: ids in the cache (Hits),
// ids it had to bring in (Misses), and of those, how many a Prefetch had
// read (Prefetched).
type CacheStats struct {
	Steps                    int64
	Hits, Misses, Prefetched uint64
}

// HitRate returns Hits / (Hits + Misses), 0 before any Fetch.
func (s CacheStats) HitRate() float64 {
	if s.Hits+s.Misses == 0 {
		return 0
	}
	return float64(s.Hits) / float64(s.Hits+s.Misses)
}

// Stats returns the steps taken and what the cache's Fetches found so far.
func (c *Cached) Stats() CacheStats {
	h, m, p := c.cache.Stats()
	return CacheStats{Steps: c.steps, Hits: h, Misses: m, Prefetched: p}
}

// Close syncs the table, frees the cache's memory and, for a file, closes
// it and frees it for another open. After it, the tensors of Weight and
// State must not be used, and Fetch, Read and Sync fail with ErrClosed.
// A second Close does nothing. ctx bounds the Sync.
func (c *Cached) Close(ctx context.Context) error {
	if c.closed {
		return nil
	}
	err := c.Sync(ctx)
	if e := c.free(); err == nil {
		err = e
	}
	return err
}

// free closes the table without syncing it: it frees the cache's memory
// and, for a file, closes its journal and the file and frees it for
// another open. It returns the first error of those closes.
func (c *Cached) free() error {
	var err error
	c.closed = true
	c.cache.Close()
	if c.journal != nil {
		err = c.journal.Close()
	}
	if c.file != nil {
		c.release()
		if e := c.file.Close(); err == nil {
			err = e
		}
	}
	return err
}
