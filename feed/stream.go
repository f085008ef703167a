package feed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
)

// StreamOptions configure a Stream.
type StreamOptions struct {
	Stream   string // the stream's key (on a Redis Cluster, one slot: a key with a hash tag, "{clicks}")
	Group    string // the consumer group, made at From if the stream has none of that name
	Consumer string // this worker's name in the group: a worker restarted under it reads its own pending entries first
	// From is where a new group starts: "0" (the default) every entry
	// of the stream, "$" the entries added after.
	From  string
	Batch int // the examples of a batch
	// Linger bounds how long Next waits for the rest of a batch once it
	// holds an example (100 ms when 0); the rest is padding of weight 0.
	Linger time.Duration
	// Wait bounds one blocking read of the server (50 ms when 0; in
	// whole milliseconds, at least one): the context is checked between
	// reads, since a cancelled context does not end a blocking read.
	Wait time.Duration
	// ClaimIdle, if above 0, makes Next take over the entries another
	// consumer of the group has held unacknowledged this long
	// (XAUTOCLAIM): the entries of a worker gone for good. Set it well
	// above the time a worker takes to restart: a worker that comes back
	// after its entries were claimed has, in its model, those it had
	// trained, and the claimer trains them again.
	ClaimIdle time.Duration
	// MaxBad is how many malformed entries Next skips (and acknowledges
	// with the batch), counted by Bad; one more is an error.
	MaxBad int
	// MaxUnacked bounds the entries trained between two Acks (8 batches
	// when 0): Next refuses a batch past it, and State holds that many
	// entry ids whatever the number trained, since a checkpoint's tensors
	// keep their shapes.
	MaxUnacked int
	// Name names the part's tensors ("<Name>.trained", "<Name>.of");
	// "stream" when "".
	Name string
	// Lines, if not "", names the field of each entry that holds its
	// examples, several to an entry: lines (ended by "\n", the last one's
	// optional) of the schema's fields in its columns' order, separated
	// by its Delimiter, as a file of the schema holds them (no header).
	// A batch may end within an entry: the rest of its lines begin the
	// next batch, IDs names it in both, and it counts as trained (State,
	// Ack) once all its lines are, the lines trained before kept in State
	// as a part of the entry. An entry of more lines than a Batch is
	// malformed, and so is an entry with a malformed line (skipped whole,
	// for MaxBad). Packing
	// examples spares the server and the client most of the work an
	// entry costs them; when "", each entry is one example, its fields
	// named by the schema's columns.
	Lines string
}

// A Stream reads the examples of a Redis Stream, through a consumer
// group, into Batches: each entry one example, its fields named by the
// schema's columns (other fields are skipped; a missing field is empty),
// parsed as a line's fields are; or, with StreamOptions.Lines, several
// examples an entry, as lines of a file. Several workers of one group
// each receive their own entries.
//
// Each entry is trained once in a model across crashes when the program
// follows the order a Stream is made for: Next, train on the batch, save
// the model with the Stream (it is a checkpoint.Part: its State is the
// entries trained since the last Ack), then Ack. A worker restarted from
// its last checkpoint under the same Consumer reads its pending entries
// again: those its restored state holds (trained, and in the model, but
// perhaps not acknowledged) are acknowledged and skipped, the others
// trained, in the order they were first read; so one worker's model
// equals an uninterrupted run's over the same entries. For tables on a
// Redis Cluster, whose steps land when they are taken, Ack after each
// step instead: an entry is then trained at least once, and at most
// once more after a crash between the step and the Ack.
//
// As Next returns a batch it reads the next batch's new entries, which
// are then this consumer's: with several workers, how many each trains
// depends on who reads first, and a worker that stops calling Next
// leaves them pending (ClaimIdle).
//
// It is not safe for concurrent use.
type Stream struct {
	c   redis.UniversalClient
	o   StreamOptions
	lay *layout
	asm *batcher
	blk block
	cur []redis.XMessage // the entries of the batch being made
	ids []string         // their ids

	queue   []redis.XMessage // read, not yet taken
	per     int              // the examples of the last entry taken (Lines), for how many entries to read
	partID  string           // with Lines, the entry whose first part lines a batch returned has trained
	part    int
	own     bool // reading this consumer's pending entries (from ownAt), not new ones
	ownAt   string
	claimAt string // where the next XAUTOCLAIM starts
	claimed time.Time

	ahead chan readResult // the read of new entries started as Next returned, if any

	trained []string        // the entries of the batches Next returned since the last Ack
	skipped []string        // malformed entries skipped, acknowledged with the next Ack
	covered map[string]bool // the restored state's entries, skipped if read again
	bad     int
	err     error
}

