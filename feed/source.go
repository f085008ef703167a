package feed

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"

	"github.com/gathergrad/gather/checkpoint"
)

// ErrFormat: a file that is not what the schema says (a malformed line,
// a compressed stream cut short, a Parquet file that does not read). A
// malformed line is a *LineError naming the file, line and column. It is
// checkpoint.ErrFormat.
var ErrFormat = checkpoint.ErrFormat

// The codecs of a file, found from its first bytes.
const (
	plain = iota
	gzipped
	zstandard
	parquetFile
)

// A source is one file of text lines.
type source struct {
	path      string
	f         *os.File // plain files: read in blocks by ReadAt
	size      int64
	codec     int
	layout    *layout
	dataStart int64 // plain: the first byte after the header line
	pq        *parquet.File
	pqCols    []pqColumn
}

// openSource opens the file at path and reads its header line with s.
func openSource(path string, s Schema, maxLine int) (*source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	src := &source{path: path, f: f, size: st.Size()}
	var magic [4]byte
	n, _ := f.ReadAt(magic[:], 0)
	switch {
	case n >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		src.codec = gzipped
	case n == 4 && bytes.Equal(magic[:], []byte{0x28, 0xb5, 0x2f, 0xfd}):
		src.codec = zstandard
	case n == 4 && bytes.Equal(magic[:], parquetMagic):
		src.codec = parquetFile
		s.Header = false // a Parquet file's columns are found by name
		if src.layout, err = newLayout(s, nil); err != nil {
			f.Close()
			return nil, fmt.Errorf("feed: %s: %w", path, err)
		}
		if err := src.openParquet(s); err != nil {
			f.Close()
			return nil, err
		}
		return src, nil
	}
	var header []byte
	if s.Header {
		r, closer, err := src.stream()
		if err != nil {
			f.Close()
			return nil, err
		}
		line, err := readLine(bufio.NewReaderSize(r, 64<<10), maxLine)
		closer()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("feed: %s: the header: %w", path, err)
		}
		header = bytes.TrimSuffix(line, []byte{'\r'})
		src.dataStart = int64(len(line)) + 1
	}
	if src.layout, err = newLayout(s, header); err != nil {
		f.Close()
		return nil, fmt.Errorf("feed: %s: %w", path, err)
	}
	return src, nil
}

// stream returns the file's text from its start, decompressed, and the
// function that closes the decompressor.
func (s *source) stream() (io.Reader, func(), error) {
	r := io.NewSectionReader(s.f, 0, s.size)
	switch s.codec {
	case gzipped:
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("feed: %s: %v: %w", s.path, err, ErrFormat)
		}
		return z, func() { z.Close() }, nil
	case zstandard:
		z, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
		if err != nil {
			return nil, nil, fmt.Errorf("feed: %s: %v: %w", s.path, err, ErrFormat)
		}
		return z, z.Close, nil
	}
	return r, func() {}, nil
}

// readLine returns the next line of r without its '\n', or an error for
// a line longer than maxLine bytes.
func readLine(r *bufio.Reader, maxLine int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLine+1 {
			return nil, fmt.Errorf("a line of more than %d bytes (Options.MaxLine): %w", maxLine, ErrFormat)
		}
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return line, nil
		case errors.Is(err, io.EOF):
			return nil, fmt.Errorf("no lines: %w", ErrFormat)
		default:
			return nil, err
		}
	}
}

// A unit is a run of whole lines of one file: a block of the file's
// bytes (plain files, read when parsed) or the lines themselves (cut
// from a compressed file's stream as it is read).
type unit struct {
	src        int
	start, end int64  // plain: the lines that start in [start, end) of the file
	data       []byte // compressed: the lines
	textAt     int64  // compressed: where data starts in the file's text
	firstLine  int64  // compressed: the line number of data's first line
}

// readPlain returns the text of the lines of u, a block of the plain
// file s, reading into buf.
func (s *source) readPlain(u unit, maxLine int, buf []byte) (text []byte, at int64, _ []byte, err error) {
	from := u.start
	if u.start > s.dataStart {
		from = u.start - 1 // the byte before: a line starts at u.start if it is '\n'
	}
	hi := min(u.end+int64(maxLine)+1, s.size)
	if hi <= from {
		return nil, u.start, buf, nil
	}
	if cap(buf) < int(hi-from) {
		buf = make([]byte, hi-from)
	}
	b := buf[:hi-from]
	if _, err := s.f.ReadAt(b, from); err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, buf, fmt.Errorf("feed: %s: %w", s.path, err)
	}
	at = from
	if u.start > s.dataStart {
		k := bytes.IndexByte(b, '\n')
		if k < 0 || from+int64(k)+1 >= u.end {
			return nil, u.start, buf, nil // no line starts in the block
		}
		b, at = b[k+1:], from+int64(k)+1
	}
	if u.end >= s.size {
		return b, at, buf, nil
	}
	rel := int(u.end - at) // the lines that start before rel are the block's
	k := bytes.IndexByte(b[rel-1:], '\n')
	if k < 0 {
		return nil, 0, buf, &LineError{File: s.path, Msg: fmt.Sprintf("a line of more than %d bytes (Options.MaxLine)", maxLine), offset: u.end - 1}
	}
	return b[:rel+k], at, buf, nil
}

// lineOf returns the line number (from 1) of the byte at offset of s's
// text, counting its lines from the start.
func (s *source) lineOf(offset int64) int64 {
	r, closer, err := s.stream()
	if err != nil {
		return 0
	}
	defer closer()
	buf := make([]byte, 1<<20)
	var line, at int64 = 1, 0
	for at < offset {
		n, err := r.Read(buf[:min(int64(len(buf)), offset-at)])
		line += int64(bytes.Count(buf[:n], []byte{'\n'}))
		at += int64(n)
		if err != nil {
			break
		}
	}
	return line
}
