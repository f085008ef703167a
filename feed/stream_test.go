package feed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/localredis"
)

// streamSchema is the tests' entries: a label, one dense value, a bag of
// integer ids.
var streamSchema = Schema{Columns: []Column{
	{Name: "label", Role: Label},
	{Name: "x", Role: Dense, Fill: "0"},
	{Name: "c", Role: Sparse, IDs: Int, Split: "|"},
}}

// startRedis returns a client of a new local Redis server.
func startRedis(t *testing.T) *redis.Client {
	srv := localredis.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addrs[0], Password: srv.Password})
	t.Cleanup(func() { c.Close() })
	return c
}

// addEntries appends n entries to stream: entry k has label k%2, x k and
// the ids k and k+1 (none for k%5 == 4), and returns their ids.
func addEntries(t *testing.T, c redis.UniversalClient, stream string, from, n int) []string {
	var ids []string
	for k := from; k < from+n; k++ {
		bag := fmt.Sprintf("%d|%d", k, k+1)
		if k%5 == 4 {
			bag = ""
		}
		id, err := c.XAdd(context.Background(), &redis.XAddArgs{Stream: stream, Values: []any{"label", k % 2, "x", k, "c", bag, "other", "skipped"}}).Result()
		require.NoError(t, err)
		ids = append(ids, id)
	}
	return ids
}

func streamOptions(consumer string) StreamOptions {
	return StreamOptions{Stream: "{clicks}", Group: "trainers", Consumer: consumer, Batch: 4, Linger: 20 * time.Millisecond, Wait: 10 * time.Millisecond}
}

// The entries of a stream become batches as a file's lines do, padded
// when the stream has no more; Ack empties the pending list.
func TestStreamBatches(t *testing.T) {
	c := startRedis(t)
	ctx := context.Background()
	ids := addEntries(t, c, "{clicks}", 0, 10)
	s, err := OpenStream(ctx, c, streamSchema, streamOptions("w1"))
	require.NoError(t, err)
	var got []string
	for k := 0; k < 3; k++ {
		b, err := s.Next(ctx)
		require.NoError(t, err)
		want := min(4, 10-4*k)
		require.Equal(t, want, b.Real, "batch %d", k)
		for i := range 4 {
			e := 4*k + i
			if i >= want {
				require.Zero(t, b.Weights[i])
				require.Zero(t, b.Sparse.Lengths[i])
				continue
			}
			require.Equal(t, float32(e%2), b.Labels[i])
			require.Equal(t, float32(e), b.Dense[i])
			require.Equal(t, float32(1), b.Weights[i])
		}
		off := 0
		for i := range want {
			e := 4*k + i
			if e%5 == 4 {
				require.Zero(t, b.Sparse.Lengths[i])
				continue
			}
			require.Equal(t, int64(2), b.Sparse.Lengths[i])
			require.Equal(t, []int64{int64(e), int64(e + 1)}, b.Sparse.Values[off:off+2])
			off += 2
		}
		got = append(got, s.IDs()...)
	}
	require.Equal(t, ids, got)
	pending, err := c.XPending(ctx, "{clicks}", "trainers").Result()
	require.NoError(t, err)
	require.Equal(t, int64(10), pending.Count)
	require.NoError(t, s.Ack(ctx))
	lag, pend, err := s.Lag(ctx)
	require.NoError(t, err)
	require.Equal(t, [2]int64{0, 0}, [2]int64{lag, pend})
	// Entries added later are read by the same Stream.
	more := addEntries(t, c, "{clicks}", 10, 2)
	b, err := s.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, b.Real)
	require.Equal(t, more, s.IDs())
}

