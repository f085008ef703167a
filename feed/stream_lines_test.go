package feed

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// linesOptions are streamOptions for entries of several examples, as
// lines in the field "ex".
func linesOptions(consumer string) StreamOptions {
	o := streamOptions(consumer)
	o.Lines = "ex"
	return o
}

// exampleLine is example k as a line of streamSchema: label k%2, x k,
// the ids k and k+1 (none for k%5 == 4).
func exampleLine(k int) string {
	bag := fmt.Sprintf("%d|%d", k, k+1)
	if k%5 == 4 {
		bag = ""
	}
	return fmt.Sprintf("%d\t%d\t%s", k%2, k, bag)
}

// addLines adds an entry of the given lines and returns its id.
func addLines(t *testing.T, c redis.UniversalClient, lines ...string) string {
	id, err := c.XAdd(context.Background(), &redis.XAddArgs{Stream: "{clicks}", Values: []any{"ex", strings.Join(lines, "\n") + "\n", "other", "skipped"}}).Result()
	require.NoError(t, err)
	return id
}

// examples are a run of batches' real examples, to compare.
type examples struct {
	labels, dense []float32
	lens, ids     []int64
}

func (e *examples) add(b *Batch) {
	e.labels = append(e.labels, b.Labels[:b.Real]...)
	e.dense = append(e.dense, b.Dense[:b.Real*b.DenseDim]...)
	e.lens = append(e.lens, b.Sparse.Lengths[:b.Real]...)
	n := int64(0)
	for _, l := range b.Sparse.Lengths[:b.Real] {
		n += l
	}
	e.ids = append(e.ids, b.Sparse.Values[:n]...)
}

// Entries of several lines become batches, each line read as the same
// line of a file is, a batch ending within an entry where it is full.
func TestStreamLines(t *testing.T) {
	c := startRedis(t)
	ctx := context.Background()
	var lines []string
	for k := range 11 {
		lines = append(lines, exampleLine(k))
	}
	sizes := []int{3, 1, 2, 4, 1}
	var ids []string
	at := 0
	for _, n := range sizes {
		ids = append(ids, addLines(t, c, lines[at:at+n]...))
		at += n
	}
	s, err := OpenStream(ctx, c, streamSchema, linesOptions("w"))
	require.NoError(t, err)
	var got examples
	for k, want := range []struct {
		real int
		ids  []string
	}{{4, ids[:2]}, {4, ids[2:4]}, {3, ids[3:]}} {
		b, err := s.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, want.real, b.Real, "batch %d", k)
		require.Equal(t, want.ids, s.IDs(), "batch %d", k)
		for i := b.Real; i < 4; i++ {
			require.Zero(t, b.Weights[i])
		}
		got.add(b)
	}
	r, err := Open([]string{writeFile(t, "x.tsv", lines, "")}, streamSchema, Options{Batch: len(lines)})
	require.NoError(t, err)
	defer r.Close()
	b, err := r.Next(ctx)
	require.NoError(t, err)
	var file examples
	file.add(b)
	require.Equal(t, file, got, "the examples a file of the same lines holds")
	require.NoError(t, s.Ack(ctx))
	lag, pending, err := s.Lag(ctx)
	require.NoError(t, err)
	require.Equal(t, [2]int64{0, 0}, [2]int64{lag, pending})
}

// An entry with a malformed line, of more lines than a batch, or with no
// lines is malformed: an error naming the entry, its line and field, or,
// within MaxBad, skipped whole.
func TestStreamLinesMalformed(t *testing.T) {
	c := startRedis(t)
	ctx := context.Background()
	good1 := addLines(t, c, exampleLine(0), exampleLine(1))
	bad := addLines(t, c, exampleLine(2), "yes\t3\t", exampleLine(4))
	good2 := addLines(t, c, exampleLine(5))
	long := addLines(t, c, exampleLine(6), exampleLine(7), exampleLine(8), exampleLine(9), exampleLine(10))
	empty, err := c.XAdd(ctx, &redis.XAddArgs{Stream: "{clicks}", Values: []any{"other", "no ex"}}).Result()
	require.NoError(t, err)
	good3 := addLines(t, c, exampleLine(11))

	s, err := OpenStream(ctx, c, streamSchema, linesOptions("strict"))
	require.NoError(t, err)
	_, err = s.Next(ctx)
	var le *LineError
	require.ErrorAs(t, err, &le)
	require.ErrorIs(t, err, ErrFormat)
	require.Equal(t, LineError{File: "{clicks}", Entry: bad, Line: 2, Column: 1, Name: "label", Msg: le.Msg}, *le)
	require.Contains(t, err.Error(), "entry "+bad+": line 2: column 1 (label)")

	o := linesOptions("lenient")
	o.Group, o.MaxBad = "lenient", 3
	s, err = OpenStream(ctx, c, streamSchema, o)
	require.NoError(t, err)
	var got examples
	var gotIDs []string
	b, err := s.Next(ctx)
	require.NoError(t, err)
	got.add(b)
	gotIDs = append(gotIDs, s.IDs()...)
	require.Equal(t, []string{good1, good2, good3}, gotIDs)
	require.Equal(t, []float32{0, 1, 5, 11}, got.dense, "the malformed entries' lines in no batch")
	require.Equal(t, 3, s.Bad())
	require.NoError(t, s.Ack(ctx))
	pending, err := c.XPending(ctx, "{clicks}", "lenient").Result()
	require.NoError(t, err)
	require.Zero(t, pending.Count, "the skipped entries acknowledged")
	for _, e := range []struct{ id, msg string }{{long, "5 lines, more than a Batch (4)"}, {empty, `no examples (field "ex" missing or empty)`}} {
		msgs, err := c.XRange(ctx, "{clicks}", e.id, e.id).Result()
		require.NoError(t, err)
		_, _, msg := s.parse(msgs[0])
		require.Equal(t, e.msg, msg)
	}
}

