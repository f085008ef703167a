package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"github.com/redis/go-redis/v9"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
)

// ErrNoDelta: the cluster holds no such delta (ReadDelta): not published
// yet, or dropped once its keep ran out (then reload the full model).
var ErrNoDelta = errors.New("no such delta on the cluster")

// deltaKey is the key of delta seq after base of the table.
func (s *Store) deltaKey(base, seq uint64) string {
	return fmt.Sprintf("gg:%s:delta:%d:%d", s.name, base, seq)
}

// PublishDelta puts d, a delta of this table's rows (say,
// nn.Embedding.Delta of the embedding whose rows live here), on the
// cluster for servers to read with ReadDelta: under the key
// "gg:<table>:delta:<base>:<seq>", as the bytes checkpoint.EncodeDeltas
// makes of it (each tensor's CRC-32C beside it), for keep, after which
// Redis drops it. A server applies the deltas in order (serve.Table.Apply)
// and one that falls further behind than keep reloads the full model. It
// is a SET of one key, repeated within Options.Retry if the cluster
// fails, and safe to call again. A delta that is not well formed, or a
// keep under a millisecond, is an error and nothing is put.
func (s *Store) PublishDelta(ctx context.Context, d *driver.Delta, keep time.Duration) error {
	if keep < time.Millisecond {
		return fmt.Errorf("table %q: a delta kept %v: %w", s.name, keep, errs.ErrOption)
	}
	b, err := checkpoint.EncodeDeltas([]*driver.Delta{d}, nil)
	if err != nil {
		return fmt.Errorf("table %q: %w", s.name, err)
	}
	key := s.deltaKey(d.Base, d.Seq)
	err = s.again(ctx, func(ctx context.Context) error { return s.c.Set(ctx, key, b, keep).Err() })
	if err != nil {
		return fmt.Errorf("table %q: publishing delta %d of base %d: %w", s.name, d.Seq, d.Base, redisError(err))
	}
	return nil
}

// ReadDelta returns delta seq after base of this table as PublishDelta
// put it. One the cluster does not hold is an error wrapping ErrNoDelta;
// bytes that are not that delta alone, or fail their CRC-32C, an error
// wrapping checkpoint.ErrFormat.
func (s *Store) ReadDelta(ctx context.Context, base, seq uint64) (*driver.Delta, error) {
	key := s.deltaKey(base, seq)
	var b []byte
	err := s.again(ctx, func(ctx context.Context) (err error) {
		b, err = s.c.Get(ctx, key).Bytes()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("table %q: delta %d of base %d (key %q): %w", s.name, seq, base, key, ErrNoDelta)
	}
	if err != nil {
		return nil, fmt.Errorf("table %q: reading delta %d of base %d: %w", s.name, seq, base, redisError(err))
	}
	ds, dense, err := checkpoint.DecodeDeltas(b, key)
	if err != nil {
		return nil, err
	}
	if len(ds) != 1 || len(dense) != 0 || ds[0].Base != base || ds[0].Seq != seq {
		return nil, fmt.Errorf("table %q: key %q holds %d deltas (the first of base %d, seq %d) and %d dense tensors, not delta %d of base %d alone: %w",
			s.name, key, len(ds), ds[0].Base, ds[0].Seq, len(dense), seq, base, checkpoint.ErrFormat)
	}
	return ds[0], nil
}