// OpenStream returns a Stream of the entries of o.Stream for consumer
// o.Consumer of group o.Group, making the group (at o.From) if the
// stream has none, and the stream if it does not exist. A schema that
// cannot be read or bad options are errors wrapping gather.ErrOption;
// the server's errors are returned as they are.
func OpenStream(ctx context.Context, c redis.UniversalClient, s Schema, o StreamOptions) (*Stream, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	switch {
	case c == nil:
		return nil, fmt.Errorf("feed: OpenStream needs a Redis client: %w", errs.ErrOption)
	case o.Stream == "" || o.Group == "" || o.Consumer == "":
		return nil, fmt.Errorf("feed: StreamOptions need a Stream, a Group and a Consumer (%q, %q, %q): %w", o.Stream, o.Group, o.Consumer, errs.ErrOption)
	case o.Batch <= 0:
		return nil, fmt.Errorf("feed: StreamOptions.Batch %d: a batch holds at least 1 example: %w", o.Batch, errs.ErrOption)
	case o.Linger < 0 || o.Wait < 0 || o.ClaimIdle < 0 || o.MaxBad < 0 || o.MaxUnacked < 0:
		return nil, fmt.Errorf("feed: StreamOptions %+v: a negative duration or count: %w", o, errs.ErrOption)
	case o.From != "" && o.From != "0" && o.From != "$":
		return nil, fmt.Errorf("feed: StreamOptions.From %q: \"0\" or \"$\": %w", o.From, errs.ErrOption)
	}
	if o.From == "" {
		o.From = "0"
	}
	if o.Linger == 0 {
		o.Linger = 100 * time.Millisecond
	}
	if o.Wait == 0 {
		o.Wait = 50 * time.Millisecond
	}
	if o.Name == "" {
		o.Name = "stream"
	}
	if o.MaxUnacked == 0 {
		o.MaxUnacked = 8 * o.Batch
	}
	if o.MaxUnacked < o.Batch {
		return nil, fmt.Errorf("feed: StreamOptions.MaxUnacked %d is less than a Batch of %d: %w", o.MaxUnacked, o.Batch, errs.ErrOption)
	}
	s.Header = false // an entry's fields are found by name
	lay, err := newLayout(s, nil)
	if err != nil {
		return nil, fmt.Errorf("feed: %w", err)
	}
	err = c.XGroupCreateMkStream(ctx, o.Stream, o.Group, o.From).Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return nil, fmt.Errorf("feed: stream %s: making group %q: %w", o.Stream, o.Group, err)
	}
	return &Stream{c: c, o: o, lay: lay, asm: newBatcher(lay, o.Batch), per: 1, own: true, ownAt: "0", claimAt: "0-0"}, nil
}

// Next returns the next batch: it waits for an entry as long as ctx
// allows, and then at most Linger for the rest of the batch, which is
// padded with examples of weight 0 (Batch.Real). A malformed entry
// beyond MaxBad is a *LineError naming the stream, the entry and the
// field, wrapping ErrFormat; after it, and after a server's error, Next
// returns the error again (restart from the last checkpoint). A batch
// that would pass MaxUnacked is refused (gather.ErrOption) until Ack.
// The batch is the Stream's, valid until the next call.
func (s *Stream) Next(ctx context.Context) (*Batch, error) {
	if s.err != nil {
		return nil, s.err
	}
	if len(s.trained)+s.o.Batch > s.o.MaxUnacked {
		return nil, fmt.Errorf("feed: stream %s: %d entries trained since the last Ack, and a batch more passes MaxUnacked (%d): Ack after saving: %w",
			s.o.Stream, len(s.trained), s.o.MaxUnacked, errs.ErrOption)
	}
	b, err := s.next(ctx)
	if err != nil && ctx.Err() == nil {
		s.err = err
	}
	return b, err
}