// An entry a batch ends within counts as trained once its last lines
// are: its lines trained before are in the State, and a Stream restored
// from it trains the others.
func TestStreamLinesSplit(t *testing.T) {
	c := startRedis(t)
	ctx := context.Background()
	var lines []string
	for k := range 7 {
		lines = append(lines, exampleLine(k))
	}
	e0, e1, e2 := addLines(t, c, lines[:3]...), addLines(t, c, lines[3:6]...), addLines(t, c, lines[6:]...)
	s, err := OpenStream(ctx, c, streamSchema, linesOptions("w"))
	require.NoError(t, err)
	b, err := s.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, b.Real)
	require.Equal(t, []string{e0, e1}, s.IDs())
	require.Equal(t, []float32{0, 1, 2, 3}, b.Dense[:4])
	state, err := s.State()
	require.NoError(t, err)
	part := state["stream.part"].Data().([]int64)
	require.Equal(t, e1, fmt.Sprintf("%d-%d", part[0], part[1]), "the entry partly trained")
	require.Equal(t, int64(1), part[2], "its one line trained")
	require.NoError(t, s.Ack(ctx))
	pending, err := c.XPending(ctx, "{clicks}", "trainers").Result()
	require.NoError(t, err)
	require.Equal(t, int64(2), pending.Count, "the entry partly trained, and the one read ahead, not acknowledged")

	for _, restored := range []bool{false, true} {
		r, err := OpenStream(ctx, c, streamSchema, linesOptions("w"))
		require.NoError(t, err)
		if restored {
			require.NoError(t, r.SetState(denseState(t, state)))
		}
		b, err = r.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{e1, e2}, r.IDs(), "restored %v", restored)
		want := []float32{3, 4, 5, 6}
		if restored {
			want = []float32{4, 5, 6}
		}
		require.Equal(t, want, b.Dense[:b.Real], "restored %v: the lines of e1 not in the state, then e2's", restored)
	}
}

// FuzzStreamLines parses any text as an entry's lines after a good
// entry: its examples, or what is wrong with it and the block as it was.
func FuzzStreamLines(f *testing.F) {
	f.Add("1\t2\t3|4\n0\t\t\n")
	f.Add("1\t2\t3|4\nyes\t1\t2")
	f.Add("0\t1e400\t9223372036854775808\r\n\n")
	f.Fuzz(func(t *testing.T, text string) {
		lay, err := newLayout(streamSchema, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := &Stream{lay: lay, o: StreamOptions{Lines: "ex", Batch: 8}}
		s.blk.reset(len(lay.dense), len(lay.sparse), lay.weights)
		if _, _, msg := s.parse(redis.XMessage{ID: "1-1", Values: map[string]any{"ex": "1\t2\t3|4"}}); msg != "" {
			t.Fatal(msg)
		}
		m := redis.XMessage{ID: "1-2", Values: map[string]any{"ex": text}}
		line, _, msg := s.parse(m)
		b := &s.blk
		want := 1 + s.lines(m)
		if msg != "" {
			want = 1
			if line < 0 || line > s.lines(m) {
				t.Fatalf("%q: line %d of %d", msg, line, s.lines(m))
			}
		}
		if b.n != want || len(b.labels) != want || len(b.dense) != want || len(b.lens[0]) != want {
			t.Fatalf("%q: %d examples, %d labels, %d dense values, %d lengths, want %d", msg, b.n, len(b.labels), len(b.dense), len(b.lens[0]), want)
		}
		if msg != "" && (len(b.ids[0]) != 2 || b.ids[0][0] != 3 || b.ids[0][1] != 4) {
			t.Fatalf("%q: the first entry's ids now %v", msg, b.ids[0])
		}
	})
}
