package rowcache

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/gathergrad/gather/internal/fileio"
)

// ErrJournal: a journal that is not this table's, or whose committed
// records are corrupt.
var ErrJournal = errors.New("bad journal")

// The journal's layout: a header (journalMagic, the row size and the row
// count, 8 bytes each, then the table's identity, IDBytes bytes), then
// records of a row's id (8 bytes) and its bytes, or of the id -2 and the
// store's meta bytes (FileStore.SetMeta), then, once a Sync commits them,
// a trailer: the id -1, the number of records, their CRC-32C and
// commitMagic. A journal of the first version (magic1) has no identity:
// its header ends after the row count.
const (
	journalMagic = "GGJRNL02"
	magic1       = "GGJRNL01"
	commitMagic  = "CMIT"
	headerBytes  = 24 + IDBytes
	header1Bytes = 24
	trailerBytes = 24
)

// IDBytes is the size of a table's identity in a journal's header: an
// identity is at most IDBytes bytes, kept zero-padded.
const IDBytes = 32

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// A Journaled store writes no row to its file between syncs: WriteRows
// appends the rows to a journal beside it, ReadRows reads a row written
// since the last Sync from there, and Sync commits the journal (a trailer
// holding the records' count and checksum, then fsync), copies its rows
// into the file, syncs the file and empties the journal. A crash at any
// moment leaves, once OpenJournaled has replayed or dropped what the
// journal holds, the rows of the last Sync that returned (or of a Sync
// that had committed when the crash came): never a mix of steps.
type Journaled struct {
	base    *FileStore
	id      string // the table's identity, which the header names
	j       *os.File
	size    int64           // bytes in the journal
	pending map[int64]int64 // id -> offset in the journal of its latest row
	count   int64           // records since the header
	crc     uint32          // of the records since the header
	rec     []byte
	meta    []byte // meta bytes for the next Sync to commit, or nil
}

// metaID is the id of a record of the store's meta bytes.
const metaID = -2

// OpenJournaled returns the Journaled store of base, the table whose
// identity is id (at most IDBytes bytes; "" for a table without one),
// with its journal at path, creating the journal if there is none. A
// journal a crash left is dealt with first: committed records are copied
// into base's file, which is then synced, and uncommitted ones dropped.
// A journal of another table (another identity, row size or count), one
// that does not start with a journal's header, or one whose committed
// records do not match their checksum, is an error wrapping ErrJournal
// that names the file and what it holds, and nothing is changed. A
// journal shorter than its header holds no record (a crash cut the
// writing of its header), nor does one of another table that holds its
// header alone: both are emptied.
func OpenJournaled(base *FileStore, path, id string) (*Journaled, error) {
	if len(id) > IDBytes {
		return nil, fmt.Errorf("row cache: a table identity of %d bytes; at most %d", len(id), IDBytes)
	}
	j, err := fileio.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	// The journal's directory entry is made durable before anything
	// relies on the journal: a Sync commits to it and then writes the
	// table file in place, which a power cut that took the journal away
	// would leave half written.
	if err := fileio.SyncDir(filepath.Dir(path)); err != nil {
		j.Close()
		return nil, err
	}
	s := &Journaled{base: base, id: id, j: j, pending: map[int64]int64{}}
	if err := s.recover(path); err != nil {
		j.Close()
		return nil, err
	}
	return s, nil
}