func (s *Stream) next(ctx context.Context) (*Batch, error) {
	nd, ns := len(s.lay.dense), len(s.lay.sparse)
	s.blk.reset(nd, ns, s.lay.weights)
	s.cur, s.ids = s.cur[:0], s.ids[:0]
	taken := 0 // of the queue
	partID, part := s.partID, s.part
	var deadline time.Time
	for s.blk.n < s.o.Batch {
		if taken == len(s.queue) {
			s.queue, taken = s.queue[:copy(s.queue, s.queue[taken:])], 0
			if s.ahead != nil { // the read started as the last batch was returned
				r := <-s.ahead
				s.ahead = nil
				if r.err != nil {
					return nil, s.putBack(r.err)
				}
				s.queue = append(s.queue, r.msgs...)
				continue
			}
			wait := s.o.Wait
			if s.blk.n > 0 {
				if wait = time.Until(deadline); wait <= 0 {
					break
				}
				wait = min(wait, s.o.Wait)
			}
			if err := ctx.Err(); err != nil {
				return nil, s.putBack(err)
			}
			if err := s.read(ctx, s.entries(s.o.Batch-s.blk.n), wait); err != nil {
				return nil, s.putBack(err)
			}
			continue
		}
		m := s.queue[taken]
		taken++
		if s.covered[m.ID] {
			continue // trained before the restart, acknowledged with the restored state's entries
		}
		start := s.blk.n
		if line, col, msg := s.parse(m); msg != "" {
			if s.bad >= s.o.MaxBad {
				name := ""
				if col > 0 {
					name = s.lay.fields[col-1].name
				}
				return nil, &LineError{File: s.o.Stream, Entry: m.ID, Line: int64(line), Column: col, Name: name, Msg: msg}
			}
			s.bad++
			s.skipped = append(s.skipped, m.ID)
			continue
		}
		done := 0 // the entry's lines trained before
		if m.ID == s.partID {
			if done = s.part; done >= s.blk.n-start {
				return nil, s.putBack(fmt.Errorf("feed: stream %s: entry %s has %d lines, and %d of them are trained: %w", s.o.Stream, m.ID, s.blk.n-start, done, ErrMismatch))
			}
			s.blk.drop(start, done, nd)
			partID, part = "", 0
		}
		if s.blk.n > s.o.Batch { // the entry's first lines end this batch, the rest begin the next
			s.blk.drop(s.o.Batch, s.blk.n-s.o.Batch, nd)
			taken--
			s.ids = append(s.ids, m.ID)
			partID, part = m.ID, done+s.o.Batch-start
			break
		}
		s.cur, s.ids = append(s.cur, m), append(s.ids, m.ID)
		if deadline.IsZero() {
			deadline = time.Now().Add(s.o.Linger)
		}
	}
	s.queue = s.queue[:copy(s.queue, s.queue[taken:])]
	s.blk.finish()
	a := s.asm
	a.begin()
	for i := range s.blk.n {
		a.add(&s.blk, i)
	}
	for _, m := range s.cur {
		s.trained = append(s.trained, m.ID)
	}
	s.partID, s.part = partID, part
	queued := 0
	for _, m := range s.queue {
		queued += s.lines(m)
	}
	if !s.own && queued < s.o.Batch {
		// Read the next batch's entries while this one trains. The read
		// ends within Wait whatever ctx does; its entries are this
		// consumer's pending ones, read again after a restart.
		ch, rctx, n := make(chan readResult, 1), context.WithoutCancel(ctx), s.entries(s.o.Batch-queued)
		go func() {
			msgs, err := s.readNew(rctx, n, s.o.Wait)
			ch <- readResult{msgs, err}
		}()
		s.ahead = ch
	}
	return a.end(0), nil
}

// A readResult is what a read of new entries returned.
type readResult struct {
	msgs []redis.XMessage
	err  error
}