// A consumer restarted without its state reads its pending entries
// again; with the state saved after its first batch it skips that
// batch's entries and acknowledges them.
func TestStreamRestart(t *testing.T) {
	c := startRedis(t)
	ctx := context.Background()
	ids := addEntries(t, c, "{clicks}", 0, 12)
	s, err := OpenStream(ctx, c, streamSchema, streamOptions("w1"))
	require.NoError(t, err)
	_, err = s.Next(ctx)
	require.NoError(t, err)
	state, err := s.State()
	require.NoError(t, err)
	_, err = s.Next(ctx) // trained, not saved: lost with the crash
	require.NoError(t, err)
	// The crash: the read of the next entries Next started ends first
	// (they are pending for w1 then, as a dead process's last read's are).
	require.NoError(t, s.Close())

	again, err := OpenStream(ctx, c, streamSchema, streamOptions("w1"))
	require.NoError(t, err)
	_, err = again.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, ids[:4], again.IDs(), "without the state, the pending entries from the first")
	require.NoError(t, again.Close())

	resumed, err := OpenStream(ctx, c, streamSchema, streamOptions("w1"))
	require.NoError(t, err)
	require.NoError(t, resumed.SetState(denseState(t, state)))
	var got []string
	for range 2 {
		_, err := resumed.Next(ctx)
		require.NoError(t, err)
		got = append(got, resumed.IDs()...)
	}
	require.Equal(t, ids[4:12], got, "with it, the entries after the saved batch")
	require.NoError(t, resumed.Ack(ctx))
	pending, err := c.XPending(ctx, "{clicks}", "trainers").Result()
	require.NoError(t, err)
	require.Zero(t, pending.Count, "the saved batch's entries acknowledged with the others")

	// A state of another consumer is refused, and so is one after Next.
	other, err := OpenStream(ctx, c, streamSchema, streamOptions("w2"))
	require.NoError(t, err)
	require.ErrorIs(t, other.SetState(denseState(t, state)), ErrMismatch)
	require.ErrorIs(t, resumed.SetState(denseState(t, state)), errs.ErrOption)
}

// Two workers of one group each receive their own entries: every entry
// once across them. (How many each gets depends on who reads first: a
// worker reads its next batch's entries ahead.)
func TestStreamTwoWorkers(t *testing.T) {
	c := startRedis(t)
	ctx := context.Background()
	ids := addEntries(t, c, "{clicks}", 0, 40)
	a, err := OpenStream(ctx, c, streamSchema, streamOptions("a"))
	require.NoError(t, err)
	b, err := OpenStream(ctx, c, streamSchema, streamOptions("b"))
	require.NoError(t, err)
	seen := map[string]int{}
	got := map[*Stream]int{}
	for end := time.Now().Add(20 * time.Second); len(seen) < len(ids); {
		require.True(t, time.Now().Before(end), "%d of %d entries read", len(seen), len(ids))
		for _, s := range []*Stream{a, b} {
			wait, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			_, err := s.Next(wait)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				continue // the other holds the rest
			}
			require.NoError(t, err)
			for _, id := range s.IDs() {
				seen[id]++
			}
			got[s] += len(s.IDs())
			require.NoError(t, s.Ack(ctx))
		}
	}
	require.Len(t, seen, len(ids))
	for _, id := range ids {
		require.Equal(t, 1, seen[id], id)
	}
	require.Positive(t, got[a])
	require.Positive(t, got[b])
}

// A worker's entries left unacknowledged longer than ClaimIdle are taken
// over by another.
func TestStreamClaim(t *testing.T) {
	c := startRedis(t)
	ctx := context.Background()
	ids := addEntries(t, c, "{clicks}", 0, 4)
	dead, err := OpenStream(ctx, c, streamSchema, streamOptions("dead"))
	require.NoError(t, err)
	_, err = dead.Next(ctx)
	require.NoError(t, err)
	o := streamOptions("live")
	o.ClaimIdle = 50 * time.Millisecond
	live, err := OpenStream(ctx, c, streamSchema, o)
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond)
	_, err = live.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, ids, live.IDs())
}