// recover replays or drops what the journal holds and leaves it holding
// its header alone. It reads the journal once, in order, keeping the
// offset of each row's latest record, never the records themselves.
func (s *Journaled) recover(path string) error {
	st, err := s.j.Stat()
	if err != nil {
		return err
	}
	r := bufio.NewReaderSize(io.NewSectionReader(s.j, 0, st.Size()), 1<<20)
	head := make([]byte, min(st.Size(), headerBytes))
	if _, err := io.ReadFull(r, head); err != nil {
		return fmt.Errorf("row cache: reading the journal %s: %w", path, err)
	}
	hlen, err := s.checkHeader(path, head)
	if err != nil && st.Size() == hlen {
		return s.reset() // another table's header and nothing after it: nothing to lose
	}
	if err != nil {
		return err
	}
	if hlen < 0 {
		return s.reset()
	}
	r.Reset(io.NewSectionReader(s.j, hlen, st.Size()-hlen))
	latest := map[int64]int64{} // id -> offset of its row's latest record
	metaAt := int64(-1)
	var crc uint32
	var n int64 // records read
	at := hlen
	rec := make([]byte, 8+max(s.base.rowBytes, len(s.base.meta), trailerBytes-8))
	for {
		if _, err := io.ReadFull(r, rec[:8]); err != nil {
			return s.reset() // cut before a commit: the last Sync stands
		}
		id := int64(binary.LittleEndian.Uint64(rec))
		size := s.base.rowBytes
		switch {
		case id == -1:
			t := rec[8:trailerBytes]
			if _, err := io.ReadFull(r, t); err != nil {
				return s.reset()
			}
			count, sum := int64(binary.LittleEndian.Uint64(t)), binary.LittleEndian.Uint32(t[8:])
			if string(t[12:16]) != commitMagic || count != n || sum != crc {
				return fmt.Errorf("row cache: %s: a commit of %d records with checksum %08x, after %d records with checksum %08x: %w",
					path, count, sum, n, crc, ErrJournal)
			}
			var meta []byte
			if metaAt >= 0 {
				meta = make([]byte, len(s.base.meta))
				if _, err := s.j.ReadAt(meta, metaAt); err != nil {
					return fmt.Errorf("row cache: reading the journal %s: %w", path, err)
				}
			}
			return s.apply(latest, meta)
		case id == metaID:
			if s.base.meta == nil {
				return fmt.Errorf("row cache: %s: a record of meta bytes for a store that keeps none: %w", path, ErrJournal)
			}
			size = len(s.base.meta)
			metaAt = at + 8
		case id < 0 || id >= s.base.rows:
			return fmt.Errorf("row cache: %s: a record of row %d, outside the table's %d rows: %w", path, id, s.base.rows, ErrJournal)
		default:
			latest[id] = at + 8
		}
		if _, err := io.ReadFull(r, rec[8:8+size]); err != nil {
			return s.reset() // a record cut short: never committed
		}
		crc = crc32.Update(crc, castagnoli, rec[:8+size])
		n++
		at += int64(8 + size)
	}
}

func (s *Journaled) header() []byte {
	h := make([]byte, headerBytes)
	copy(h, journalMagic)
	binary.LittleEndian.PutUint64(h[8:], uint64(s.base.rowBytes))
	binary.LittleEndian.PutUint64(h[16:], uint64(s.base.rows))
	copy(h[24:], s.id)
	return h
}

// checkHeader checks head, the journal's first bytes (up to headerBytes),
// and returns the length of its header, or -1 for a journal shorter than
// a header, which holds no record: reset writes and syncs the header
// before any record follows it, so a shorter journal is one whose header
// a crash cut. The header of another table is an error, returned with
// the header's length.
func (s *Journaled) checkHeader(path string, head []byte) (int64, error) {
	magic := head[:min(len(head), len(journalMagic))]
	first := string(magic) == magic1[:len(magic)]
	if !first && string(magic) != journalMagic[:len(magic)] {
		return 0, fmt.Errorf("row cache: %s does not start as a journal does (%q, not %q): if it is not this table's journal, "+
			"move it away; if it is, its header was overwritten, and the table's last Sync may be lost with it: "+
			"restore the table from a checkpoint: %w", path, magic, journalMagic, ErrJournal)
	}
	hlen := int64(headerBytes)
	if first {
		hlen = header1Bytes
	}
	if int64(len(head)) < hlen {
		return -1, nil
	}
	rowBytes, rows := binary.LittleEndian.Uint64(head[8:]), binary.LittleEndian.Uint64(head[16:])
	if rowBytes != uint64(s.base.rowBytes) || rows != uint64(s.base.rows) {
		return hlen, fmt.Errorf("row cache: %s is the journal of a table of %d rows of %d bytes, not of this one (%d rows of %d bytes): %w",
			path, rows, rowBytes, s.base.rows, s.base.rowBytes, ErrJournal)
	}
	var id string
	if !first {
		id = string(bytes.TrimRight(head[24:headerBytes], "\x00"))
	}
	if id != s.id {
		return hlen, fmt.Errorf("row cache: %s is the journal of the table %s, not of this one (%s): "+
			"the table this path held before left it (Create replaced that table); remove it, or put back the table it belongs to: %w",
			path, idName(id), idName(s.id), ErrJournal)
	}
	return hlen, nil
}

