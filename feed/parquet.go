package feed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/cespare/xxhash/v2"
	"github.com/parquet-go/parquet-go"

	"github.com/gathergrad/gather/internal/errs"
)

// A Parquet file is read through github.com/parquet-go/parquet-go: its
// row groups are the blocks, the schema's columns found by name among
// its top-level fields. A scalar column (INT32, INT64, FLOAT, DOUBLE,
// BOOLEAN, or BYTE_ARRAY text) gives one value a row; a LIST column of
// such values is a Sparse column's bag (or its Weight column's weights).
// A null is the column's Fill, or, with none, an empty bag for a Sparse
// column and a malformed row for the others; a null element of a list
// is a malformed row.

// parquetMagic starts (and ends) a Parquet file.
var parquetMagic = []byte("PAR1")

// A row group may hold at most rowsPerByte rows a byte of its values
// (uncompressed) and minRows more: a constant column run-length encodes
// to little, but a training example's columns take more than a few bits.
const (
	rowsPerByte = 64
	minRows     = 1 << 16
)

// pqColumn is a schema column as a Parquet file holds it.
type pqColumn struct {
	field  int // the field of the layout it fills
	leaf   int // its leaf column's index
	maxDef int
	list   bool // a repeated leaf: a bag a row
	// elemNull: a list's elements may be null (an optional leaf), at
	// the definition level maxDef-1.
	elemNull bool
}

// openParquet reads the footer of the Parquet file s and finds the
// schema's columns in it.
func (s *source) openParquet(sc Schema) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("feed: %s: a Parquet file that does not read (%v): %w", s.path, r, ErrFormat)
		}
	}()
	// The footer's length, in the 4 bytes before the closing magic, must
	// fit the file: parquet-go allocates it before it reads it.
	var tail [8]byte
	if s.size < 12 {
		return fmt.Errorf("feed: %s: a Parquet file of %d bytes: %w", s.path, s.size, ErrFormat)
	}
	if _, err := s.f.ReadAt(tail[:], s.size-8); err != nil {
		return fmt.Errorf("feed: %s: %v: %w", s.path, err, ErrFormat)
	}
	if n := int64(binary.LittleEndian.Uint32(tail[:4])); n > s.size-12 {
		return fmt.Errorf("feed: %s: a Parquet footer of %d bytes in a file of %d: %w", s.path, n, s.size, ErrFormat)
	}
	f, err := parquet.OpenFile(s.f, s.size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return fmt.Errorf("feed: %s: %v: %w", s.path, err, ErrFormat)
	}
	s.pq = f
	for k, fl := range s.layout.fields {
		if fl.role == Skip {
			continue
		}
		col := f.Root().Column(fl.name)
		if col == nil {
			return fmt.Errorf("feed: %s: the Parquet file has no column %q: %w", s.path, fl.name, errs.ErrOption)
		}
		list := false
		for !col.Leaf() {
			cs := col.Columns()
			if len(cs) != 1 {
				return fmt.Errorf("feed: %s: column %q is a group of %d fields; a column is a value or a list of values: %w", s.path, fl.name, len(cs), errs.ErrOption)
			}
			col = cs[0]
		}
		switch col.MaxRepetitionLevel() {
		case 0:
		case 1:
			list = true
		default:
			return fmt.Errorf("feed: %s: column %q is a list of lists: %w", s.path, fl.name, errs.ErrOption)
		}
		if list && fl.role != Sparse && fl.role != Weight {
			return fmt.Errorf("feed: %s: column %q is a list; a %v column is one value a row: %w", s.path, fl.name, fl.role, errs.ErrOption)
		}
		s.pqCols = append(s.pqCols, pqColumn{field: k, leaf: col.Index(), maxDef: col.MaxDefinitionLevel(), list: list, elemNull: list && col.Optional()})
	}
	return nil
}

