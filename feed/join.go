package feed

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gathergrad/gather/internal/errs"
)

// JoinOptions configure a Join.
type JoinOptions struct {
	Impressions string // the stream of impressions: each entry a request's Key and the example's features
	Clicks      string // the stream of clicks (or any action): each entry a request's Key
	Out         string // the stream the labelled examples are added to (a Stream's)
	// The streams' positions to read after; "0" (the start) when "".
	ImpressionsFrom, ClicksFrom string
	Key                         string // the field naming the request in both streams; "request" when ""
	Label                       string // the field of Out holding 1 or 0; "label" when ""
	// Window is how long after its impression a click makes the
	// example positive, by the times in the entries' ids (milliseconds,
	// which XADD * gives as the server's clock): an impression not
	// clicked within it is added as a negative once both streams have
	// passed its end.
	Window time.Duration
	// MaxOpen bounds the impressions waiting (1<<20 when 0): past it the
	// oldest is added as a negative early (counted by Early).
	MaxOpen int
	// Count is the entries a Step reads from each stream (1,000 when 0).
	Count int
	// Lines, if not empty, makes each entry of Out several examples, as
	// a Stream with StreamOptions.Lines "lines" reads them: in its field
	// "lines", one example a line, the impression's fields named here (the
	// label's too, Label) in this order, separated by tabs, at most Pack
	// (64 when 0) an entry. An impression with a field holding a tab, a
	// newline or a carriage return is dropped (counted by Unfit).
	Lines []string
	Pack  int
}

// JoinStats count what a Join did.
type JoinStats struct {
	Impressions, Clicks  int64
	Positives, Negatives int64 // examples added to Out
	Late                 int64 // clicks after their impression's window closed (its example added as a negative)
	Unknown              int64 // clicks of a request whose impression the Join has not seen (or long closed)
	Repeated             int64 // clicks of a request already added as a positive
	Early                int64 // negatives added before their window closed, for MaxOpen
	Unfit                int64 // impressions dropped, with Lines, for a field that cannot be one of a line
}

// A Join is Monolith's online joiner on Redis Streams: it reads a stream
// of impressions (a request's features) and a stream of clicks, in the
// order of their entries' times, and adds to Out each impression as a
// labelled example: 1 when a click of its request comes within Window of
// it, else 0 once the window has closed on both streams. A click that
// comes later is counted (Late); one for a request it never saw too
// (Unknown).
//
// Its window is in memory, bounded by MaxOpen. Each impression is added
// to Out once in a run; the positions of the streams read so far (At)
// start another Join, which adds again the examples of the impressions
// that were open when the first stopped: after a crash an example may
// be added twice, never lost. It is not safe for concurrent use.
type Join struct {
	c       redis.UniversalClient
	o       JoinOptions
	imps    []redis.XMessage // read, not yet joined
	clks    []redis.XMessage
	impAt   string // the last id read of each stream
	clkAt   string
	open    map[string]*impression
	order   []*impression // the open impressions and those closed within a window, by time
	first   int           // the first of order whose window is open
	waiting int           // the impressions not yet added
	closed  map[string]entryTime
	stats   JoinStats
	pending []redis.XMessage // the examples to add, with their label
}

// An impression is one waiting for its click.
type impression struct {
	key    string
	at     entryTime
	values map[string]any
	done   bool // added to Out
}

// An entryTime is a stream entry's id: its milliseconds and sequence.
type entryTime struct{ ms, seq uint64 }

func (a entryTime) before(b entryTime) bool { return a.ms < b.ms || a.ms == b.ms && a.seq < b.seq }

