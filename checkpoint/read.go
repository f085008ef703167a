package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/operand"
)

// Read reads a safetensors file: its tensors by name and its metadata
// (nil if it has none). F16 and BF16 tensors are returned as Float32,
// exactly; I64 as Int64, and so on for the other dtypes Write stores.
//
// The file is checked before anything of its size is allocated: a header
// length beyond the file or MaxHeader, a header that is not a JSON object
// of well-formed entries, an unknown dtype, a negative or overflowing
// shape, data offsets outside the data, overlapping or leaving a gap, or
// disagreeing with shape × dtype size, data after the last tensor, and a
// BOOL byte other than 0 and 1 are errors wrapping ErrFormat. Read
// allocates at most the file's size (twice it for F16 and BF16 data).
func Read(path string) (map[string]*tensor.Dense, map[string]string, error) {
	f, h, err := open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	return h.readAll(f, path)
}

// decode reads the bytes of a file Write wrote (encode's) as Read reads
// the file; name names them in errors.
func decode(b []byte, name string) (map[string]*tensor.Dense, map[string]string, error) {
	r := bytes.NewReader(b)
	h, err := readHeader(r, int64(len(b)), name)
	if err != nil {
		return nil, nil, err
	}
	return h.readAll(r, name)
}

// readAll reads every tensor of h from f (named path).
func (h header) readAll(f io.ReaderAt, path string) (map[string]*tensor.Dense, map[string]string, error) {
	out := make(map[string]*tensor.Dense, len(h.entries))
	for _, e := range h.entries {
		t, err := h.read(f, e)
		if err != nil {
			return nil, nil, fmt.Errorf("checkpoint: %s: tensor %q: %w", path, e.name, err)
		}
		out[e.name] = t
	}
	return out, h.meta, nil
}

// A header is a file's checked header.
type header struct {
	entries   []entry // in the order of their data
	meta      map[string]string
	sums      map[string]uint32 // CRC-32C by tensor, for the tensors that have one
	dataStart int64
}

// open opens the safetensors file at path and reads its header.
func open(path string) (*os.File, header, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, header{}, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, header{}, err
	}
	h, err := readHeader(f, st.Size(), path)
	if err != nil {
		f.Close()
		return nil, header{}, err
	}
	return f, h, nil
}

// formatError returns an error about path's contents wrapping ErrFormat.
func formatError(path, format string, args ...any) error {
	return fmt.Errorf("checkpoint: %s: %s: %w", path, fmt.Sprintf(format, args...), ErrFormat)
}

// readHeader reads and checks the header of the file f (named path) of
// size bytes.
func readHeader(f io.ReaderAt, size int64, path string) (header, error) {
	var lenBuf [8]byte
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), lenBuf[:]); err != nil {
		return header{}, formatError(path, "%d bytes, too short for the header length", size)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeader || n > uint64(size-8) {
		return header{}, formatError(path, "header length %d exceeds the file's %d bytes or the limit of %d", n, size-8, MaxHeader)
	}
	js := make([]byte, n)
	if _, err := f.ReadAt(js, 8); err != nil {
		return header{}, formatError(path, "reading the header: %v", err)
	}
	h := header{dataStart: 8 + int64(n)}
	var err error
	if h.entries, h.meta, err = parseHeader(js, size-h.dataStart); err != nil {
		return header{}, formatError(path, "%v", err)
	}
	if h.sums, err = parseSums(h.meta, h.entries); err != nil {
		return header{}, formatError(path, "%v", err)
	}
	delete(h.meta, checksumKey)
	if len(h.meta) == 0 {
		h.meta = nil
	}
	return h, nil
}

// parseSums reads the checksums Write records in meta, if any: one per
// tensor of entries, each 8 hex digits.
func parseSums(meta map[string]string, entries []entry) (map[string]uint32, error) {
	js, ok := meta[checksumKey]
	if !ok {
		return nil, nil
	}
	var hex map[string]string
	if err := strictDecode([]byte(js), &hex); err != nil {
		return nil, fmt.Errorf("the checksums are not a JSON object of strings: %v", err)
	}
	sums := make(map[string]uint32, len(hex))
	for _, e := range entries {
		h, ok := hex[e.name]
		if !ok {
			return nil, fmt.Errorf("tensor %q has no checksum", e.name)
		}
		v, err := strconv.ParseUint(h, 16, 32)
		if err != nil || len(h) != 8 {
			return nil, fmt.Errorf("tensor %q's checksum %q is not 8 hex digits", e.name, h)
		}
		sums[e.name] = uint32(v)
	}
	if len(hex) != len(entries) {
		return nil, fmt.Errorf("%d checksums for %d tensors", len(hex), len(entries))
	}
	return sums, nil
}