// parseRowGroup reads row group g of the Parquet file s into b.
func (r *Reader) parseRowGroup(s *source, g int, b *block) {
	defer func() {
		if p := recover(); p != nil {
			b.err = fmt.Errorf("feed: %s: row group %d does not read (%v): %w", s.path, g, p, ErrFormat)
		}
	}()
	lay := s.layout
	rg := s.pq.RowGroups()[g]
	n := int(rg.NumRows())
	// The rows are bounded by the bytes the group says its values take
	// (pageBytesPerRow), so that a hostile footer cannot make the block
	// allocate gigabytes for a few bytes of pages.
	var size int64
	if md := s.pq.Metadata(); g < len(md.RowGroups) {
		size = md.RowGroups[g].TotalByteSize
	}
	if n < 0 || n > 1<<28 || int64(n) > rowsPerByte*max(size, 0)+minRows {
		b.err = fmt.Errorf("feed: %s: row group %d of %d rows in %d bytes of values: %w", s.path, g, n, size, ErrFormat)
		return
	}
	var first int64 // the group's first row in the file
	for _, x := range s.pq.RowGroups()[:g] {
		first += x.NumRows()
	}
	nd := len(lay.dense)
	b.labels = zeroed(b.labels, n)
	b.dense = zeroed(b.dense, n*nd)
	b.rowBad = zeroed(b.rowBad, n)
	bad := b.rowBad // rows found malformed
	var firstBad *LineError
	mark := func(row, col int, msg string) {
		if !bad[row] {
			bad[row] = true
			if firstBad == nil {
				f := lay.fields[col]
				firstBad = &LineError{File: s.path, Line: first + int64(row) + 1, Column: col + 1, Name: f.name, Msg: msg}
			}
		}
	}
	for _, c := range s.pqCols {
		f := &lay.fields[c.field]
		if f.role == Sparse {
			b.lens[f.slot] = slices.Grow(b.lens[f.slot][:0], n)
			b.ids[f.slot] = b.ids[f.slot][:0]
		}
		if f.role == Weight {
			b.wts[f.slot] = b.wts[f.slot][:0]
		}
		row := -1
		pages := rg.ColumnChunks()[c.leaf].Pages()
		for {
			p, err := pages.ReadPage()
			if errors.Is(err, io.EOF) {
				break
			}
			if err == nil {
				row, err = b.walkPage(p, c, f, row, n, nd, mark)
				parquet.Release(p)
			}
			if err != nil {
				pages.Close()
				b.err = fmt.Errorf("feed: %s: row group %d, column %q: %v: %w", s.path, g, f.name, err, ErrFormat)
				return
			}
		}
		pages.Close()
		if row != n-1 {
			b.err = fmt.Errorf("feed: %s: row group %d, column %q: %d rows of %d: %w", s.path, g, f.name, row+1, n, ErrFormat)
			return
		}
	}
	b.n = n
	b.finish()
	if lay.weights {
		for sl := range lay.sparse {
			if !lay.weighed[sl] {
				b.wts[sl] = b.wts[sl][:0]
				for range len(b.ids[sl]) {
					b.wts[sl] = append(b.wts[sl], 1)
				}
			} else if len(b.wts[sl]) != len(b.ids[sl]) {
				b.err = fmt.Errorf("feed: %s: row group %d: %d weights for %d ids of %q: %w", s.path, g, len(b.wts[sl]), len(b.ids[sl]), lay.sparse[sl], ErrFormat)
				return
			}
		}
	}
	if firstBad == nil {
		return
	}
	if r.o.MaxBad == 0 {
		b.err = firstBad
		return
	}
	b.firstBad = firstBad
	b.compact(bad, lay)
}

