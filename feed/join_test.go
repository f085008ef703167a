package feed

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/gathergrad/gather/internal/errs"
)

// Impressions and clicks at chosen times become labelled examples: a
// click within the window makes a positive, none a negative once the
// window has closed on both streams, and the Stream of Out reads them.
func TestJoin(t *testing.T) {
	c := startRedis(t)
	ctx := context.Background()
	joinEvents(t, c)

	j, err := NewJoin(c, JoinOptions{Impressions: "{j}:imp", Clicks: "{j}:click", Out: "{j}:out", Window: 100 * time.Millisecond, Count: 2})
	require.NoError(t, err)
	total := 0
	for range 10 {
		n, err := j.Step(ctx)
		require.NoError(t, err)
		total += n
	}
	require.Equal(t, 4, total)
	require.Equal(t, JoinStats{Impressions: 4, Clicks: 5, Positives: 2, Negatives: 2, Late: 1, Unknown: 1, Repeated: 1}, j.Stats())
	imps, clicks := j.At()
	require.Equal(t, [2]string{"1300-0", "1310-0"}, [2]string{imps, clicks})

	s, err := OpenStream(ctx, c, streamSchema, StreamOptions{Stream: "{j}:out", Group: "g", Consumer: "w", Batch: 4, Linger: time.Millisecond})
	require.NoError(t, err)
	b, err := s.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, b.Real)
	label := map[float32]float32{}
	for i := range 4 {
		label[b.Dense[i]] = b.Labels[i]
	}
	require.Equal(t, map[float32]float32{1: 1, 2: 0, 3: 0, 4: 1}, label)
}

// With Lines the Join adds its examples as lines, Pack an entry, which a
// Stream with Lines reads as the same examples; an impression with a
// field that cannot be one of a line is dropped.
func TestJoinLines(t *testing.T) {
	c := startRedis(t)
	ctx := context.Background()
	joinEvents(t, c)
	require.NoError(t, c.XAdd(ctx, &redis.XAddArgs{Stream: "{j}:imp", ID: "1400-0", Values: []any{"request", "e", "x", "5\t6", "c", "7"}}).Err())
	require.NoError(t, c.XAdd(ctx, &redis.XAddArgs{Stream: "{j}:click", ID: "1600-0", Values: []any{"request", "zz"}}).Err())

	j, err := NewJoin(c, JoinOptions{Impressions: "{j}:imp", Clicks: "{j}:click", Out: "{j}:out", Window: 100 * time.Millisecond, Lines: []string{"label", "x", "c"}, Pack: 3})
	require.NoError(t, err)
	n, err := j.Step(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, JoinStats{Impressions: 5, Clicks: 5, Positives: 2, Negatives: 2, Late: 1, Unknown: 1, Repeated: 1, Unfit: 1}, j.Stats())
	out, err := c.XRange(ctx, "{j}:out", "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, out, 2, "4 examples, 3 an entry")
	require.Equal(t, map[string]any{"lines": "1\t1\t7\n0\t2\t7\n0\t3\t7\n"}, out[0].Values)

	s, err := OpenStream(ctx, c, streamSchema, StreamOptions{Stream: "{j}:out", Group: "g", Consumer: "w", Batch: 4, Linger: time.Millisecond, Lines: "lines"})
	require.NoError(t, err)
	b, err := s.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, b.Real, "both entries in one batch")
	label := map[float32]float32{}
	for i := range b.Real {
		label[b.Dense[i]] = b.Labels[i]
	}
	require.Equal(t, map[float32]float32{1: 1, 2: 0, 3: 0, 4: 1}, label)
}

// joinEvents adds TestJoin's impressions and clicks.
func joinEvents(t *testing.T, c *redis.Client) {
	ctx := context.Background()
	add := func(stream, id string, values ...any) {
		require.NoError(t, c.XAdd(ctx, &redis.XAddArgs{Stream: stream, ID: id, Values: values}).Err())
	}
	imp := func(id, req string, x int) { add("{j}:imp", id, "request", req, "x", x, "c", "7") }
	click := func(id, req string) { add("{j}:click", id, "request", req) }
	imp("1000-0", "a", 1)
	imp("1010-0", "b", 2)
	imp("1020-0", "c", 3)
	click("1050-0", "a")  // within a's window: positive
	click("1060-0", "a")  // again: repeated
	click("1070-0", "zz") // never shown: unknown
	click("1150-0", "c")  // c's window closed at 1120: c negative, this click late
	imp("1300-0", "d", 4)
	click("1310-0", "d") // positive
}

// An impression waits while the clicks stream lags behind it: nothing
// is added before both streams have passed its window.
func TestJoinWaitsForBothStreams(t *testing.T) {
	c := startRedis(t)
	ctx := context.Background()
	require.NoError(t, c.XAdd(ctx, &redis.XAddArgs{Stream: "{j}:imp", ID: "*", Values: []any{"request", "a", "x", 1}}).Err())
	j, err := NewJoin(c, JoinOptions{Impressions: "{j}:imp", Clicks: "{j}:click", Out: "{j}:out", Window: time.Hour})
	require.NoError(t, err)
	n, err := j.Step(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "the window of an hour is open")
	require.NoError(t, c.XAdd(ctx, &redis.XAddArgs{Stream: "{j}:click", ID: "*", Values: []any{"request", "a"}}).Err())
	n, err = j.Step(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, int64(1), j.Stats().Positives)
}

// Past MaxOpen waiting impressions the oldest is added as a negative.
func TestJoinMaxOpen(t *testing.T) {
	c := startRedis(t)
	ctx := context.Background()
	for k := range 5 {
		require.NoError(t, c.XAdd(ctx, &redis.XAddArgs{Stream: "{j}:imp", ID: "*", Values: []any{"request", string(rune('a' + k)), "x", k}}).Err())
	}
	j, err := NewJoin(c, JoinOptions{Impressions: "{j}:imp", Clicks: "{j}:click", Out: "{j}:out", Window: time.Hour, MaxOpen: 3})
	require.NoError(t, err)
	n, err := j.Step(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, JoinStats{Impressions: 5, Negatives: 2, Early: 2}, j.Stats())
}

func TestNewJoinOptions(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, o := range []JoinOptions{
		{Clicks: "c", Out: "o", Window: time.Second},
		{Impressions: "i", Out: "o", Window: time.Second},
		{Impressions: "i", Clicks: "c", Window: time.Second},
		{Impressions: "i", Clicks: "c", Out: "o"},
		{Impressions: "i", Clicks: "c", Out: "o", Window: time.Second, MaxOpen: -1},
		{Impressions: "i", Clicks: "c", Out: "o", Window: time.Second, ClicksFrom: "x"},
	} {
		_, err := NewJoin(c, o)
		require.ErrorIs(t, err, errs.ErrOption, "%+v", o)
	}
}
