package wordvec

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"unicode"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/operand"
)

// maxVectorLine is the longest line Read reads: a word and its
// values (a 300-dimensional vector in text takes about 4 KB).
const maxVectorLine = 16 << 20

// Read reads pretrained word vectors and returns the words and a
// [words, dim] float32 tensor of their vectors, row i the vector of
// words[i], ready for nn.WithWeights. It reads, telling them apart by
// their contents:
//
//   - word2vec text and fastText .vec: a "V D" header line, then V lines of
//     a word and D numbers;
//   - word2vec binary: the header line, then V times a word, a space and D
//     little-endian float32 values, with or without a newline after each
//     vector (the C tool writes one, gensim none);
//   - GloVe text: no header, lines of a word and D numbers, D taken from
//     the first line. A line with more fields than D+1 has a word
//     with spaces in it (GloVe's larger files hold a few): the last D
//     fields are its vector. A line whose extra fields (after the first)
//     are all numbers is a corrupt line, not such a word: an error.
//
// A malformed file (a bad header, a line of another length, a value that
// is not a number, fewer or more vectors than the header says, a header
// that asks for more values than the file could hold) is an error wrapping
// checkpoint.ErrFormat that names the line, or for binary files the word.
// Nothing larger than the file's size is allocated.
func Read(path string) ([]string, *tensor.Dense, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	first, err := readLine(r)
	if err != nil {
		return nil, nil, vecError(path, 1, "%v", err)
	}
	if v, d, ok := parseHeader(first); ok {
		if v > 0 && (isBinaryVectors(r, d) || strings.HasSuffix(first, " ") && binaryRecord(r, d)) {
			return readBinaryVectors(path, r, v, d, st.Size())
		}
		if v > 0 && d > st.Size()/v { // each value takes at least one byte in text
			return nil, nil, vecError(path, 1, "the header asks for %d × %d values, more than the file's %d bytes hold", v, d, st.Size())
		}
		return readTextVectors(path, r, nil, int(v), int(d), 2)
	}
	fields := strings.Fields(first)
	if len(fields) < 2 {
		return nil, nil, vecError(path, 1, "a vector line needs a word and at least one number, got %q", clip(first))
	}
	return readTextVectors(path, r, fields, -1, len(fields)-1, 1)
}

// vecError returns a Read error at line n of path.
func vecError(path string, n int, format string, args ...any) error {
	return fmt.Errorf("read vectors: %s: line %d: %s: %w", path, n, fmt.Sprintf(format, args...), checkpoint.ErrFormat)
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// readLine returns the next line of r without its end, or io.EOF.
func readLine(r *bufio.Reader) (string, error) {
	var b []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			if err == io.EOF && len(b) > 0 {
				return string(b), nil
			}
			return "", err
		}
		b = append(b, chunk...)
		if len(b) > maxVectorLine {
			return "", fmt.Errorf("a line longer than %d bytes", maxVectorLine)
		}
		if !isPrefix {
			return string(b), nil
		}
	}
}

// parseHeader parses a "V D" header line.
func parseHeader(line string) (v, d int64, ok bool) {
	f := strings.Fields(line)
	if len(f) != 2 {
		return 0, 0, false
	}
	v, err1 := strconv.ParseInt(f[0], 10, 64)
	d, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || v < 0 || d <= 0 {
		return 0, 0, false
	}
	return v, d, true
}

// isBinaryVectors reports whether the data after a header is word2vec
// binary rather than text: whether its first line is not a word and d
// numbers. It looks at up to the reader's 1 MB: a text line's word may
// be 64 KB long (as long as the binary reader takes), and a shorter look
// cuts such a line and calls it binary.
func isBinaryVectors(r *bufio.Reader, d int64) bool {
	peek, _ := r.Peek(min(r.Size(), 1<<20))
	line, _, _ := bytes.Cut(peek, []byte{'\n'})
	fields := strings.Fields(string(line))
	if int64(len(fields)) < d+1 {
		return true
	}
	for _, v := range fields[len(fields)-int(d):] {
		if _, err := strconv.ParseFloat(v, 32); err != nil {
			return true
		}
	}
	return false
}