// compact removes the rows bad marks from b, counting them.
func (b *block) compact(bad []bool, lay *layout) {
	nd := len(lay.dense)
	keep := 0
	for i := range b.n {
		if bad[i] {
			b.bad++
			continue
		}
		b.labels[keep] = b.labels[i]
		copy(b.dense[keep*nd:(keep+1)*nd], b.dense[i*nd:(i+1)*nd])
		keep++
	}
	for s := range lay.sparse {
		ids, wts, lens := b.ids[s][:0], b.wts[s][:0], b.lens[s][:0]
		for i := range b.n {
			if bad[i] {
				continue
			}
			lo, hi := b.starts[s][i], b.starts[s][i+1]
			ids = append(ids, b.ids[s][lo:hi]...)
			if lay.weights {
				wts = append(wts, b.wts[s][lo:hi]...)
			}
			lens = append(lens, int32(hi-lo))
		}
		b.ids[s], b.wts[s], b.lens[s] = ids, wts, lens
	}
	b.labels, b.dense, b.n = b.labels[:keep], b.dense[:keep*nd], keep
	b.finish()
}

// zeroed returns s resized to n zero values, reusing its array.
func zeroed[T any](s []T, n int) []T {
	s = slices.Grow(s[:0], n)[:n]
	clear(s)
	return s
}

// A pqPage is one page's values as parseRowGroup walks them: its
// levels, and its non-null values (a dictionary's, through idx, when the
// page is dictionary-encoded).
type pqPage struct {
	kind  parquet.Kind
	idx   []int32 // dictionary indexes, one a non-null value; nil for plain values
	count int     // non-null values
	bits  []byte  // Boolean
	i32   []int32
	i64   []int64
	f32   []float32
	f64   []float64
	data  []byte // ByteArray: values k is data[offs[k]:offs[k+1]]
	offs  []uint32
}

// load sets q to page p's values, checking that they are as many as its
// definition levels say.
func (q *pqPage) load(p parquet.Page, present int) error {
	*q = pqPage{kind: p.Type().Kind()}
	vals := p.Data()
	size := 0 // values the page (or its dictionary) holds
	if d := p.Dictionary(); d != nil {
		q.idx = vals.Int32()
		if len(q.idx) != present {
			return fmt.Errorf("%d dictionary indexes for %d values", len(q.idx), present)
		}
		vals = d.Page().Data()
		q.kind = d.Type().Kind()
	}
	switch q.kind {
	case parquet.Boolean:
		q.bits = vals.Boolean()
		size = 8 * len(q.bits)
	case parquet.Int32:
		q.i32 = vals.Int32()
		size = len(q.i32)
	case parquet.Int64:
		q.i64 = vals.Int64()
		size = len(q.i64)
	case parquet.Float:
		q.f32 = vals.Float()
		size = len(q.f32)
	case parquet.Double:
		q.f64 = vals.Double()
		size = len(q.f64)
	case parquet.ByteArray:
		q.data, q.offs = vals.ByteArray()
		size = max(len(q.offs)-1, 0)
		for k := 1; k < len(q.offs); k++ {
			if q.offs[k] < q.offs[k-1] || int(q.offs[k]) > len(q.data) {
				return errors.New("byte array offsets out of order")
			}
		}
	default:
		return fmt.Errorf("a %v column is neither a number nor text", q.kind)
	}
	if q.idx != nil {
		for _, i := range q.idx {
			if i < 0 || int(i) >= size {
				return fmt.Errorf("dictionary index %d of %d values", i, size)
			}
		}
	} else if present > size {
		return fmt.Errorf("%d values for %d present", size, present)
	}
	q.count = present
	return nil
}

// at returns the index of value k among the page's (or its dictionary's).
func (q *pqPage) at(k int) int {
	if q.idx != nil {
		return int(q.idx[k])
	}
	return k
}

// number returns value k as a float64, false when it is not a finite
// number.
func (q *pqPage) number(k int) (float64, bool) {
	i := q.at(k)
	switch q.kind {
	case parquet.Boolean:
		return float64(q.bits[i/8] >> (i % 8) & 1), true
	case parquet.Int32:
		return float64(q.i32[i]), true
	case parquet.Int64:
		return float64(q.i64[i]), true
	case parquet.Float:
		x := float64(q.f32[i])
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	case parquet.Double:
		x := q.f64[i]
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	default: // ByteArray
		return parseNumber(q.data[q.offs[i]:q.offs[i+1]])
	}
}