// A malformed entry is an error naming it, or, under MaxBad, skipped and
// acknowledged.
func TestStreamBad(t *testing.T) {
	c := startRedis(t)
	ctx := context.Background()
	good := addEntries(t, c, "{clicks}", 0, 1)
	bad, err := c.XAdd(ctx, &redis.XAddArgs{Stream: "{clicks}", Values: []any{"label", "yes", "x", 1}}).Result()
	require.NoError(t, err)
	good = append(good, addEntries(t, c, "{clicks}", 1, 1)...)

	s, err := OpenStream(ctx, c, streamSchema, streamOptions("strict"))
	require.NoError(t, err)
	_, err = s.Next(ctx)
	var le *LineError
	require.ErrorAs(t, err, &le)
	require.ErrorIs(t, err, ErrFormat)
	require.Equal(t, bad, le.Entry)
	require.Equal(t, "label", le.Name)
	require.Contains(t, err.Error(), bad)
	_, again := s.Next(ctx)
	require.Equal(t, err, again)

	o := streamOptions("lenient")
	o.Group, o.MaxBad = "lenient", 1
	s, err = OpenStream(ctx, c, streamSchema, o)
	require.NoError(t, err)
	b, err := s.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, b.Real)
	require.Equal(t, good, s.IDs())
	require.Equal(t, 1, s.Bad())
	require.NoError(t, s.Ack(ctx))
	pending, err := c.XPending(ctx, "{clicks}", "lenient").Result()
	require.NoError(t, err)
	require.Zero(t, pending.Count)
}

// Next waits for entries as long as its context allows, in reads of
// Wait, and then returns the context's error.
func TestStreamContext(t *testing.T) {
	c := startRedis(t)
	s, err := OpenStream(context.Background(), c, streamSchema, streamOptions("w"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.Next(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 2*time.Second)
	// A batch waits at most Linger for its rest.
	addEntries(t, c, "{clicks}", 0, 1)
	b, err := s.Next(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, b.Real)
}

func TestOpenStreamOptions(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, o := range []StreamOptions{
		{Group: "g", Consumer: "c", Batch: 1},
		{Stream: "s", Consumer: "c", Batch: 1},
		{Stream: "s", Group: "g", Batch: 1},
		{Stream: "s", Group: "g", Consumer: "c"},
		{Stream: "s", Group: "g", Consumer: "c", Batch: 1, Linger: -1},
		{Stream: "s", Group: "g", Consumer: "c", Batch: 1, From: "1-0"},
		{Stream: "s", Group: "g", Consumer: "c", Batch: 4, MaxUnacked: 2},
	} {
		_, err := OpenStream(context.Background(), c, streamSchema, o)
		require.ErrorIs(t, err, errs.ErrOption, "%+v", o)
	}
	_, err := OpenStream(context.Background(), nil, streamSchema, streamOptions("w"))
	require.ErrorIs(t, err, errs.ErrOption)
}

// Batches past MaxUnacked without an Ack are refused.
func TestStreamMaxUnacked(t *testing.T) {
	c := startRedis(t)
	ctx := context.Background()
	addEntries(t, c, "{clicks}", 0, 12)
	o := streamOptions("w")
	o.MaxUnacked = 8
	s, err := OpenStream(ctx, c, streamSchema, o)
	require.NoError(t, err)
	for range 2 {
		_, err := s.Next(ctx)
		require.NoError(t, err)
	}
	_, err = s.Next(ctx)
	require.ErrorIs(t, err, errs.ErrOption)
	require.False(t, errors.Is(err, ErrFormat))
	require.NoError(t, s.Ack(ctx))
	_, err = s.Next(ctx)
	require.NoError(t, err)
	require.Len(t, slices.Compact(s.IDs()), 4)
}

// denseState is a part's state as Load hands it to SetState.
func denseState(t *testing.T, ts map[string]tensor.Tensor) map[string]*tensor.Dense {
	out := map[string]*tensor.Dense{}
	for k, v := range ts {
		d, ok := v.(*tensor.Dense)
		require.True(t, ok, k)
		out[k] = d
	}
	return out
}

// On a Redis Cluster a stream is one key: its group and entries live on
// the master of its slot.
func TestStreamCluster(t *testing.T) {
	cl := localredis.Start(t, 3, 0)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs, Password: cl.Password})
	defer c.Close()
	ctx := context.Background()
	ids := addEntries(t, c, "{clicks}", 0, 8)
	s, err := OpenStream(ctx, c, streamSchema, streamOptions("w1"))
	require.NoError(t, err)
	var got []string
	for range 2 {
		b, err := s.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, 4, b.Real)
		got = append(got, s.IDs()...)
	}
	require.Equal(t, ids, got)
	require.NoError(t, s.Ack(ctx))
	lag, pending, err := s.Lag(ctx)
	require.NoError(t, err)
	require.Equal(t, [2]int64{0, 0}, [2]int64{lag, pending})
}

