package cluster

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/gathergrad/gather/table/driver"

	"github.com/redis/go-redis/v9"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
)

// StepTables steps several tables, each as its store's Step would (its
// rule, its gradient, its step count, exactly once), the tables of one
// cluster (stores opened on the same Options.Addrs) all in one pipelined
// round trip per master: a model's tables cost a step one round trip per
// master, not one per table and master. A cluster's calls go through its
// first store's client, under its Timeout, Retry and Replicas. Each store
// is named once. A rule without an encoding or a gradient its rule
// refuses is an error naming the table, and nothing is sent. A failure whose outcome may be in part applied wraps
// ErrUnknownOutcome: the same StepTables again (or each store's Step with
// its part) applies the rest, exactly once.
//
// It is the driver.GroupStepper method of Store, by which table.StepTogether
// steps the Shared caches of a collection's tables together.
func (s *Store) StepTables(ctx context.Context, steps []driver.GroupStep) error {
	if len(steps) == 0 {
		return nil
	}
	var clusters [][]groupPart // the parts, by cluster
	seen := map[*Store]bool{}
	for k, st := range steps {
		o, ok := st.Store.(*Store)
		if !ok || o == nil {
			return fmt.Errorf("cluster: step %d: the store %T is not a cluster's: %w", k, st.Store, errs.ErrOption)
		}
		if seen[o] {
			return fmt.Errorf("table %q: named twice: %w", o.name, errs.ErrOption)
		}
		seen[o] = true
		p, err := o.prepare(st.Rule, st.Grad)
		if err != nil {
			return err
		}
		at := slices.IndexFunc(clusters, func(c []groupPart) bool { return sameCluster(c[0].s, o) })
		if at < 0 {
			clusters = append(clusters, nil)
			at = len(clusters) - 1
		}
		clusters[at] = append(clusters[at], p)
	}
	for _, parts := range clusters {
		if err := stepCluster(ctx, parts); err != nil {
			return err
		}
	}
	return nil
}

// stepCluster steps the tables of parts, of one cluster, together.
func stepCluster(ctx context.Context, parts []groupPart) error {
	s := parts[0].s
	if len(parts) == 1 {
		return s.Step(ctx, parts[0].r, parts[0].g)
	}
	// One update at a time per store: lock them in one order.
	order := slices.Clone(parts)
	slices.SortFunc(order, func(a, b groupPart) int { return cmp.Compare(a.s.id, b.s.id) })
	for _, p := range order {
		p.s.stepping.Lock()
		defer p.s.stepping.Unlock()
	}
	for tries := 0; ; tries++ {
		err := s.sendGroup(ctx, parts)
		if err == nil || !strings.Contains(err.Error(), "Function not found") || tries == 3 {
			if err != nil {
				return fmt.Errorf("%d tables from %q on: stepping: %w", len(parts), parts[0].s.name, err)
			}
			return nil
		}
		at, cancel := context.WithTimeout(ctx, s.timeout)
		s.c.ReloadState(at)
		cancel()
		for _, p := range parts {
			if err := s.load(ctx, p.library); err != nil {
				return fmt.Errorf("table %q: rule %q: %w", p.s.name, p.rule, redisError(err))
			}
		}
	}
}

