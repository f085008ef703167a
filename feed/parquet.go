package feed

import (
	"errors"
	"fmt"
	"io"
	"math"

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
	if n < 0 || n > 1<<28 {
		b.err = fmt.Errorf("feed: %s: row group %d of %d rows: %w", s.path, g, n, ErrFormat)
		return
	}
	var first int64 // the group's first row in the file
	for _, x := range s.pq.RowGroups()[:g] {
		first += x.NumRows()
	}
	nd := len(lay.dense)
	b.labels = append(b.labels[:0], make([]float32, n)...)
	b.dense = append(b.dense[:0], make([]float32, n*nd)...)
	bad := make([]bool, n) // rows found malformed
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
		vals, err := readLeaf(rg.ColumnChunks()[c.leaf])
		if err != nil {
			b.err = fmt.Errorf("feed: %s: row group %d, column %q: %v: %w", s.path, g, f.name, err, ErrFormat)
			return
		}
		if f.role == Sparse {
			b.lens[f.slot] = b.lens[f.slot][:0]
			b.ids[f.slot] = b.ids[f.slot][:0]
		}
		if f.role == Weight {
			b.wts[f.slot] = b.wts[f.slot][:0]
		}
		row := -1
		for _, v := range vals {
			if !c.list || v.RepetitionLevel() == 0 {
				row++
				if row >= n {
					b.err = fmt.Errorf("feed: %s: row group %d, column %q: more values than its %d rows: %w", s.path, g, f.name, n, ErrFormat)
					return
				}
				if f.role == Sparse {
					b.lens[f.slot] = append(b.lens[f.slot], 0)
				}
			}
			present := v.DefinitionLevel() == c.maxDef
			if !present {
				// A null: the whole value (a scalar, or a list that is
				// null or empty), or an element of a list.
				if c.elemNull && v.DefinitionLevel() == c.maxDef-1 {
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
			case Label, Dense:
				x, ok := 0.0, true
				if present {
					x, ok = number(v)
				} else {
					x, ok = parseNumber(f.fill)
				}
				if !ok {
					mark(row, c.field, "not a finite number")
					continue
				}
				if f.role == Label {
					b.labels[row] = float32(x)
					continue
				}
				if f.tr == Log1p {
					x = math.Log1p(max(x, 0))
				}
				b.dense[row*nd+f.slot] = float32(x)
			case Sparse:
				var id int64
				var msg string
				if present {
					id, msg = pqID(f.ids, v)
				} else {
					id, msg = parseID(f.ids, f.fill)
				}
				if msg != "" {
					mark(row, c.field, msg)
					continue
				}
				b.ids[f.slot] = append(b.ids[f.slot], f.bound(id))
				b.lens[f.slot][row]++
			case Weight:
				x, ok := number(v)
				if !present {
					x, ok = parseNumber(f.fill)
				}
				if !ok || math.IsInf(x, 0) {
					mark(row, c.field, "a weight that is not a finite number")
					continue
				}
				b.wts[f.slot] = append(b.wts[f.slot], float32(x))
			}
		}
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

// readLeaf returns the values of a column chunk, every page's.
func readLeaf(cc parquet.ColumnChunk) ([]parquet.Value, error) {
	pages := cc.Pages()
	defer pages.Close()
	var out []parquet.Value
	buf := make([]parquet.Value, 1024)
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		vr := p.Values()
		for {
			k, err := vr.ReadValues(buf)
			for _, v := range buf[:k] {
				out = append(out, v.Clone())
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				parquet.Release(p)
				return nil, err
			}
		}
		parquet.Release(p)
	}
}

// number returns a numeric value as a float64.
func number(v parquet.Value) (float64, bool) {
	switch v.Kind() {
	case parquet.Boolean:
		if v.Boolean() {
			return 1, true
		}
		return 0, true
	case parquet.Int32:
		return float64(v.Int32()), true
	case parquet.Int64:
		return float64(v.Int64()), true
	case parquet.Float:
		x := float64(v.Float())
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	case parquet.Double:
		x := v.Double()
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	case parquet.ByteArray:
		return parseNumber(v.ByteArray())
	}
	return 0, false
}

// pqID returns the id of a Sparse column's value in format f: an
// integer column's value itself (Int), a text's as parseID reads it.
func pqID(f IDFormat, v parquet.Value) (int64, string) {
	switch v.Kind() {
	case parquet.Int32:
		if f == Hash {
			return hashInt(int64(v.Int32())), ""
		}
		return int64(v.Int32()), ""
	case parquet.Int64:
		if f == Hash {
			return hashInt(v.Int64()), ""
		}
		return v.Int64(), ""
	case parquet.ByteArray:
		return parseID(f, v.ByteArray())
	}
	return 0, fmt.Sprintf("a %v value is not an id", v.Kind())
}

// hashInt is the Hash id of an integer: XXH64 of its decimal text, as
// the same value read from text hashes.
func hashInt(x int64) int64 {
	var buf [20]byte
	return int64(xxhash.Sum64(fmt.Appendf(buf[:0], "%d", x)))
}