// Holds reports whether the file at path is a journal that holds records
// beyond its header (or is not a journal at all).
func Holds(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return true
	}
	magic := make([]byte, len(journalMagic))
	if _, err := f.ReadAt(magic, 0); err != nil {
		return st.Size() > 0
	}
	switch string(magic) {
	case journalMagic:
		return st.Size() > headerBytes
	case magic1:
		return st.Size() > header1Bytes
	}
	return true
}

// idName names a table identity in an error.
func idName(id string) string {
	if id == "" {
		return "without an identity"
	}
	return strconv.Quote(id)
}

// reset empties the journal to its header, durably.
func (s *Journaled) reset() error {
	if err := fileio.Truncate(s.j, 0); err != nil {
		return err
	}
	if _, err := fileio.WriteAt(s.j, s.header(), 0); err != nil {
		return err
	}
	if err := fileio.Sync(s.j); err != nil {
		return err
	}
	s.size, s.count, s.crc, s.meta = headerBytes, 0, 0, nil
	clear(s.pending)
	return nil
}

// apply copies committed records into the file: for each row, the
// record at latest[row] in the journal, and the meta bytes if not nil;
// then it syncs the file and empties the journal. It works in chunks, in
// the order of the file, so that memory stays bounded, each chunk written
// in spans (FileStore.WriteSorted).
func (s *Journaled) apply(latest map[int64]int64, meta []byte) error {
	ids := make([]int64, 0, len(latest))
	for id := range latest {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	per := max(1, chunkBytes/s.base.rowBytes)
	buf := make([]byte, min(len(ids), per)*s.base.rowBytes)
	offs := make([]int64, min(len(ids), per))
	for lo := 0; lo < len(ids); lo += per {
		part := ids[lo:min(lo+per, len(ids))]
		for k, id := range part {
			offs[k] = latest[id]
		}
		b := buf[:len(part)*s.base.rowBytes]
		if err := fileio.ReadRows(s.j, offs[:len(part)], s.base.rowBytes, b, s.base.depth); err != nil {
			return fmt.Errorf("row cache: applying the journal: %w", err)
		}
		if err := s.base.WriteSorted(part, b); err != nil {
			return fmt.Errorf("row cache: applying the journal: %w", err)
		}
	}
	if meta != nil {
		if _, err := fileio.WriteAt(s.base.f, meta, s.base.metaAt); err != nil {
			return fmt.Errorf("row cache: applying the journal: %w", err)
		}
		copy(s.base.meta, meta)
	}
	if err := fileio.Sync(s.base.f); err != nil {
		return err
	}
	return s.reset()
}

// Size returns the journal's size in bytes.
func (s *Journaled) Size() int64 { return s.size }

func (s *Journaled) RowBytes() int { return s.base.rowBytes }
func (s *Journaled) Rows() int64   { return s.base.rows }

// ReadRows reads the rows written since the last Sync from the journal and
// the others from the file.
func (s *Journaled) ReadRows(ctx context.Context, ids []int64, dst []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	size := s.base.rowBytes
	var fromFile []int64
	var at []int
	for k, id := range ids {
		if off, ok := s.pending[id]; ok {
			if _, err := s.j.ReadAt(dst[k*size:(k+1)*size], off); err != nil {
				return fmt.Errorf("row cache: reading row %d from the journal: %w", id, err)
			}
			continue
		}
		fromFile = append(fromFile, id)
		at = append(at, k)
	}
	if len(fromFile) == 0 {
		return nil
	}
	buf := make([]byte, len(fromFile)*size)
	if err := s.base.ReadRows(ctx, fromFile, buf); err != nil {
		return err
	}
	for i, k := range at {
		copy(dst[k*size:(k+1)*size], buf[i*size:(i+1)*size])
	}
	return nil
}

// ReadRange reads the n rows from row first on: from the file in one run
// if the journal holds none of them, else row by row.
func (s *Journaled) ReadRange(ctx context.Context, first int64, n int, dst []byte) error {
	ids := make([]int64, n)
	pending := false
	for k := range ids {
		ids[k] = first + int64(k)
		_, ok := s.pending[ids[k]]
		pending = pending || ok
	}
	if pending {
		return s.ReadRows(ctx, ids, dst)
	}
	return s.base.ReadRange(ctx, first, n, dst)
}

// WriteRows appends the rows to the journal; the file is not written
// until Sync.
func (s *Journaled) WriteRows(ctx context.Context, ids []int64, src []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	size := s.base.rowBytes
	recBytes := 8 + size
	s.rec = slices.Grow(s.rec[:0], len(ids)*recBytes)[:len(ids)*recBytes]
	for k, id := range ids {
		r := s.rec[k*recBytes : (k+1)*recBytes]
		binary.LittleEndian.PutUint64(r, uint64(id))
		copy(r[8:], src[k*size:(k+1)*size])
	}
	if _, err := fileio.WriteAt(s.j, s.rec, s.size); err != nil {
		return fmt.Errorf("row cache: appending %d rows to the journal: %w", len(ids), err)
	}
	for k, id := range ids {
		s.pending[id] = s.size + int64(k*recBytes) + 8
	}
	s.crc = crc32.Update(s.crc, castagnoli, s.rec)
	s.count += int64(len(ids))
	s.size += int64(len(s.rec))
	return nil
}

// SetMeta sets the store's meta bytes (FileStore.SetMeta) to b at the next
// Sync, in the same commit as the rows: a table's scalar state, such as an
// optimiser's step count, kept with its rows.
func (s *Journaled) SetMeta(b []byte) error {
	if len(b) != len(s.base.meta) {
		return fmt.Errorf("row cache: %d meta bytes for a store that keeps %d", len(b), len(s.base.meta))
	}
	s.meta = slices.Clone(b)
	return nil
}

// Meta returns the meta bytes as of the last Sync.
func (s *Journaled) Meta() []byte { return slices.Clone(s.base.meta) }

// Sync commits the rows written since the last Sync, and the meta bytes
// SetMeta gave, and copies them into the file: once the commit's fsync
// returns they survive any crash. A ctx done before the commit is
// returned with nothing committed; once committed, the copy into the file
// runs to its end.
func (s *Journaled) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.meta != nil {
		id := int64(metaID)
		rec := binary.LittleEndian.AppendUint64(nil, uint64(id))
		rec = append(rec, s.meta...)
		if _, err := fileio.WriteAt(s.j, rec, s.size); err != nil {
			return err
		}
		s.crc = crc32.Update(s.crc, castagnoli, rec)
		s.count++
		s.size += int64(len(rec))
	}
	if s.count == 0 {
		return nil
	}
	t := make([]byte, trailerBytes)
	binary.LittleEndian.PutUint64(t, ^uint64(0))
	binary.LittleEndian.PutUint64(t[8:], uint64(s.count))
	binary.LittleEndian.PutUint32(t[16:], s.crc)
	copy(t[20:], commitMagic)
	if _, err := fileio.WriteAt(s.j, t, s.size); err != nil {
		return err
	}
	if err := fileio.Sync(s.j); err != nil {
		return err
	}
	return s.apply(s.pending, s.meta)
}

// Close closes the journal file (not the store's).
func (s *Journaled) Close() error { return s.j.Close() }

// crcOf returns crc updated with b, the journal's checksum.
func crcOf(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }
