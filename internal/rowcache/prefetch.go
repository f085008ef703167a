package rowcache

import (
	"context"
	"slices"
)

// A prefetch is the read of a batch's misses that Prefetch started.
type prefetch struct {
	done chan struct{}
	ids  map[int64]int // row id -> its index in buf, once done
	buf  []byte
}

// row returns the bytes, n of them, a done prefetch read for row id.
func (p *prefetch) row(id int64, n int) ([]byte, bool) {
	if p == nil || p.ids == nil {
		return nil, false
	}
	k, ok := p.ids[id]
	if !ok {
		return nil, false
	}
	return p.buf[k*n : (k+1)*n], true
}

// take returns row's bytes as row does and forgets them: once the row is
// in the cache, the cache's copy is the row, and the one read ahead would
// be stale after the row's next write-back.
func (p *prefetch) take(id int64, n int) ([]byte, bool) {
	b, ok := p.row(id, n)
	if ok {
		delete(p.ids, id)
	}
	return b, ok
}

// Prefetch starts reading, on another goroutine, the rows of ids that the
// cache does not hold now, so that the Fetches after it take them from
// memory instead of the store. It is a hint: a Fetch reads whatever rows
// it needs and the prefetch did not read; what it read and no Fetch took
// is dropped at the next Prefetch; an id outside the store's rows, or a
// failed read, is left to the Fetch to report. The rows it reads do not
// enter the cache before a Fetch names them, so no row is evicted for
// them before the batch that needs them. See Cache for what the caller
// may do while it runs.
func (c *Cache) Prefetch(ctx context.Context, ids []int64) {
	c.Wait()
	c.dropStaged()
	var want []int64
	n := c.store.Rows()
	for _, id := range ids {
		// A row that will be stale is read again, unless the current
		// batch names it: its step may change it after the read.
		if s, ok := c.slotOf[id]; (!ok || c.stale(s, c.calls+1) && c.batch[s] < c.calls) && id >= 0 && id < n {
			want = append(want, id)
		}
	}
	slices.Sort(want)
	want = slices.Compact(want)
	if len(want) == 0 {
		return
	}
	p := &prefetch{done: make(chan struct{})}
	c.pre = p
	go func() {
		defer close(p.done)
		buf := make([]byte, len(want)*c.rowBytes)
		if err := c.store.ReadRows(ctx, want, buf); err != nil {
			return // the next Fetch reads them, and reports the error
		}
		p.ids = make(map[int64]int, len(want))
		for k, id := range want {
			p.ids[id] = k
		}
		p.buf = buf
	}()
}

// Wait waits for the Prefetch in flight, if any, to finish reading.
func (c *Cache) Wait() {
	if c.pre != nil {
		<-c.pre.done
	}
}

// dropStaged forgets what the last Prefetch read.
func (c *Cache) dropStaged() { c.pre = nil }