// readNew returns at most n entries not yet delivered to the group,
// waiting at most wait for them. It touches nothing of s but its
// options and client, so that it may run beside Next.
func (s *Stream) readNew(ctx context.Context, n int, wait time.Duration) ([]redis.XMessage, error) {
	// BLOCK counts whole milliseconds, and BLOCK 0 waits for ever: a
	// wait shorter than a millisecond waits one.
	return s.readGroup(ctx, ">", n, max(wait, time.Millisecond))
}

// readGroup returns at most n of the group's entries for this consumer
// from position from (">": new ones, waiting at most block; an id: its
// pending ones after it, block -1, not waiting).
func (s *Stream) readGroup(ctx context.Context, from string, n int, block time.Duration) ([]redis.XMessage, error) {
	o := s.o
	res, err := s.c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: o.Group, Consumer: o.Consumer, Streams: []string{o.Stream, from}, Count: int64(n), Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("feed: stream %s: reading the entries of %q after %s: %w", o.Stream, o.Consumer, from, err)
	}
	if len(res) == 0 {
		return nil, nil
	}
	return res[0].Messages, nil
}

// putBack returns err, the entries of the batch being made back in
// front of the queue: read, and not trained.
func (s *Stream) putBack(err error) error {
	s.queue = append(s.cur, s.queue...)
	s.cur, s.ids = nil, s.ids[:0]
	return err
}

// lines returns the examples entry m holds: with Lines, its lines; else 1.
func (s *Stream) lines(m redis.XMessage) int {
	if s.o.Lines == "" {
		return 1
	}
	text, _ := m.Values[s.o.Lines].(string)
	return strings.Count(strings.TrimSuffix(text, "\n"), "\n") + 1
}

// entries returns how many entries to read for n more examples, by the
// examples of the last entry taken.
func (s *Stream) entries(n int) int { return max(1, (n+s.per-1)/s.per) }

// parse appends entry m's examples to s.blk, or returns what is wrong
// with it: the line (from 1, with Lines; else 0) and the field as
// parseLine does, s.blk then as it was.
func (s *Stream) parse(m redis.XMessage) (int, int, string) {
	b := &s.blk
	if s.o.Lines != "" {
		return s.parseLines(m)
	}
	b.fields = b.fields[:0]
	for _, f := range s.lay.fields {
		v, _ := m.Values[f.name].(string)
		b.fields = append(b.fields, []byte(v))
	}
	if len(m.Values) == 0 {
		return 0, 0, "no fields (an entry deleted from the stream)"
	}
	col, msg := b.parseFields(s.lay)
	return 0, col, msg
}

// parseLines appends the examples of entry m's Lines field to s.blk.
func (s *Stream) parseLines(m redis.XMessage) (int, int, string) {
	b := &s.blk
	v, ok := m.Values[s.o.Lines]
	text, _ := v.(string)
	switch n := s.lines(m); {
	case len(m.Values) == 0:
		return 0, 0, "no fields (an entry deleted from the stream)"
	case !ok || text == "":
		return 0, 0, fmt.Sprintf("no examples (field %q missing or empty)", s.o.Lines)
	case n > s.o.Batch:
		return 0, 0, fmt.Sprintf("%d lines, more than a Batch (%d)", n, s.o.Batch)
	case !utf8.ValidString(text):
		return 0, 0, "bytes that are not UTF-8 text"
	default:
		s.per = n
	}
	start := b.n
	rest := []byte(strings.TrimSuffix(text, "\n"))
	for k := 1; ; k++ {
		line, more := rest, false
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest, more = rest[:i], rest[i+1:], true
		}
		if col, msg := b.parseLine(s.lay, bytes.TrimSuffix(line, []byte{'\r'})); msg != "" {
			b.drop(start, b.n-start, len(s.lay.dense))
			return k, col, msg
		}
		if !more {
			return 0, 0, ""
		}
	}
}