// sameCluster reports whether a and b were opened on the same nodes.
func sameCluster(a, b *Store) bool {
	x, y := slices.Clone(a.c.Options().Addrs), slices.Clone(b.c.Options().Addrs)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// A groupPart is one table's part of StepTables: the checked step and its
// calls.
type groupPart struct {
	s        *Store
	r        driver.Rule
	g        *driver.RowGrad
	rule     string
	library  string
	fn       string
	head     []any
	calls    []tagCall
	raw      []mappedRow
	t        int64
	update   uint64
	digest   [sha256.Size]byte
	rowCount int
}

// prepare checks a step of the store as Step does and returns its calls.
func (s *Store) prepare(r driver.Rule, g *driver.RowGrad) (groupPart, error) {
	if r == nil || g == nil {
		return groupPart{}, fmt.Errorf("table %q: a step needs a rule and a gradient: %w", s.name, errs.ErrOption)
	}
	if s.dt != tensor.Float32 {
		return groupPart{}, fmt.Errorf("table %q: a Redis Cluster applies rules to float32 rows; the table's are %v: %w", s.name, s.dt, errs.ErrDtype)
	}
	if err := driver.CheckColumns(r, s.dim, s.cols); err != nil {
		return groupPart{}, fmt.Errorf("table %q: %w", s.name, err)
	}
	rr, err := redisEncoding(s.name, r)
	if err != nil {
		return groupPart{}, err
	}
	t := s.steps.Load() + 1
	if err := r.Check(t, g, s.dim); err != nil {
		return groupPart{}, fmt.Errorf("table %q: %w", s.name, err)
	}
	if err := s.check(g.Rows, nil); err != nil {
		return groupPart{}, err
	}
	raw, err := s.mappedRows(g.Rows)
	if err != nil {
		return groupPart{}, err
	}
	fn, library := redisFunction(r.Name(), rr.Lua)
	if raw != nil {
		fn += "_raw"
	}
	args := rr.Args(r, t)
	head := []any{strconv.Itoa(s.dim), strconv.Itoa(len(args))}
	for _, a := range args {
		head = append(head, strconv.FormatFloat(a, 'g', -1, 64))
	}
	calls := s.tagCalls(s.dim, g.Rows, fileio.LittleEndianBytes(g.Values.Float32s()), raw)
	return groupPart{s: s, r: r, g: g, rule: r.Name(), library: library, fn: fn, head: head, calls: calls, raw: raw, t: t,
		digest: callDigest(fn, head, calls), rowCount: len(g.Rows)}, nil
}

// sendGroup sends every part's calls, each under its store's update name
// (numbered as Store.numbered numbers one store's), in one pipelined round
// trip per master, and then counts each store's step; on error, each store
// keeps its update as pending, to be named again by the same update.
// The caller holds every store's stepping lock.
func (s *Store) sendGroup(ctx context.Context, parts []groupPart) error {
	var first []string
	type ref struct{ part, call int }
	var refs []ref
	for i := range parts {
		p := &parts[i]
		p.update = p.s.updates + 1
		if p.s.pending != nil && p.s.pending.digest == p.digest {
			p.update = p.s.pending.update
		}
		p.s.updates = max(p.s.updates, p.update)
		for k, c := range p.calls {
			first = append(first, c.keys[0])
			refs = append(refs, ref{i, k})
		}
	}
	err := s.again(ctx, func(ctx context.Context) error {
		return s.onMasters(ctx, first, stepCall, func(ctx context.Context, pl redis.Pipeliner, k int) {
			p, c := &parts[refs[k].part], parts[refs[k].part].calls[refs[k].call]
			args := append([]any{p.s.id, strconv.FormatUint(p.update, 10)}, p.head...)
			pl.FCall(ctx, p.fn, c.keys, append(args, c.args...)...)
		})
	})
	if err == nil {
		for _, p := range parts {
			p.s.pending = nil
			p.s.stepped(p.raw)
			p.s.steps.Store(p.t)
		}
		return nil
	}
	for _, p := range parts {
		p.s.pending = &pendingStep{update: p.update, digest: p.digest}
	}
	return stepError(ctx, err)
}

// Masters returns the number of the cluster's masters, as its layout
// stands now: the most pipelines, one round trip each, that a call of the
// store sends.
func (s *Store) Masters(ctx context.Context) (int, error) {
	var n atomic.Int32
	err := s.c.ForEachMaster(ctx, func(context.Context, *redis.Client) error {
		n.Add(1)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("table %q: %w", s.name, redisError(err))
	}
	return int(n.Load()), nil
}