// parseHeader parses and checks a JSON header for dataLen bytes of data.
func parseHeader(js []byte, dataLen int64) ([]entry, map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, errors.New("the header is not a JSON object")
	}
	var entries []entry
	var meta map[string]string
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("invalid JSON header: %v", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, nil, fmt.Errorf("invalid JSON header key %v", tok)
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("the header names %q twice", name)
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, fmt.Errorf("invalid JSON header at %q: %v", name, err)
		}
		if name == metadataKey {
			if err := strictDecode(raw, &meta); err != nil {
				return nil, nil, fmt.Errorf("metadata must be an object of strings: %v", err)
			}
			continue
		}
		var h headerEntry
		if err := strictDecode(raw, &h); err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %v", name, err)
		}
		e, err := checkEntry(name, h, dataLen)
		if err != nil {
			return nil, nil, err
		}
		entries = append(entries, e)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, nil, errors.New("the header's JSON object does not end")
	}
	if rest := bytes.TrimRight(js[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, nil, fmt.Errorf("%d bytes after the header's JSON object", len(rest))
	}
	// The data: the tensors one after another from 0, no gaps, no
	// overlaps, nothing after the last.
	slices.SortFunc(entries, func(a, b entry) int {
		if a.begin != b.begin {
			return compare(a.begin, b.begin)
		}
		return compare(a.end, b.end)
	})
	var at int64
	for _, e := range entries {
		if e.begin != at {
			if e.begin < at {
				return nil, nil, fmt.Errorf("tensor %q's data [%d, %d) overlaps another's", e.name, e.begin, e.end)
			}
			return nil, nil, fmt.Errorf("the data has a gap at [%d, %d) before tensor %q", at, e.begin, e.name)
		}
		at = e.end
	}
	if at != dataLen {
		return nil, nil, fmt.Errorf("%d bytes of data after the last tensor's, which ends at %d", dataLen-at, at)
	}
	return entries, meta, nil
}