// read appends to the queue at most n entries: this consumer's pending
// ones first (after a restart), then, at most every ClaimIdle/2, those
// idle that long at other consumers, then new ones, waiting at most wait
// for them.
func (s *Stream) read(ctx context.Context, n int, wait time.Duration) error {
	o := s.o
	if s.own {
		msgs, err := s.readGroup(ctx, s.ownAt, n, -1)
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			s.own, s.covered = false, nil // every pending entry read: the restored ones are behind
			return nil
		}
		s.ownAt = msgs[len(msgs)-1].ID
		s.queue = append(s.queue, msgs...)
		return nil
	}
	if o.ClaimIdle > 0 && time.Since(s.claimed) >= o.ClaimIdle/2 {
		msgs, next, err := s.c.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: o.Stream, Group: o.Group, Consumer: o.Consumer, MinIdle: o.ClaimIdle, Start: s.claimAt, Count: int64(n)}).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("feed: stream %s: claiming idle entries: %w", o.Stream, err)
		}
		if s.claimAt = next; next == "0-0" {
			s.claimed = time.Now() // a pass over the pending entries ended
		}
		if len(msgs) > 0 {
			s.queue = append(s.queue, msgs...)
			return nil
		}
	}
	msgs, err := s.readNew(ctx, n, wait)
	s.queue = append(s.queue, msgs...)
	return err
}

// Ack acknowledges (XACK) the entries of every batch Next returned since
// the last Ack, and the malformed entries skipped: call it once the
// model that trained them is saved with the Stream's State (or, for
// tables on a Redis Cluster, once they are stepped). An acknowledged
// entry is not read again by any consumer of the group.
func (s *Stream) Ack(ctx context.Context) error {
	ids := append(s.trained, s.skipped...)
	for len(ids) > 0 {
		n := min(len(ids), 1000)
		if err := s.c.XAck(ctx, s.o.Stream, s.o.Group, ids[:n]...).Err(); err != nil {
			return fmt.Errorf("feed: stream %s: acknowledging %d entries: %w", s.o.Stream, len(ids), err)
		}
		ids = ids[n:]
	}
	s.trained, s.skipped = s.trained[:0], s.skipped[:0]
	return nil
}

// Close waits for the read of the next batch's entries that Next starts
// as it returns a batch, if one is running, and returns its error. The
// entries that read took are this consumer's pending ones: a Stream of
// the same consumer opened after Close reads them first; one opened
// before that read ends may pass its pending entries without them. The
// Stream is not used after Close.
func (s *Stream) Close() error {
	if s.ahead == nil {
		return nil
	}
	r := <-s.ahead
	s.ahead = nil
	return r.err
}

// IDs returns the entry ids of the last batch's real examples, in order.
func (s *Stream) IDs() []string { return s.ids }

// Bad returns the malformed entries skipped so far (MaxBad).
func (s *Stream) Bad() int { return s.bad }

// Lag returns the group's entries not yet delivered to any of its
// consumers, as XINFO GROUPS reports it (-1 when the server cannot say),
// and those delivered and not acknowledged (pending).
func (s *Stream) Lag(ctx context.Context) (lag, pending int64, err error) {
	gs, err := s.c.XInfoGroups(ctx, s.o.Stream).Result()
	if err != nil {
		return 0, 0, fmt.Errorf("feed: stream %s: %w", s.o.Stream, err)
	}
	for _, g := range gs {
		if g.Name == s.o.Group {
			return g.Lag, g.Pending, nil
		}
	}
	return 0, 0, fmt.Errorf("feed: stream %s has no group %q: %w", s.o.Stream, s.o.Group, ErrMismatch)
}

// fingerprint identifies the stream, group and consumer of a state.
func (s *Stream) fingerprint() int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%s", s.o.Stream, s.o.Group, s.o.Consumer)
	return int64(h.Sum64())
}

