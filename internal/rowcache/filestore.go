package rowcache

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gathergrad/gather/internal/fileio"
)

// A FileStore is a Store of rows rows of rowBytes each, laid out one after
// another in a file from offset on, read and written with depth
// positioned reads or writes in flight (fileio.ReadRows).
type FileStore struct {
	f        *os.File
	offset   int64
	rowBytes int
	rows     int64
	depth    int
	offs     []int64
	metaAt   int64  // the meta bytes' offset in the file
	meta     []byte // the meta bytes as the file holds them, nil for none
}

// SetMeta makes the n bytes of the file at offset off the store's meta
// bytes: a scalar state kept with the rows, which a Journaled store
// commits with them (Journaled.SetMeta). It reads them from the file.
func (s *FileStore) SetMeta(off int64, n int) error {
	b := make([]byte, n)
	if _, err := s.f.ReadAt(b, off); err != nil {
		return fmt.Errorf("row cache: reading %d meta bytes at %d of %s: %w", n, off, s.f.Name(), err)
	}
	s.metaAt, s.meta = off, b
	return nil
}

// NewFileStore returns the FileStore of rows rows of rowBytes each in f
// from offset on. A file too short to hold them is an error naming it.
func NewFileStore(f *os.File, offset int64, rowBytes int, rows int64, depth int) (*FileStore, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if rowBytes <= 0 || rows < 0 || offset < 0 || st.Size() < offset+rows*int64(rowBytes) {
		return nil, fmt.Errorf("row cache: %s holds %d bytes, not %d rows of %d bytes from offset %d", f.Name(), st.Size(), rows, rowBytes, offset)
	}
	return &FileStore{f: f, offset: offset, rowBytes: rowBytes, rows: rows, depth: depth}, nil
}

func (s *FileStore) RowBytes() int { return s.rowBytes }
func (s *FileStore) Rows() int64   { return s.rows }

func (s *FileStore) ReadRows(ctx context.Context, ids []int64, dst []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return fileio.ReadRows(s.f, s.offsets(ids), s.rowBytes, dst, s.depth)
}

func (s *FileStore) WriteRows(ctx context.Context, ids []int64, src []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return fileio.WriteRows(s.f, s.offsets(ids), s.rowBytes, src, s.depth)
}

// Spans of a sorted write (WriteSorted): rows at most spanGap bytes
// apart go out in one write of at most spanBytes, the bytes between them
// read first. A write-back of rows scattered over pages that are not in
// memory then costs runs of sequential reads and writes, not a
// read-modify-write of a page, at a random place, per row.
var (
	spanGap   int64 = 64 << 10 // a variable for BenchmarkWriteBack's A/B
	spanBytes int64 = 1 << 20
)

// WriteSorted writes the rows ids names, in increasing order and
// distinct, from src, row k from src[k*RowBytes():], in spans (spanGap,
// spanBytes), up to the store's depth of them at once. A failed write
// may leave some rows written and others not; a span's bytes between its
// rows are written back as they were read.
func (s *FileStore) WriteSorted(ids []int64, src []byte) error {
	rb := int64(s.rowBytes)
	if len(src) < len(ids)*s.rowBytes {
		return fmt.Errorf("row cache: %d bytes for %d rows of %d", len(src), len(ids), s.rowBytes)
	}
	var spans [][2]int // [lo, hi) of ids
	for k := 0; k < len(ids); {
		if ids[k] < 0 || ids[k] >= s.rows || k > 0 && ids[k] <= ids[k-1] {
			return fmt.Errorf("row cache: ids[%d] = %d is out of order or outside the store's %d rows", k, ids[k], s.rows)
		}
		j := k + 1
		for j < len(ids) && ids[j] > ids[j-1] && ids[j] < s.rows && (ids[j]-ids[j-1]-1)*rb <= spanGap && (ids[j]-ids[k]+1)*rb <= spanBytes {
			j++
		}
		spans = append(spans, [2]int{k, j})
		k = j
	}
	var (
		next  atomic.Int64
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for range min(max(s.depth, 1), len(spans)) {
		wg.Go(func() {
			var buf []byte
			for {
				n := int(next.Add(1) - 1)
				if n >= len(spans) {
					return
				}
				if err := s.writeSpan(ids, src, spans[n][0], spans[n][1], &buf); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// writeSpan writes the rows ids[lo:hi] from src: as they are in src when
// they are adjacent in the file, else into the span's bytes read into
// *buf first.
func (s *FileStore) writeSpan(ids []int64, src []byte, lo, hi int, buf *[]byte) error {
	rb := int64(s.rowBytes)
	at := s.offset + ids[lo]*rb
	rows := ids[hi-1] - ids[lo] + 1
	if rows == int64(hi-lo) {
		if _, err := fileio.WriteAt(s.f, src[int64(lo)*rb:int64(hi)*rb], at); err != nil {
			return fmt.Errorf("row cache: writing rows %d to %d of %s: %w", ids[lo], ids[hi-1], s.f.Name(), err)
		}
		return nil
	}
	b := slices.Grow((*buf)[:0], int(rows*rb))[:rows*rb]
	*buf = b
	if _, err := s.f.ReadAt(b, at); err != nil {
		return fmt.Errorf("row cache: reading rows %d to %d of %s: %w", ids[lo], ids[hi-1], s.f.Name(), err)
	}
	for k := lo; k < hi; k++ {
		copy(b[(ids[k]-ids[lo])*rb:], src[int64(k)*rb:int64(k+1)*rb])
	}
	if _, err := fileio.WriteAt(s.f, b, at); err != nil {
		return fmt.Errorf("row cache: writing rows %d to %d of %s: %w", ids[lo], ids[hi-1], s.f.Name(), err)
	}
	return nil
}

// ReadRange reads the n rows from row first on into dst, in one run of
// reads of the file.
func (s *FileStore) ReadRange(ctx context.Context, first int64, n int, dst []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if first < 0 || n < 0 || first+int64(n) > s.rows {
		return fmt.Errorf("row cache: rows %d to %d of a store of %d", first, first+int64(n)-1, s.rows)
	}
	if _, err := s.f.ReadAt(dst[:n*s.rowBytes], s.offset+first*int64(s.rowBytes)); err != nil {
		return fmt.Errorf("row cache: reading rows %d to %d of %s: %w", first, first+int64(n)-1, s.f.Name(), err)
	}
	return nil
}

func (s *FileStore) offsets(ids []int64) []int64 {
	s.offs = s.offs[:0]
	for _, id := range ids {
		s.offs = append(s.offs, s.offset+id*int64(s.rowBytes))
	}
	return s.offs
}