// NewJoin returns a Join of o's streams.
func NewJoin(c redis.UniversalClient, o JoinOptions) (*Join, error) {
	switch {
	case c == nil:
		return nil, fmt.Errorf("feed: NewJoin needs a Redis client: %w", errs.ErrOption)
	case o.Impressions == "" || o.Clicks == "" || o.Out == "":
		return nil, fmt.Errorf("feed: JoinOptions need the Impressions, Clicks and Out streams: %w", errs.ErrOption)
	case o.Window <= 0 || o.MaxOpen < 0 || o.Count < 0 || o.Pack < 0:
		return nil, fmt.Errorf("feed: JoinOptions %+v: a Window above 0, no negative count: %w", o, errs.ErrOption)
	}
	for _, from := range []string{o.ImpressionsFrom, o.ClicksFrom} {
		if _, _, ok := parseEntryID(from); from != "" && from != "0" && !ok {
			return nil, fmt.Errorf("feed: JoinOptions: position %q is not an entry id: %w", from, errs.ErrOption)
		}
	}
	if o.Key == "" {
		o.Key = "request"
	}
	if o.Label == "" {
		o.Label = "label"
	}
	if o.MaxOpen == 0 {
		o.MaxOpen = 1 << 20
	}
	if o.Count == 0 {
		o.Count = 1000
	}
	if o.Pack == 0 {
		o.Pack = 64
	}
	j := &Join{c: c, o: o, impAt: o.ImpressionsFrom, clkAt: o.ClicksFrom, open: map[string]*impression{}, closed: map[string]entryTime{}}
	if j.impAt == "" {
		j.impAt = "0"
	}
	if j.clkAt == "" {
		j.clkAt = "0"
	}
	return j, nil
}

// Stats returns what the Join did so far.
func (j *Join) Stats() JoinStats { return j.stats }

// At returns the last entry read of each stream, JoinOptions'
// ImpressionsFrom and ClicksFrom of a Join that goes on from here.
func (j *Join) At() (impressions, clicks string) { return j.impAt, j.clkAt }

// Step reads what the streams hold after the Join's positions (at most
// Count entries each), joins the entries up to the time both have
// reached, and adds the examples whose label is known to Out. It returns
// how many it added.
func (j *Join) Step(ctx context.Context) (int, error) {
	dryImp, err := j.read(ctx, j.o.Impressions, &j.impAt, &j.imps)
	if err != nil {
		return 0, err
	}
	dryClk, err := j.read(ctx, j.o.Clicks, &j.clkAt, &j.clks)
	if err != nil {
		return 0, err
	}
	// Both streams are complete up to the earlier of their last entries
	// read; a stream that had nothing more is complete up to now, as an
	// entry added later has a later time.
	var now entryTime
	if dryImp || dryClk {
		t, err := j.c.Time(ctx).Result()
		if err != nil {
			return 0, fmt.Errorf("feed: join: the server's time: %w", err)
		}
		now = entryTime{ms: uint64(t.UnixMilli())}
	}
	mark := now
	if !dryImp {
		mark = lastTime(j.imps)
	}
	if !dryClk {
		if t := lastTime(j.clks); dryImp || t.before(mark) {
			mark = t
		}
	}
	for {
		var m redis.XMessage
		var imp bool
		switch {
		case len(j.imps) > 0 && (len(j.clks) == 0 || !timeOf(j.clks[0]).before(timeOf(j.imps[0]))):
			m, imp = j.imps[0], true
		case len(j.clks) > 0:
			m = j.clks[0]
		}
		if m.ID == "" || mark.before(timeOf(m)) {
			break
		}
		j.expire(timeOf(m)) // the windows closed before m first
		if imp {
			j.imps = j.imps[1:]
			j.impression(m)
		} else {
			j.clks = j.clks[1:]
			j.click(m)
		}
	}
	j.expire(mark)
	return j.flush(ctx)
}

// read appends the entries of stream after *at to *into, at most Count,
// moving *at, and reports whether it had none.
func (j *Join) read(ctx context.Context, stream string, at *string, into *[]redis.XMessage) (bool, error) {
	if len(*into) >= j.o.Count {
		return false, nil
	}
	res, err := j.c.XRead(ctx, &redis.XReadArgs{Streams: []string{stream, *at}, Count: int64(j.o.Count), Block: -1}).Result()
	if errors.Is(err, redis.Nil) || err == nil && (len(res) == 0 || len(res[0].Messages) == 0) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("feed: join: reading %s: %w", stream, err)
	}
	msgs := res[0].Messages
	*into = append(*into, msgs...)
	*at = msgs[len(msgs)-1].ID
	return false, nil
}