func compare(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// strictDecode decodes raw into v, refusing unknown fields and trailing
// data.
func strictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// checkEntry checks a header entry against dataLen bytes of data.
func checkEntry(name string, h headerEntry, dataLen int64) (entry, error) {
	f, ok := formatNamed(h.Dtype)
	if !ok {
		return entry{}, fmt.Errorf("tensor %q has dtype %q, which this package does not read", name, h.Dtype)
	}
	if len(h.DataOffsets) != 2 {
		return entry{}, fmt.Errorf("tensor %q has %d data offsets, want 2", name, len(h.DataOffsets))
	}
	begin, end := h.DataOffsets[0], h.DataOffsets[1]
	if begin < 0 || end < begin || end > dataLen {
		return entry{}, fmt.Errorf("tensor %q's data offsets [%d, %d] lie outside the %d bytes of data", name, begin, end, dataLen)
	}
	// The element count, bounded by the data so that nothing overflows.
	count := int64(1)
	shape := make([]int, len(h.Shape))
	for i, d := range h.Shape {
		if d < 0 {
			return entry{}, fmt.Errorf("tensor %q has a negative dimension in shape %v", name, h.Shape)
		}
		if d > 0 && count > dataLen/d {
			count = dataLen + 1 // more than the data holds; the check below says so
		} else {
			count *= d
		}
		shape[i] = int(d)
	}
	if count > math.MaxInt/int64(f.size) || count*int64(f.size) != end-begin {
		return entry{}, fmt.Errorf("tensor %q of shape %v and dtype %s needs %d × %d bytes, its offsets [%d, %d] give %d",
			name, h.Shape, h.Dtype, count, f.size, begin, end, end-begin)
	}
	return entry{name: name, format: f, shape: shape, begin: begin, end: end}, nil
}

// read reads the data of e, checking its checksum if it has one.
func (h header) read(f io.ReaderAt, e entry) (*tensor.Dense, error) {
	n := int((e.end - e.begin) / int64(e.format.size))
	var t *tensor.Dense
	if len(e.shape) == 0 {
		// A scalar: a tensor of shape () holding one element.
		t = tensor.New(tensor.FromScalar(reflect.Zero(e.format.dt.Type).Interface()))
	} else {
		// Every element is read or converted below before t is returned.
		t = operand.NewOutput(e.format.dt, e.shape)
	}
	if n == 0 {
		return t, h.check(e, 0)
	}
	var raw []byte
	switch e.format.name {
	case "F16", "BF16", "BOOL":
		raw = make([]byte, n*e.format.size)
	default:
		raw = t.Header.Raw[:n*e.format.size]
		fileio.PreferHugePages(raw)
	}
	if _, err := f.ReadAt(raw, h.dataStart+e.begin); err != nil {
		return nil, fmt.Errorf("reading %d bytes: %v: %w", len(raw), err, ErrFormat)
	}
	if err := h.check(e, crc32.Checksum(raw, castagnoli)); err != nil {
		return nil, err
	}
	switch e.format.name {
	case "F16":
		out := t.Float32s()
		for i := range out {
			out[i] = halfToFloat(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	case "BF16":
		out := t.Float32s()
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		}
	case "BOOL":
		out := t.Bools()
		for i, b := range raw {
			if b > 1 {
				return nil, fmt.Errorf("element %d is byte %d, not a boolean (0 or 1): %w", i, b, ErrFormat)
			}
			out[i] = b == 1
		}
	default:
		if !fileio.LittleEndian && e.format.size > 1 {
			fileio.SwapInPlace(raw, e.format.size)
		}
	}
	return t, nil
}

// verify reads e's data a chunk at a time and checks it against its
// checksum; without one it does nothing.
func (h header) verify(f *os.File, e entry) error {
	want, ok := h.sums[e.name]
	if !ok {
		return nil
	}
	buf := make([]byte, min(chunk, e.end-e.begin))
	var sum uint32
	for off := e.begin; off < e.end; off += chunk {
		b := buf[:min(chunk, e.end-off)]
		if _, err := f.ReadAt(b, h.dataStart+off); err != nil {
			return fmt.Errorf("reading %d bytes: %v: %w", len(b), err, ErrFormat)
		}
		sum = crc32.Update(sum, castagnoli, b)
	}
	if sum != want {
		return h.check(e, sum)
	}
	return nil
}

// readInto reads e's data into dst's memory, which holds exactly that
// many bytes in the file's layout (see directTarget), a chunk at a time.
func (h header) readInto(f *os.File, e entry, dst *tensor.Dense) error {
	raw := dst.Header.Raw[:e.end-e.begin]
	for off := int64(0); off < int64(len(raw)); off += chunk {
		b := raw[off:min(off+chunk, int64(len(raw)))]
		if _, err := f.ReadAt(b, h.dataStart+e.begin+off); err != nil {
			return fmt.Errorf("reading %d bytes: %w", len(b), err)
		}
	}
	return nil
}

// check returns an error wrapping ErrFormat if e has a checksum and the
// CRC-32C of its data, sum, is not it.
func (h header) check(e entry, sum uint32) error {
	if want, ok := h.sums[e.name]; ok && want != sum {
		return fmt.Errorf("the data's checksum is %08x, the file records %08x: the data is corrupt: %w", sum, want, ErrFormat)
	}
	return nil
}

// halfToFloat returns the IEEE half-precision value h as a float32,
// exactly (every half is a float32).
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // infinity or NaN
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	case mant == 0: // zero
		return math.Float32frombits(sign)
	}
	// subnormal: mant × 2^-24
	v := float32(mant) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}

// A TensorInfo describes one tensor of a safetensors file: its name, the
// dtype Read returns it as and the file's own dtype name (F32, BF16, ...),
// its shape, and where its data lies in the file.
type TensorInfo struct {
	Name   string
	Dtype  tensor.Dtype
	Format string
	Shape  []int
	Offset int64 // of its first byte, from the start of the file
	Size   int64 // bytes
}

// Inspect reads and checks the header of the safetensors file at path,
// as Read does, without reading any tensor: the tensors in the order of
// their data, and the metadata.
func Inspect(path string) ([]TensorInfo, map[string]string, error) {
	f, h, err := open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	out := make([]TensorInfo, len(h.entries))
	for i, e := range h.entries {
		out[i] = TensorInfo{Name: e.name, Dtype: e.format.dt, Format: e.format.name, Shape: e.shape,
			Offset: h.dataStart + e.begin, Size: e.end - e.begin}
	}
	return out, h.meta, nil
}

