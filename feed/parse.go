package feed

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/cespare/xxhash/v2"

	"github.com/gathergrad/gather/internal/errs"
)

// A layout is a schema as the fields of one file's lines.
type layout struct {
	fields  []field // one a field of the line, in order
	delim   []byte
	dense   []string // the Dense columns' names, in the schema's order
	sparse  []string // the Sparse columns' names
	weights bool     // the schema has Weight columns: every id has a weight
	weighed []bool   // by Sparse column, whether a Weight column weighs it
}

// A field is what one field of a line is read as.
type field struct {
	name    string
	role    Role
	slot    int // the column's index among the Dense or the Sparse columns (a Weight column's: its ids')
	fill    []byte
	hasFill bool
	tr      Transform
	ids     IDFormat
	modulo  uint64
	split   []byte
}

// newLayout returns the layout of s for a file whose header line is
// header (nil without Header).
func newLayout(s Schema, header []byte) (*layout, error) {
	l := &layout{delim: []byte(s.Delimiter)}
	if len(l.delim) == 0 {
		l.delim = []byte{'\t'}
	}
	slots := map[string]int{}
	for _, c := range s.Columns {
		switch c.Role {
		case Dense:
			slots[c.Name] = len(l.dense)
			l.dense = append(l.dense, c.Name)
		case Sparse:
			slots[c.Name] = len(l.sparse)
			l.sparse = append(l.sparse, c.Name)
		case Weight:
			l.weights = true
		}
	}
	l.weighed = make([]bool, len(l.sparse))
	for _, c := range s.Columns {
		if c.Role == Weight {
			l.weighed[slots[c.WeightOf]] = true
		}
	}
	fieldOf := func(c Column) field {
		f := field{name: c.Name, role: c.Role, fill: []byte(c.Fill), hasFill: c.Fill != "", tr: c.Transform, ids: c.IDs, modulo: c.Modulo, split: []byte(c.Split)}
		switch c.Role {
		case Dense, Sparse:
			f.slot = slots[c.Name]
		case Weight:
			f.slot = slots[c.WeightOf]
		}
		return f
	}
	if !s.Header {
		for _, c := range s.Columns {
			l.fields = append(l.fields, fieldOf(c))
		}
		return l, nil
	}
	byName := map[string]Column{}
	for _, c := range s.Columns {
		byName[c.Name] = c
	}
	seen := map[string]bool{}
	for _, name := range splitFields(header, l.delim, nil) {
		c, ok := byName[string(name)]
		if !ok {
			l.fields = append(l.fields, field{name: string(name), role: Skip})
			continue
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("the header names %q twice: %w", c.Name, errs.ErrOption)
		}
		seen[c.Name] = true
		l.fields = append(l.fields, fieldOf(c))
	}
	for _, c := range s.Columns {
		if c.Role != Skip && !seen[c.Name] {
			return nil, fmt.Errorf("the header (%q) has no column %q: %w", header, c.Name, errs.ErrOption)
		}
	}
	return l, nil
}

// splitFields appends the fields of line, separated by delim, to out.
func splitFields(line, delim []byte, out [][]byte) [][]byte {
	for {
		var k int
		if len(delim) == 1 {
			k = bytes.IndexByte(line, delim[0])
		} else {
			k = bytes.Index(line, delim)
		}
		if k < 0 {
			return append(out, line)
		}
		out = append(out, line[:k])
		line = line[k+len(delim):]
	}
}

// A block is the examples of a run of lines, by column.
type block struct {
	n        int       // examples
	labels   []float32 // [n]
	dense    []float32 // [n × dense]
	lens     [][]int32 // per sparse feature, [n]
	ids      [][]int64 // per sparse feature, the ids of its examples in order
	wts      [][]float32
	starts   [][]int    // per sparse feature, [n+1]: where each example's ids start
	bad      int        // malformed lines skipped
	firstBad *LineError // the first of them
	err      error      // what ends the block: a malformed line, a file's error
	// Scratch: a line's fields, and where the features' ids and weights
	// stood before it.
	fields          [][]byte
	before, wbefore []int
	// A Parquet row group's: its rows found malformed, the page read.
	rowBad []bool
	pq     pqPage
}

// reset empties b for a layout of nd dense and ns sparse features.
func (b *block) reset(nd, ns int, weights bool) {
	b.n, b.bad, b.firstBad, b.err = 0, 0, nil, nil
	b.labels, b.dense = b.labels[:0], b.dense[:0]
	for len(b.lens) < ns {
		b.lens, b.ids, b.wts, b.starts = append(b.lens, nil), append(b.ids, nil), append(b.wts, nil), append(b.starts, nil)
	}
	b.lens, b.ids, b.wts, b.starts = b.lens[:ns], b.ids[:ns], b.wts[:ns], b.starts[:ns]
	for f := range ns {
		b.lens[f], b.ids[f], b.wts[f] = b.lens[f][:0], b.ids[f][:0], b.wts[f][:0]
	}
}