func (j *Join) impression(m redis.XMessage) {
	j.stats.Impressions++
	key, _ := m.Values[j.o.Key].(string)
	if _, dup := j.open[key]; dup || key == "" {
		return // a request shown twice: its first impression counts
	}
	for _, f := range j.o.Lines {
		if v, _ := m.Values[f].(string); f != j.o.Label && strings.ContainsAny(v, "\t\n\r") {
			j.stats.Unfit++
			return
		}
	}
	imp := &impression{key: key, at: timeOf(m), values: m.Values}
	j.open[key] = imp
	j.order = append(j.order, imp)
	if j.waiting++; j.waiting > j.o.MaxOpen {
		for _, o := range j.order[j.first:] {
			if !o.done {
				j.stats.Early++
				j.emit(o, 0)
				break
			}
		}
	}
}

func (j *Join) click(m redis.XMessage) {
	j.stats.Clicks++
	key, _ := m.Values[j.o.Key].(string)
	imp, ok := j.open[key]
	switch {
	case ok && !imp.done:
		j.emit(imp, 1)
	case ok && imp.done && j.closed[key] == imp.at:
		j.stats.Late++
	case ok:
		j.stats.Repeated++
	default:
		j.stats.Unknown++
	}
}

// emit adds imp's example with label to those to add.
func (j *Join) emit(imp *impression, label int) {
	imp.done = true
	j.waiting--
	if label == 1 {
		j.stats.Positives++
	} else {
		j.stats.Negatives++
		j.closed[imp.key] = imp.at
	}
	values := make(map[string]any, len(imp.values)+1)
	for k, v := range imp.values {
		values[k] = v
	}
	values[j.o.Label] = strconv.Itoa(label)
	j.pending = append(j.pending, redis.XMessage{Values: values})
}

// expire adds as negatives the open impressions whose window closed
// before t, and forgets those closed a window before that.
func (j *Join) expire(t entryTime) {
	w := uint64(j.o.Window.Milliseconds())
	for ; j.first < len(j.order) && j.order[j.first].at.ms+w < t.ms; j.first++ {
		if imp := j.order[j.first]; !imp.done {
			j.emit(imp, 0)
		}
	}
	k := 0
	for k < len(j.order) && j.order[k].at.ms+2*w < t.ms { // kept a window more, for late clicks
		delete(j.open, j.order[k].key)
		delete(j.closed, j.order[k].key)
		k++
	}
	j.order, j.first = j.order[k:], j.first-k
}

// flush adds the pending examples to Out.
func (j *Join) flush(ctx context.Context) (int, error) {
	n := len(j.pending)
	if n == 0 {
		return 0, nil
	}
	p := j.c.Pipeline()
	if len(j.o.Lines) == 0 {
		for _, m := range j.pending {
			p.XAdd(ctx, &redis.XAddArgs{Stream: j.o.Out, Values: m.Values})
		}
	}
	for at := 0; len(j.o.Lines) > 0 && at < n; at += j.o.Pack {
		var b []byte
		for _, m := range j.pending[at:min(n, at+j.o.Pack)] {
			for k, f := range j.o.Lines {
				if k > 0 {
					b = append(b, '\t')
				}
				v, _ := m.Values[f].(string)
				b = append(b, v...)
			}
			b = append(b, '\n')
		}
		p.XAdd(ctx, &redis.XAddArgs{Stream: j.o.Out, Values: []any{"lines", string(b)}})
	}
	if _, err := p.Exec(ctx); err != nil {
		return 0, fmt.Errorf("feed: join: adding %d examples to %s: %w", n, j.o.Out, err)
	}
	j.pending = j.pending[:0]
	return n, nil
}

func timeOf(m redis.XMessage) entryTime {
	ms, seq, _ := parseEntryID(m.ID)
	return entryTime{ms, seq}
}

func lastTime(ms []redis.XMessage) entryTime { return timeOf(ms[len(ms)-1]) }
