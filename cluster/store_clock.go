package cluster

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// clockKey is the key of worker's step count (SetClock); the clocks of a
// table share one hash tag, so that Clocks reads them in one call.
func (s *Store) clockKey(worker int) string {
	return "gg:" + s.name + ":{clock}:" + strconv.Itoa(worker)
}

// SetClock records that worker has done step steps, for a bound on how
// far workers drift apart (Clocks); the record expires after ttl unless
// set again, so that a worker that died holds no one back for longer.
func (s *Store) SetClock(ctx context.Context, worker int, steps int64, ttl time.Duration) error {
	err := s.again(ctx, func(ctx context.Context) error {
		return s.c.Set(ctx, s.clockKey(worker), steps, ttl).Err()
	})
	if err != nil {
		return fmt.Errorf("table %q: recording worker %d's step: %w", s.name, worker, redisError(err))
	}
	return nil
}

// Clocks returns the step count SetClock recorded for each of the
// workers 0 to workers-1, -1 for a worker with none (not started, or
// expired).
func (s *Store) Clocks(ctx context.Context, workers int) ([]int64, error) {
	keys := make([]string, workers)
	for w := range keys {
		keys[w] = s.clockKey(w)
	}
	var vals []any
	err := s.again(ctx, func(ctx context.Context) (err error) {
		vals, err = s.c.MGet(ctx, keys...).Result()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("table %q: reading the workers' steps: %w", s.name, redisError(err))
	}
	out := make([]int64, workers)
	for w, v := range vals {
		out[w] = -1
		if str, ok := v.(string); ok {
			n, err := strconv.ParseInt(str, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("table %q: the key %q holds %q, not a step count: %w", s.name, keys[w], str, errMismatch)
			}
			out[w] = n
		}
	}
	return out, nil
}