// Header returns the bytes that start a safetensors file holding one
// tensor of format f ("F32", "F16", "U8", ...) and shape, with the metadata
// meta (nil for none): the length, then the JSON header padded to 8
// bytes. The tensor's data follows at offset len(Header(...)). Package
// table uses it to lay out a table file that it then fills in place.
func Header(name, f string, shape []int, meta map[string]string) ([]byte, error) {
	ft, ok := formatNamed(f)
	if !ok {
		return nil, fmt.Errorf("checkpoint: header of %q: format %q: %w", name, f, errs.ErrDtype)
	}
	n := int64(ft.size)
	for _, d := range shape {
		if d < 0 || (d > 0 && n > math.MaxInt64/int64(d)) {
			return nil, fmt.Errorf("checkpoint: header of %q: shape %v: %w", name, shape, errs.ErrShape)
		}
		n *= int64(d)
	}
	if _, ok := meta[checksumKey]; ok {
		return nil, fmt.Errorf("checkpoint: the metadata key %q is the checksums': %w", checksumKey, errs.ErrOption)
	}
	entries := map[string]any{name: headerEntry{Dtype: f, Shape: int64s(shape), DataOffsets: []int64{0, n}}}
	if len(meta) > 0 {
		entries["__metadata__"] = meta
	}
	js, err := json.Marshal(entries)
	if err != nil {
		return nil, err
	}
	if pad := (8 - len(js)%8) % 8; pad > 0 {
		js = append(js, bytes.Repeat([]byte{' '}, pad)...)
	}
	return append(binary.LittleEndian.AppendUint64(nil, uint64(len(js))), js...), nil
}

// MetaAt returns where the value of the metadata entry key lies in the
// safetensors file f: the offset of the value's first byte and its
// length. A value stands in the file as its bytes, without escapes, so
// that a fixed-width value can be rewritten in place (package table's
// step count, which its journal updates). A header that is not one (or
// longer than MaxHeader), or a key that is missing, held twice or whose
// value has escapes, is an error wrapping ErrFormat.
func MetaAt(f io.ReaderAt, key string) (off int64, n int, err error) {
	var lenBuf [8]byte
	if _, err := f.ReadAt(lenBuf[:], 0); err != nil {
		return 0, 0, fmt.Errorf("checkpoint: reading the header's length: %v: %w", err, ErrFormat)
	}
	size := binary.LittleEndian.Uint64(lenBuf[:])
	if size > MaxHeader {
		return 0, 0, fmt.Errorf("checkpoint: header length %d exceeds the limit of %d: %w", size, MaxHeader, ErrFormat)
	}
	// The header is decoded as it is read, so that a length the file does
	// not hold is an error, not an allocation.
	dec := json.NewDecoder(io.NewSectionReader(f, 8, int64(size)))
	found := -1
	// object walks the entries of the object that starts next, calling
	// each on a key with the decoder before its value.
	object := func(each func(k string) error) error {
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return fmt.Errorf("not an object")
		}
		for dec.More() {
			t, err := dec.Token()
			k, ok := t.(string)
			if err != nil || !ok {
				return fmt.Errorf("a key that is not a string")
			}
			if err := each(k); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
	}
	skip := func() error { var raw json.RawMessage; return dec.Decode(&raw) }
	err = object(func(k string) error {
		if k != "__metadata__" {
			return skip()
		}
		return object(func(k string) error {
			if k != key {
				return skip()
			}
			from := dec.InputOffset() // just after the key
			t, err := dec.Token()
			v, ok := t.(string)
			to := dec.InputOffset() // just after the value
			// The bytes between are ':', spaces and the value's quoted
			// bytes, which must be v itself: no escapes.
			var raw []byte
			if err == nil && ok && to-from <= int64(len(v))+64 {
				raw = make([]byte, to-from)
				_, err = f.ReadAt(raw, 8+from)
			}
			quoted := bytes.TrimLeft(raw, " \t\r\n:")
			if err != nil || !ok || found >= 0 || len(quoted) != len(v)+2 || quoted[0] != '"' || string(quoted[1:len(v)+1]) != v {
				return fmt.Errorf("the value of %q is not one string without escapes", key)
			}
			end := int(to) - 1 // the closing quote
			found, n = end-len(v), len(v)
			return nil
		})
	})
	if err == nil && found < 0 {
		err = fmt.Errorf("no metadata %q", key)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("checkpoint: header: %v: %w", err, ErrFormat)
	}
	return 8 + int64(found), n, nil
}