// binaryRecord reports whether the data after a header starts with a
// whole binary record: a word, a space, 4·d bytes, then a newline or the
// end of the file. A first line that is both such a record and a word
// with d numbers is binary if the header ends in a space, as Write's
// binary header does, and text otherwise.
func binaryRecord(r *bufio.Reader, d int64) bool {
	peek, _ := r.Peek(int(min(d*4+4096, 1<<20)))
	sp := bytes.IndexByte(peek, ' ')
	if sp <= 0 {
		return false
	}
	end := int64(sp) + 1 + 4*d
	if end > int64(len(peek)) {
		return false
	}
	if end == int64(len(peek)) {
		_, err := r.Peek(len(peek) + 1)
		return err != nil // the file ends with the record
	}
	return peek[end] == '\n'
}

// allNumbers reports whether every one of fields is a number.
func allNumbers(fields []string) bool {
	for _, s := range fields {
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			return false
		}
	}
	return true
}

// readTextVectors reads text lines of a word and d numbers: count of them
// (-1: to the end), the first already split into first (nil if none),
// starting at line number n.
func readTextVectors(path string, r *bufio.Reader, first []string, count, d, n int) ([]string, *tensor.Dense, error) {
	var words []string
	var vals []float32
	if count >= 0 {
		words, vals = make([]string, 0, count), make([]float32, 0, count*d)
	}
	add := func(fields []string, line int) error {
		if len(fields) < d+1 {
			return vecError(path, line, "%d fields, want a word and %d numbers", len(fields), d)
		}
		if count >= 0 && len(fields) > d+1 {
			return vecError(path, line, "%d fields, want a word and %d numbers", len(fields), d)
		}
		if extra := fields[1 : len(fields)-d]; len(extra) > 0 && allNumbers(extra) {
			return vecError(path, line, "%d fields, want a word and %d numbers: the %d extra are numbers, not a word with spaces", len(fields), d, len(extra))
		}
		word := strings.Join(fields[:len(fields)-d], " ")
		for _, s := range fields[len(fields)-d:] {
			v, err := strconv.ParseFloat(s, 32)
			if err != nil {
				return vecError(path, line, "%q is not a number", clip(s))
			}
			vals = append(vals, float32(v))
		}
		words = append(words, word)
		return nil
	}
	if first != nil {
		if err := add(first, n); err != nil {
			return nil, nil, err
		}
		n++
	}
	for ; ; n++ {
		line, err := readLine(r)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, vecError(path, n, "%v", err)
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue // blank lines, such as one at the end
		}
		if count >= 0 && len(words) == count {
			return nil, nil, vecError(path, n, "more vectors than the header's %d", count)
		}
		if err := add(fields, n); err != nil {
			return nil, nil, err
		}
	}
	if count >= 0 && len(words) != count {
		return nil, nil, vecError(path, n, "%d vectors, the header says %d", len(words), count)
	}
	if len(words) == 0 {
		return nil, nil, vecError(path, n, "no vectors")
	}
	return words, tensor.New(tensor.WithShape(len(words), d), tensor.WithBacking(vals)), nil
}