// FuzzStreamEntry parses any entry: an example or what is wrong with it,
// never a panic, and a malformed entry leaves the batch as it was.
func FuzzStreamEntry(f *testing.F) {
	f.Add("1", "3", "4|5", true)
	f.Add("yes", "", "", false)
	f.Add("0", "1e400", "9223372036854775808", true)
	f.Fuzz(func(t *testing.T, label, x, c string, withC bool) {
		lay, err := newLayout(streamSchema, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := &Stream{lay: lay}
		s.blk.reset(len(lay.dense), len(lay.sparse), lay.weights)
		values := map[string]any{"label": label, "x": x}
		if withC {
			values["c"] = c
		}
		_, _, msg := s.parse(redis.XMessage{ID: "1-1", Values: values})
		want := 1
		if msg != "" {
			want = 0
		}
		if s.blk.n != want || len(s.blk.labels) != want || len(s.blk.dense) != want {
			t.Fatalf("%q: %d examples, %d labels, %d dense values, want %d", msg, s.blk.n, len(s.blk.labels), len(s.blk.dense), want)
		}
	})
}

// A read left less than a millisecond of the batch's Linger waits one
// millisecond, not for ever (BLOCK 0): readNew rounds the wait up.
func TestStreamShortWait(t *testing.T) {
	c := startRedis(t)
	ctx := context.Background()
	s, err := OpenStream(ctx, c, streamSchema, streamOptions("w"))
	require.NoError(t, err)
	start := time.Now()
	msgs, err := s.readNew(ctx, 4, 200*time.Microsecond)
	require.NoError(t, err)
	require.Empty(t, msgs)
	require.Less(t, time.Since(start), 5*time.Second)
}

// Close waits for the read ahead that Next started: once it returns, that
// read's entries are pending for the consumer, and a Stream of the same
// consumer opened then reads them after the batch's.
func TestStreamClose(t *testing.T) {
	c := startRedis(t)
	ctx := context.Background()
	ids := addEntries(t, c, "{clicks}", 0, 8)
	s, err := OpenStream(ctx, c, streamSchema, streamOptions("w1"))
	require.NoError(t, err)
	_, err = s.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, ids[:4], s.IDs())
	require.NoError(t, s.Close())
	pending, err := c.XPending(ctx, "{clicks}", "trainers").Result()
	require.NoError(t, err)
	require.Equal(t, int64(8), pending.Count, "the batch's entries and the read ahead's")
	require.NoError(t, s.Close(), "a second Close")

	again, err := OpenStream(ctx, c, streamSchema, streamOptions("w1"))
	require.NoError(t, err)
	var got []string
	for range 2 {
		_, err := again.Next(ctx)
		require.NoError(t, err)
		got = append(got, again.IDs()...)
	}
	require.Equal(t, ids, got, "the pending entries, the read ahead's among them")
	require.NoError(t, again.Close())
}
