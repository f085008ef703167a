package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/serve"
)

// nextDelta returns the model m with delta m.seq+1 of its base applied,
// as examples/distributed -deltas writes it into dir (see its
// publisher): the rows of each table that changed and the dense layers
// whole, in one file. m is not changed.
func nextDelta(dir string, m *model) (*model, error) {
	path := deltaPath(dir, m.base, m.seq+1)
	ds, dense, err := checkpoint.ReadDeltas(path)
	if err != nil {
		return nil, err
	}
	next := *m
	next.seq++
	for f := range m.tables {
		name := fmt.Sprintf("feature%d.weight", f)
		k := slices.IndexFunc(ds, func(d *driver.Delta) bool { return d.Table == name })
		if k < 0 {
			return nil, fmt.Errorf("%s: no delta of %q: %w", path, name, checkpoint.ErrMismatch)
		}
		if next.tables[f], err = m.tables[f].Apply(ds[k]); err != nil {
			return nil, fmt.Errorf("table %d: %w", f, err)
		}
		if f == 0 || ds[k].Time < next.taken {
			next.taken = ds[k].Time // the oldest table's
		}
	}
	if err := next.readLayers(dense, path); err != nil {
		return nil, err
	}
	return &next, nil
}

// followDeltas applies each delta of the current model's base from dir as
// it is ready, checking every poll, until ctx is done: each applied
// between requests (live.Holder.Update), so that a request reads one
// version; each delta's lag (from its rows' being taken, Delta.Time, to
// their being served) is kept for /stats and /metrics. A delta that does
// not follow the model (serve.ErrDelta)
// reloads the model file (and, if the file is the same, waits for
// another); another error leaves the model answering and is logged.
func (s *server) followDeltas(ctx context.Context, dir string, poll time.Duration, logf func(format string, args ...any)) {
	t := time.NewTicker(poll)
	defer t.Stop()
	var stuck *uint64 // a base whose deltas do not follow its file: wait for another file
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for ready(dir, s.Current().Model) {
			cur := s.Current()
			if stuck != nil && *stuck == cur.Model.base {
				break
			}
			version := fmt.Sprintf("%s+%d", strings.SplitN(cur.Version, "+", 2)[0], cur.Model.seq+1)
			err := s.Update(version, func(m *model) (*model, error) { return nextDelta(dir, m) })
			if errors.Is(err, serve.ErrDelta) {
				if v, rerr := s.Reload(); rerr == nil {
					logf("delta: %v; reloaded: version %s", err, v)
					if b := s.Current().Model.base; b == cur.Model.base {
						stuck = &b // the same file: its deltas would fail again
						logf("the deltas of base %d do not follow its model file: waiting for another file", b)
					}
				}
				break
			}
			if err != nil {
				logf("delta: %v; still serving version %s", err, cur.Version)
				break
			}
			if taken := s.Current().Model.taken; taken > 0 {
				s.lags.add(time.Since(time.Unix(0, taken)))
			}
		}
	}
}

// ready reports whether delta m.seq+1 of m's base is ready in dir.
func ready(dir string, m *model) bool {
	_, err := os.Stat(deltaPath(dir, m.base, m.seq+1))
	return err == nil
}

// deltaPath returns the file of delta seq of base in dir.
func deltaPath(dir string, base, seq uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%d-%d.safetensors", base, seq))
}

// parseBase returns the "base" a model file's metadata names, 0 for none.
func parseBase(meta map[string]string) uint64 {
	b, _ := strconv.ParseUint(meta["base"], 10, 64)
	return b
}

// lags keeps the last deltas' lags: from their rows' being taken from
// training to their being served.
type lags struct {
	mu   sync.Mutex
	last []time.Duration // at most 1,000
	next int
}

func (l *lags) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.last) < 1000 {
		l.last = append(l.last, d)
		return
	}
	l.last[l.next] = d
	l.next = (l.next + 1) % len(l.last)
}

// p99 returns the 99th percentile of the lags kept, 0 for none.
func (l *lags) p99() time.Duration {
	l.mu.Lock()
	s := slices.Clone(l.last)
	l.mu.Unlock()
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	return s[(len(s)-1)*99/100]
}