// readBinaryVectors reads v words and vectors of d float32 values.
func readBinaryVectors(path string, r *bufio.Reader, v, d, size int64) ([]string, *tensor.Dense, error) {
	if d > size/4/v {
		return nil, nil, vecError(path, 1, "the header asks for %d × %d float32 values, more than the file's %d bytes hold", v, d, size)
	}
	words := make([]string, 0, v)
	vals := make([]float32, v*d)
	raw := make([]byte, 4*d)
	for i := range v {
		// The word: whitespace before it (the newline after the last
		// vector, when the writer put one), then bytes up to a space.
		var word []byte
		for {
			c, err := r.ReadByte()
			if err != nil {
				return nil, nil, fmt.Errorf("read vectors: %s: word %d: the file ends after %d of %d vectors: %w", path, i+1, i, v, checkpoint.ErrFormat)
			}
			if c == ' ' && len(word) > 0 {
				break
			}
			if c == '\n' || c == ' ' || c == '\t' || c == '\r' {
				if len(word) > 0 {
					return nil, nil, fmt.Errorf("read vectors: %s: word %d (%q) ends in %q, not a space before its vector: %w", path, i+1, clip(string(word)), c, checkpoint.ErrFormat)
				}
				continue
			}
			word = append(word, c)
			if len(word) > 1<<16 {
				return nil, nil, fmt.Errorf("read vectors: %s: word %d is longer than 65536 bytes: %w", path, i+1, checkpoint.ErrFormat)
			}
		}
		if _, err := io.ReadFull(r, raw); err != nil {
			return nil, nil, fmt.Errorf("read vectors: %s: word %d (%q): the file ends inside its vector: %w", path, i+1, clip(string(word)), checkpoint.ErrFormat)
		}
		row := vals[i*d : (i+1)*d]
		for j := range row {
			row[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
		}
		words = append(words, string(word))
	}
	// Whitespace may follow the last vector; anything else is an error.
	for {
		c, err := r.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if !unicode.IsSpace(rune(c)) {
			return nil, nil, fmt.Errorf("read vectors: %s: data after the %d vectors the header announces: %w", path, v, checkpoint.ErrFormat)
		}
	}
	return words, tensor.New(tensor.WithShape(int(v), int(d)), tensor.WithBacking(vals)), nil
}

// Write writes words and their vectors, a [len(words), dim] float32
// or float64 tensor (row i the vector of words[i]), to path in word2vec's
// format: text ("V D", then a word and its values per line, each float32
// value written so that it reads back exactly) or binary (the header
// line, then each word, a space, its dim little-endian float32 values and
// a newline, as the C tool writes it; the header line ends in a space,
// which the C tool and gensim skip, so that Read never takes the file for
// text). Every file Write writes reads back exactly. float64 values are rounded to
// float32, as the formats hold. A word that is empty or holds whitespace
// is an error wrapping gather.ErrOption. The file is written atomically,
// as checkpoint.Write writes; a path of a file this process reads (an
// open table's, by any name) is an error wrapping checkpoint.ErrSameFile.
func Write(path string, words []string, vectors tensor.Tensor, binaryFormat bool) error {
	if vectors == nil {
		return fmt.Errorf("write vectors: vectors are nil: %w", errs.ErrShape)
	}
	d, err := operand.Read("write vectors", "vectors", vectors)
	if err != nil {
		return err
	}
	s := d.Shape()
	if len(s) != 2 || s[0] != len(words) {
		return fmt.Errorf("write vectors: vectors of shape %v for %d words; want (%d, dim): %w", s, len(words), len(words), errs.ErrShape)
	}
	var vals []float32
	switch d.Dtype() {
	case tensor.Float32:
		vals = d.Float32s()[:s.TotalSize()]
	case tensor.Float64:
		vals = make([]float32, s.TotalSize())
		for i, v := range d.Float64s()[:len(vals)] {
			vals[i] = float32(v)
		}
	default:
		return fmt.Errorf("write vectors: vectors must be float32 or float64, got %v: %w", d.Dtype(), errs.ErrDtype)
	}
	for i, w := range words {
		if w == "" || strings.IndexFunc(w, unicode.IsSpace) >= 0 {
			return fmt.Errorf("write vectors: word %d (%q) is empty or holds whitespace: %w", i, w, errs.ErrOption)
		}
	}
	dim := s[1]
	return fileio.WriteAtomic(path, func(f *os.File) error {
		w := bufio.NewWriterSize(fileio.Writer(f), 1<<20)
		if binaryFormat {
			// The space before the newline tells Read that the file is
			// binary when its first record also reads as a line of text.
			fmt.Fprintf(w, "%d %d \n", len(words), dim)
		} else {
			fmt.Fprintf(w, "%d %d\n", len(words), dim)
		}
		var num []byte
		var raw [4]byte
		for i, word := range words {
			w.WriteString(word)
			row := vals[i*dim : (i+1)*dim]
			if binaryFormat {
				w.WriteByte(' ')
				for _, v := range row {
					binary.LittleEndian.PutUint32(raw[:], math.Float32bits(v))
					w.Write(raw[:])
				}
			} else {
				for _, v := range row {
					num = strconv.AppendFloat(num[:0], float64(v), 'g', -1, 32)
					w.WriteByte(' ')
					w.Write(num)
				}
			}
			if err := w.WriteByte('\n'); err != nil {
				return err
			}
		}
		return w.Flush()
	})
}