// A LineError is a malformed line: the file, the line (from 1), the
// field (from 1, 0 for the line as a whole) and what is wrong; or a
// malformed entry of a Redis Stream: the stream, the entry, and the
// field or (with StreamOptions.Lines) the line and its field.
type LineError struct {
	File   string // for an entry of a Redis Stream (a Stream's), the stream's key
	Line   int64  // for an entry of a Redis Stream, its line (with StreamOptions.Lines) or 0
	Entry  string // for an entry of a Redis Stream, its id
	Column int
	Name   string // the column's name, "" for the line as a whole
	Msg    string
	offset int64 // the line's first byte in the file's text, for Line
}

func (e *LineError) Error() string {
	switch {
	case e.Entry != "" && e.Line == 0 && e.Column == 0:
		return fmt.Sprintf("feed: stream %s: entry %s: %s", e.File, e.Entry, e.Msg)
	case e.Entry != "" && e.Line == 0:
		return fmt.Sprintf("feed: stream %s: entry %s: field %s: %s", e.File, e.Entry, e.Name, e.Msg)
	case e.Entry != "" && e.Column == 0:
		return fmt.Sprintf("feed: stream %s: entry %s: line %d: %s", e.File, e.Entry, e.Line, e.Msg)
	case e.Entry != "":
		return fmt.Sprintf("feed: stream %s: entry %s: line %d: column %d (%s): %s", e.File, e.Entry, e.Line, e.Column, e.Name, e.Msg)
	}
	if e.Column == 0 {
		return fmt.Sprintf("feed: %s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("feed: %s:%d: column %d (%s): %s", e.File, e.Line, e.Column, e.Name, e.Msg)
}

// Unwrap returns ErrFormat.
func (e *LineError) Unwrap() error { return ErrFormat }

// parseLine appends the example of line to b, or returns what is wrong
// with it (the field from 1, 0 for the line), b then as it was.
func (b *block) parseLine(l *layout, line []byte) (col int, msg string) {
	b.fields = splitFields(line, l.delim, b.fields[:0])
	if len(b.fields) != len(l.fields) {
		return 0, fmt.Sprintf("%d fields, want %d", len(b.fields), len(l.fields))
	}
	return b.parseFields(l)
}

// parseFields appends the example of b.fields, one a field of l, to b,
// or returns what is wrong with it as parseLine does.
func (b *block) parseFields(l *layout) (col int, msg string) {
	nd, ns := len(l.dense), len(l.sparse)
	b.before, b.wbefore = b.before[:0], b.wbefore[:0]
	for s := range ns {
		b.before, b.wbefore = append(b.before, len(b.ids[s])), append(b.wbefore, len(b.wts[s]))
	}
	ndv := len(b.dense)
	b.dense = append(b.dense, make([]float32, nd)...)
	rollback := func() {
		b.dense = b.dense[:ndv]
		for s := range ns {
			b.ids[s], b.wts[s] = b.ids[s][:b.before[s]], b.wts[s][:b.wbefore[s]]
		}
	}
	var label float32
	for k, text := range b.fields {
		f := &l.fields[k]
		if f.role == Skip {
			continue
		}
		if len(text) == 0 && f.hasFill {
			text = f.fill
		}
		var bad string
		switch f.role {
		case Label, Dense:
			if len(text) == 0 {
				bad = "empty, and the column has no Fill"
				break
			}
			v, ok := parseNumber(text)
			if !ok {
				bad = fmt.Sprintf("%q is not a finite number", clip(text))
				break
			}
			if f.role == Label {
				label = float32(v)
				break
			}
			b.dense[ndv+f.slot] = f.dense(v)
		case Sparse:
			bad = b.appendIDs(f, text)
		case Weight:
			bad = b.appendWeights(f, text)
		}
		if bad != "" {
			rollback()
			return k + 1, bad
		}
	}
	if l.weights {
		for s := range ns {
			if !l.weighed[s] {
				for range len(b.ids[s]) - b.before[s] {
					b.wts[s] = append(b.wts[s], 1)
				}
				continue
			}
			if n, w := len(b.ids[s])-b.before[s], len(b.wts[s])-b.wbefore[s]; n != w {
				col := 0
				for k, f := range l.fields {
					if f.role == Weight && f.slot == s {
						col = k + 1
					}
				}
				rollback()
				return col, fmt.Sprintf("%d weights for %d ids of %q", w, n, l.sparse[s])
			}
		}
	}
	for s := range ns {
		b.lens[s] = append(b.lens[s], int32(len(b.ids[s])-b.before[s]))
	}
	b.labels = append(b.labels, label)
	b.n++
	return 0, ""
}

// drop removes k of b's examples from the from-th, before finish.
func (b *block) drop(from, k, nd int) {
	for s := range b.lens {
		before, in := 0, 0 // the ids of the examples before from, and of those dropped
		for _, l := range b.lens[s][:from] {
			before += int(l)
		}
		for _, l := range b.lens[s][from : from+k] {
			in += int(l)
		}
		b.ids[s] = append(b.ids[s][:before], b.ids[s][before+in:]...)
		if len(b.wts[s]) > 0 {
			b.wts[s] = append(b.wts[s][:before], b.wts[s][before+in:]...)
		}
		b.lens[s] = append(b.lens[s][:from], b.lens[s][from+k:]...)
	}
	b.labels = append(b.labels[:from], b.labels[from+k:]...)
	b.dense = append(b.dense[:from*nd], b.dense[(from+k)*nd:]...)
	b.n -= k
}

// finish sets the starts of b's examples once its lines are parsed.
func (b *block) finish() {
	for s := range b.lens {
		st := append(slices.Grow(b.starts[s][:0], len(b.lens[s])+1), 0)
		for _, n := range b.lens[s] {
			st = append(st, st[len(st)-1]+int(n))
		}
		b.starts[s] = st
	}
}

// appendIDs appends the ids of text, a Sparse field, or says what is
// wrong with them.
func (b *block) appendIDs(f *field, text []byte) string {
	if len(text) == 0 {
		return "" // no value
	}
	for v, rest, more := nextValue(text, f.split); more; v, rest, more = nextValue(rest, f.split) {
		id, bad := parseID(f.ids, v)
		if bad != "" {
			return bad
		}
		b.ids[f.slot] = append(b.ids[f.slot], f.bound(id))
	}
	return ""
}

// appendWeights appends the weights of text, a Weight field.
func (b *block) appendWeights(f *field, text []byte) string {
	if len(text) == 0 {
		return "" // no value
	}
	for v, rest, more := nextValue(text, f.split); more; v, rest, more = nextValue(rest, f.split) {
		w, ok := parseNumber(v)
		if !ok || math.IsInf(w, 0) {
			return fmt.Sprintf("weight %q is not a finite number", clip(v))
		}
		b.wts[f.slot] = append(b.wts[f.slot], float32(w))
	}
	return ""
}

// nextValue returns the first value of text, a field of values split by
// split (one value without split), and the rest after it, nil after the
// last value; more is false for a nil text. An empty value between
// separators (or after the last) is returned, for the caller to refuse.
func nextValue(text, split []byte) (v, rest []byte, more bool) {
	if text == nil {
		return nil, nil, false
	}
	if len(split) > 0 {
		if k := bytes.Index(text, split); k >= 0 {
			return text[:k], text[k+len(split):], true
		}
	}
	return text, nil, true
}

// bound returns id as the field keeps it: modulo its Modulo, if any.
func (f *field) bound(id int64) int64 {
	if f.modulo != 0 {
		return int64(uint64(id) % f.modulo)
	}
	return id
}

// dense returns x, a Dense field's value, through the field's transform.
func (f *field) dense(x float64) float32 {
	if f.tr == Log1p {
		x = math.Log1p(max(x, 0))
	}
	return float32(x)
}

// parseID returns the id text spells in format f.
func parseID(f IDFormat, text []byte) (int64, string) {
	switch f {
	case Hash:
		if len(text) == 0 {
			return 0, "an empty id"
		}
		return int64(xxhash.Sum64(text)), ""
	case Hex:
		if len(text) == 0 || len(text) > 16 {
			return 0, fmt.Sprintf("%q is not 1 to 16 hexadecimal digits", clip(text))
		}
		var v uint64
		var bad byte // ORs every digit's value: above 15 for a byte that is none
		for _, c := range text {
			d := hexValue[c]
			bad |= d
			v = v<<4 | uint64(d&15)
		}
		if bad > 15 {
			return 0, fmt.Sprintf("%q is not hexadecimal", clip(text))
		}
		return int64(v), ""
	}
	v, ok := parseInt(text)
	if !ok {
		return 0, fmt.Sprintf("%q is not an integer of 64 bits", clip(text))
	}
	return v, ""
}

// hexValue is each byte's value as a hexadecimal digit, 16 for a byte
// that is none.
var hexValue = func() (t [256]byte) {
	for c := range t {
		switch {
		case c >= '0' && c <= '9':
			t[c] = byte(c - '0')
		case c >= 'a' && c <= 'f':
			t[c] = byte(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			t[c] = byte(c - 'A' + 10)
		default:
			t[c] = 16
		}
	}
	return t
}()

// parseInt parses a decimal int64, a sign allowed.
func parseInt(text []byte) (int64, bool) {
	neg := false
	if len(text) > 0 && (text[0] == '-' || text[0] == '+') {
		neg, text = text[0] == '-', text[1:]
	}
	if len(text) == 0 || len(text) > 19 {
		return 0, false
	}
	var v uint64
	for _, c := range text {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true
	}
	if v > math.MaxInt64 {
		return 0, false
	}
	return int64(v), true
}

// parseNumber parses a decimal number: an integer without allocating,
// anything else through strconv.ParseFloat. NaN is not a number here.
func parseNumber(text []byte) (float64, bool) {
	if v, ok := parseInt(text); ok {
		return float64(v), true
	}
	v, err := strconv.ParseFloat(string(text), 64)
	if err != nil || math.IsNaN(v) {
		return 0, false
	}
	return v, true
}

// clip returns text, cut to 40 bytes, for an error message.
func clip(text []byte) []byte {
	if len(text) > 40 {
		return append(text[:37:37], "..."...)
	}
	return text
}
