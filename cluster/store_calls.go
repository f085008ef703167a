package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/table/driver"
)

// A callKind is what a call's pipelines do: read rows, write them, or
// step them (the Step methods' updates).
type callKind int

const (
	readCall callKind = iota
	writeCall
	stepCall
)

// onMasters sends, in one pipeline to each master that serves some of
// keys (all at once), the commands add adds for the keys it serves:
// add(ctx, p, k) for keys[k]. After writes, with the store's Replicas,
// each pipeline ends in a WAIT for them. A failed pipeline's error names
// its master when the master does not answer a PING.
func (s *Store) onMasters(ctx context.Context, keys []string, kind callKind, add func(ctx context.Context, p redis.Pipeliner, k int)) error {
	writes := kind != readCall
	by := map[*redis.Client][]int{}
	for k, key := range keys {
		node, err := s.c.MasterForKey(ctx, key)
		if err != nil {
			return err
		}
		by[node] = append(by[node], k)
	}
	s.pipes.Add(uint64(len(by)))
	if kind == stepCall {
		s.stepPipes.Add(uint64(len(by)))
	}
	errs := make(chan error, len(by))
	for node, ks := range by {
		go func() {
			p := node.Pipeline()
			for _, k := range ks {
				add(ctx, p, k)
			}
			var wait *redis.Cmd
			replicas := s.replicas
			if writes && s.replicas > 0 {
				if f, ok := s.fewer.Load(node.Options().Addr); ok && time.Now().Before(f.(fewerUntil).until) {
					replicas = f.(fewerUntil).live
				}
				wait = p.Do(ctx, "WAIT", replicas, (s.timeout / 2).Milliseconds())
			}
			_, err := p.Exec(ctx)
			switch {
			case errors.Is(err, redis.Nil):
				err = nil // a missing row: the caller reads each command's error
			case err == nil && wait != nil:
				switch n, _ := wait.Int64(); {
				case n < int64(replicas):
					err = s.fewReplicas(ctx, node, int(n))
				case replicas < s.replicas:
					s.degraded.Add(1)
				}
			case err != nil && node.Ping(ctx).Err() != nil:
				err = fmt.Errorf("no answer from the node at %s: %w", node.Options().Addr, err)
			}
			errs <- err
		}()
	}
	var first error
	for range by {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// fewReplicas returns the error of writes to the master at node that n
// replicas acknowledged, fewer than the store asked for: nil if the
// master is still a master and the cluster, as it sees it, lists fewer
// live replicas of it than Replicas and n covers them all (a degraded
// write, counted; the next writes to that master wait for the replicas
// it has, for fewerFor), ErrFewReplicas for such a write if the store is
// strict, and else an error that is retried.
func (s *Store) fewReplicas(ctx context.Context, node *redis.Client, n int) error {
	addr := node.Options().Addr
	short := fmt.Errorf("%d of the %d replicas asked for acknowledged the writes to %s", n, s.replicas, addr)
	role, err := node.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) == 0 || role[0] != "master" {
		return short // a master no more: its writes may be lost, so they are made again
	}
	id, err := node.ClusterMyID(ctx).Result()
	if err != nil {
		return short
	}
	lines, err := node.Do(ctx, "CLUSTER", "REPLICAS", id).StringSlice()
	if err != nil {
		return short
	}
	live := 0
	for _, line := range lines {
		if f := strings.Fields(line); len(f) > 2 && !strings.Contains(f[2], "fail") {
			live++
		}
	}
	switch {
	case live >= s.replicas || n < live:
		return short
	case s.strict:
		return fmt.Errorf("the master at %s has %d live replicas; the store asks for %d: %w", addr, live, s.replicas, ErrFewReplicas)
	}
	s.degraded.Add(1)
	s.fewer.Store(addr, fewerUntil{live: live, until: time.Now().Add(fewerFor)})
	return nil
}

// again runs call, each attempt within ctx and the store's timeout, and
// while it fails for the cluster's sake (retryable) and the store's Retry
// allows, reloads the cluster's layout and runs it again, waiting 100 ms,
// then up to 1 s, between attempts. Once ctx is done it stops, and its
// error wraps ctx's (context.Canceled or context.DeadlineExceeded).
func (s *Store) again(ctx context.Context, call func(ctx context.Context) error) error {
	end := time.Now().Add(s.retry)
	wait := 100 * time.Millisecond
	for {
		if s.closed.Load() {
			return driver.ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		err := s.attempt(ctx, call)
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		if err == nil || !retryable(err) || time.Now().Add(wait).After(end) {
			return err
		}
		s.retries.Add(1)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%v)", ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
		at, cancel := context.WithTimeout(ctx, s.timeout)
		s.c.ReloadState(at)
		cancel()
	}
}

func (s *Store) check(ids []int64, buf []byte) error {
	if s.closed.Load() {
		return fmt.Errorf("table %q: %w", s.name, driver.ErrClosed)
	}
	if buf != nil && len(buf) < len(ids)*s.rowBytes {
		return fmt.Errorf("table %q: %d bytes for %d rows of %d: %w", s.name, len(buf), len(ids), s.rowBytes, errs.ErrShape)
	}
	for k, id := range ids {
		if id < 0 || id >= s.rows {
			return fmt.Errorf("table %q: ids[%d] = %d is outside [0, %d): %w", s.name, k, id, s.rows, errs.ErrIndexOutOfRange)
		}
	}
	return nil
}

// Close closes the store's connections. After it, every call fails at
// once with an error wrapping ErrClosed. A second Close does nothing.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.c.Close()
}

// attempt runs call once within ctx and the store's timeout, and returns
// when it does or when ctx is done, whichever comes first: go-redis
// bounds a call's reads by its deadline but does not stop one that waits
// on a hung node when its context is cancelled. A call left running
// ends by the store's timeout; its writes may land (a step it carried is
// then one whose outcome the caller was told is unknown, and the same
// step again is applied once). So a call must not read or write memory
// its caller keeps: the writes send copies, and the reads fill memory of
// their own, copied out only when the call returns in time.
func (s *Store) attempt(ctx context.Context, call func(ctx context.Context) error) error {
	at, cancel := context.WithTimeout(ctx, s.timeout)
	done := make(chan error, 1)
	go func() {
		defer cancel()
		done <- call(at)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryable reports whether err may pass once the cluster has settled: a
// node that does not answer, or a reply that the cluster's state causes
// (Redis 7.0's): a slot moving (MOVED, ASK, TRYAGAIN), the cluster or a
// master down (CLUSTERDOWN, MASTERDOWN), a node loading its data or busy
// with a script (LOADING, BUSY), a write sent to a node that is now a
// replica (READONLY), a WAIT ended by that change (UNBLOCKED), a node
// refusing writes it cannot persist or replicate (MISCONF, NOREPLICAS),
// or replicas that did not acknowledge in time. Not a reply refusing the
// call itself (such as a Function's error naming a row of the wrong
// length, a missing Function, a password refused), nor a closed client,
// nor ErrFewReplicas.
func retryable(err error) bool {
	if errors.Is(err, redis.ErrClosed) || errors.Is(err, ErrFewReplicas) || errors.Is(err, driver.ErrClosed) {
		return false
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return true
	}
	code, _, _ := strings.Cut(re.Error(), " ")
	switch code {
	case "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "LOADING", "BUSY", "READONLY", "UNBLOCKED", "MISCONF", "NOREPLICAS":
		return true
	}
	return false
}

// redisError returns err, saying which node timed out or refused when the
// client's error does not.
func redisError(err error) error {
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("a node did not answer in time: %w", err)
	}
	return err
}