// id returns value k as an id in format f: an integer column's value
// itself (Int), a text's as parseID reads it.
func (q *pqPage) id(f IDFormat, k int) (int64, string) {
	i := q.at(k)
	var x int64
	switch q.kind {
	case parquet.Int32:
		x = int64(q.i32[i])
	case parquet.Int64:
		x = q.i64[i]
	case parquet.ByteArray:
		return parseID(f, q.data[q.offs[i]:q.offs[i+1]])
	default:
		return 0, fmt.Sprintf("a %v value is not an id", q.kind)
	}
	if f == Hash {
		return hashInt(x), ""
	}
	return x, ""
}

// walkPage adds page p of column c (field f) to b: row is the last row
// begun before it, returned as the last row begun after it.
func (b *block) walkPage(p parquet.Page, c pqColumn, f *field, row, n, nd int, mark func(row, col int, msg string)) (int, error) {
	defs, reps := p.DefinitionLevels(), p.RepetitionLevels()
	levels := int(p.NumValues())
	if (c.maxDef > 0 && len(defs) != levels) || (c.list && len(reps) != levels) {
		return row, fmt.Errorf("a page of %d values with %d definition and %d repetition levels", levels, len(defs), len(reps))
	}
	present := levels
	if c.maxDef > 0 {
		present = 0
		for _, d := range defs {
			if int(d) == c.maxDef {
				present++
			}
		}
	}
	q := &b.pq
	if err := q.load(p, present); err != nil {
		return row, err
	}
	switch f.role {
	case Sparse:
		b.ids[f.slot] = slices.Grow(b.ids[f.slot], present)
	case Weight:
		b.wts[f.slot] = slices.Grow(b.wts[f.slot], present)
	}
	k := 0 // the next value
	for e := range levels {
		if !c.list || reps[e] == 0 {
			row++
			if row >= n {
				return row, fmt.Errorf("more values than its %d rows", n)
			}
			if f.role == Sparse {
				b.lens[f.slot] = append(b.lens[f.slot], 0)
			}
		}
		isPresent := c.maxDef == 0 || int(defs[e]) == c.maxDef
		v := k
		if isPresent {
			k++
		} else {
			// A null: the whole value (a scalar, or a list that is null
			// or empty), or an element of a list.
			if c.elemNull && int(defs[e]) == c.maxDef-1 {
				mark(row, c.field, "a null element of a list")
				continue
			}
			if !f.hasFill {
				if f.role == Label || f.role == Dense {
					mark(row, c.field, "null, and the column has no Fill")
				}
				continue
			}
		}
		switch f.role {
		case Label, Dense, Weight:
			var x float64
			var ok bool
			if isPresent {
				x, ok = q.number(v)
			} else {
				x, ok = parseNumber(f.fill)
			}
			if !ok || math.IsInf(x, 0) {
				if f.role == Weight {
					mark(row, c.field, "a weight that is not a finite number")
				} else {
					mark(row, c.field, "not a finite number")
				}
				continue
			}
			switch f.role {
			case Label:
				b.labels[row] = float32(x)
			case Dense:
				b.dense[row*nd+f.slot] = f.dense(x)
			default:
				b.wts[f.slot] = append(b.wts[f.slot], float32(x))
			}
		case Sparse:
			var id int64
			var msg string
			if isPresent {
				id, msg = q.id(f.ids, v)
			} else {
				id, msg = parseID(f.ids, f.fill)
			}
			if msg != "" {
				mark(row, c.field, msg)
				continue
			}
			b.ids[f.slot] = append(b.ids[f.slot], f.bound(id))
			b.lens[f.slot][row]++
		}
	}
	return row, nil
}

// hashInt is the Hash id of an integer: XXH64 of its decimal text, as
// the same value read from text hashes.
func hashInt(x int64) int64 {
	var buf [20]byte
	return int64(xxhash.Sum64(strconv.AppendInt(buf[:0], x, 10)))
}