// State returns, as a checkpoint.Part's state, the entries trained since
// the last Ack: "<Name>.trained", int64 [MaxUnacked, 2], each id's
// milliseconds and sequence number, the first n rows used;
// "<Name>.of", int64 [2], the fingerprint of the stream, group and
// consumer and n; and with Lines "<Name>.part", int64 [3], the entry
// partly trained (its id's two numbers and the lines trained; 0s for
// none). Saved with the model after a batch trains, it keeps a
// restarted worker from training them again (SetState).
func (s *Stream) State() (map[string]tensor.Tensor, error) {
	v := make([]int64, 2*s.o.MaxUnacked)
	for k, id := range s.trained {
		ms, seq, ok := parseEntryID(id)
		if !ok {
			return nil, fmt.Errorf("feed: stream %s: entry id %q: %w", s.o.Stream, id, ErrFormat)
		}
		v[2*k], v[2*k+1] = int64(ms), int64(seq)
	}
	st := map[string]tensor.Tensor{
		s.o.Name + ".trained": tensor.New(tensor.WithShape(s.o.MaxUnacked, 2), tensor.WithBacking(v)),
		s.o.Name + ".of":      tensor.New(tensor.WithShape(2), tensor.WithBacking([]int64{s.fingerprint(), int64(len(s.trained))})),
	}
	if s.o.Lines != "" {
		part := []int64{0, 0, 0}
		if s.partID != "" {
			ms, seq, _ := parseEntryID(s.partID)
			part = []int64{int64(ms), int64(seq), int64(s.part)}
		}
		st[s.o.Name+".part"] = tensor.New(tensor.WithShape(3), tensor.WithBacking(part))
	}
	return st, nil
}

// SetState restores a state State returned, of a Stream of the same
// stream, group, consumer and MaxUnacked (else an error wrapping
// ErrMismatch, the Stream unchanged), before the first Next: its entries
// count as trained (the next Ack acknowledges them) and are skipped when
// this consumer's pending entries are read again.
func (s *Stream) SetState(ts map[string]*tensor.Dense) error {
	of, ok1 := ts[s.o.Name+".of"]
	t, ok2 := ts[s.o.Name+".trained"]
	switch {
	case !ok1 || !ok2 || of.Dtype() != tensor.Int64 || of.Shape().TotalSize() != 2 || t.Dtype() != tensor.Int64 || t.Dims() != 2 || t.Shape()[0] != s.o.MaxUnacked || t.Shape()[1] != 2:
		return fmt.Errorf("feed: no stream state %q (int64 [%d, 2]) and %q (int64 [2]): %w", s.o.Name+".trained", s.o.MaxUnacked, s.o.Name+".of", ErrMismatch)
	case of.Int64s()[0] != s.fingerprint():
		return fmt.Errorf("feed: the state is of another stream, group or consumer than %s, %q, %q: %w", s.o.Stream, s.o.Group, s.o.Consumer, ErrMismatch)
	case of.Int64s()[1] < 0 || of.Int64s()[1] > int64(s.o.MaxUnacked):
		return fmt.Errorf("feed: the state holds %d entries, not in [0, %d]: %w", of.Int64s()[1], s.o.MaxUnacked, ErrMismatch)
	case !s.own || s.ownAt != "0":
		return fmt.Errorf("feed: SetState after Next: %w", errs.ErrOption)
	}
	partID, part := "", 0
	if p, ok := ts[s.o.Name+".part"]; ok {
		if p.Dtype() != tensor.Int64 || p.Shape().TotalSize() != 3 || p.Int64s()[2] < 0 || p.Int64s()[2] > int64(s.o.Batch) {
			return fmt.Errorf("feed: stream state %q is not int64 [3] of an entry and at most a Batch (%d) of its lines: %w", s.o.Name+".part", s.o.Batch, ErrMismatch)
		}
		if pv := p.Int64s(); pv[2] > 0 {
			partID, part = strconv.FormatUint(uint64(pv[0]), 10)+"-"+strconv.FormatUint(uint64(pv[1]), 10), int(pv[2])
		}
	}
	v, n := t.Int64s(), int(of.Int64s()[1])
	trained := make([]string, 0, n)
	covered := make(map[string]bool, n)
	for k := range n {
		id := strconv.FormatUint(uint64(v[2*k]), 10) + "-" + strconv.FormatUint(uint64(v[2*k+1]), 10)
		trained = append(trained, id)
		covered[id] = true
	}
	s.trained, s.covered, s.partID, s.part = trained, covered, partID, part
	return nil
}

// parseEntryID returns the two numbers of a stream entry's id, "ms-seq".
func parseEntryID(id string) (ms, seq uint64, ok bool) {
	a, b, found := strings.Cut(id, "-")
	ms, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	return ms, seq, found && err1 == nil && err2 == nil
}
