package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/operand"
)

// ErrFormat: a file is not a well-formed safetensors file (or, for
// package wordvec, word-vector file). Every error about a file's contents
// wraps it. It is driver.ErrFormat.
var ErrFormat = errs.ErrFormat

// ErrMismatch: a well-formed file does not fit the model Load restores:
// a tensor missing from the file or from the model, or of another shape
// or dtype. The error names each tensor, with both sides. It is
// driver.ErrMismatch.
var ErrMismatch = errs.ErrMismatch

// ErrInUse: Write or Save onto the path of a file an open table holds
// (table.Open, nn.OpenEmbedding), in this process or another; the file is
// left untouched. It is table.ErrInUse.
var ErrInUse = errs.ErrInUse

// ErrSameFile: Write or Save onto a file this process reads, under any
// of its names (the same path spelt another way, a hard or symbolic
// link): an open table's file (nn.OpenEmbedding, table.OpenCached,
// serve.Open). The error names both; nothing is written. It is
// table.ErrSameFile and serve.ErrSameFile; wordvec.Write's error wraps
// it too.
var ErrSameFile = errs.ErrSameFile

// MaxHeader is the largest header Read accepts, in bytes, as the
// safetensors library does: a longer header length is an ErrFormat error,
// and nothing of that size is allocated.
const MaxHeader = 100_000_000

// metadataKey is the header's entry for the string-to-string metadata.
const metadataKey = "__metadata__"

// checksumKey is the metadata entry under which Write records a CRC-32C
// (Castagnoli) checksum of each tensor's data, as a JSON object of
// 8-digit hex strings by tensor name. Read and Load check it when it is
// there and leave it out of the metadata they return.
const checksumKey = "gathergrad.crc32c"

// castagnoli is the CRC-32C table.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// chunk is how many bytes Write and Load move per call: a tensor larger
// than a few chunks is written and loaded without a copy of it in memory.
const chunk = 4 << 20

// A format is one of the file format's dtypes.
type format struct {
	name string
	size int          // bytes per element
	dt   tensor.Dtype // the dtype Read returns
}

var formats = []format{
	{"F64", 8, tensor.Float64}, {"F32", 4, tensor.Float32},
	{"F16", 2, tensor.Float32}, {"BF16", 2, tensor.Float32},
	{"I64", 8, tensor.Int64}, {"I32", 4, tensor.Int32}, {"I16", 2, tensor.Int16}, {"I8", 1, tensor.Int8},
	{"U64", 8, tensor.Uint64}, {"U32", 4, tensor.Uint32}, {"U16", 2, tensor.Uint16}, {"U8", 1, tensor.Uint8},
	{"BOOL", 1, tensor.Bool},
}

// formatOf returns the format Write stores a tensor of dtype dt in.
func formatOf(dt tensor.Dtype) (format, bool) {
	if dt == tensor.Int {
		return format{"I64", 8, tensor.Int64}, true
	}
	for _, f := range formats {
		if f.dt == dt && f.name != "F16" && f.name != "BF16" {
			return f, true
		}
	}
	return format{}, false
}

func formatNamed(name string) (format, bool) {
	for _, f := range formats {
		if f.name == name {
			return f, true
		}
	}
	return format{}, false
}

// An entry is one tensor of a file's header, checked.
type entry struct {
	name       string
	format     format
	shape      []int
	begin, end int64 // of its data, from the start of the data
}

// headerEntry is an entry as the JSON header spells it.
type headerEntry struct {
	Dtype       string  `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// Write writes tensors and meta to path as a safetensors file: an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype,
// shape and data offsets (and meta under "__metadata__"), padded with
// spaces to a multiple of 8 bytes, then the tensors' data, little-endian
// and row-major, in the order of their names. PyTorch
// (safetensors.torch.load_file), NumPy and Hugging Face's tools read it.
//
// A view or a column-major tensor is written as its logical row-major
// values (through a copy); any other tensor straight from its memory.
// Dtypes: Float64, Float32, Int64, Int (as I64), Int32, Int16, Int8,
// Uint64, Uint32, Uint16, Uint8 and Bool; others are ErrDtype errors. An
// empty name, or "__metadata__", is an ErrOption error.
//
// The file is written atomically (see package doc): a crash at any moment
// leaves the previous file or the new one, never a torn one.
func Write(path string, tensors map[string]tensor.Tensor, meta map[string]string) error {
	p, err := prepare(tensors, meta)
	if err != nil {
		return err
	}
	return fileio.WriteAtomic(path, func(f *os.File) error {
		return p.writeTo(fileio.Writer(f), func(final []byte) error {
			_, err := fileio.WriteAt(f, final, 8)
			return err
		})
	})
}

// encode returns the bytes Write writes to a file for tensors and meta.
func encode(tensors map[string]tensor.Tensor, meta map[string]string) ([]byte, error) {
	p, err := prepare(tensors, meta)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	err = p.writeTo(&buf, func(final []byte) error {
		copy(buf.Bytes()[8:], final)
		return nil
	})
	return buf.Bytes(), err
}

// A prepared is what Write writes: the tensors' names in order, their
// bytes, the header's entries, the metadata.
type prepared struct {
	names  []string
	data   [][]byte
	header map[string]any
	meta   map[string]string
}

// prepare checks tensors and meta for Write and returns what it writes.
func prepare(tensors map[string]tensor.Tensor, meta map[string]string) (*prepared, error) {
	if _, ok := meta[checksumKey]; ok {
		return nil, fmt.Errorf("checkpoint: the metadata key %q is the checksums': %w", checksumKey, errs.ErrOption)
	}
	names := make([]string, 0, len(tensors))
	for name := range tensors {
		names = append(names, name)
	}
	slices.Sort(names)
	p := &prepared{names: names, data: make([][]byte, len(names)), header: make(map[string]any, len(names)+1), meta: meta}
	var offset int64
	for i, name := range names {
		if name == "" || name == metadataKey {
			return nil, fmt.Errorf("checkpoint: a tensor may not be named %q: %w", name, errs.ErrOption)
		}
		t := tensors[name]
		if t == nil {
			return nil, fmt.Errorf("checkpoint: tensor %q is nil: %w", name, errs.ErrShape)
		}
		f, ok := formatOf(t.Dtype())
		if !ok {
			return nil, fmt.Errorf("checkpoint: tensor %q has dtype %v, which the format cannot hold: %w", name, t.Dtype(), errs.ErrDtype)
		}
		b, err := rawBytes(t, f)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: tensor %q: %w", name, err)
		}
		p.data[i] = b
		p.header[name] = headerEntry{Dtype: f.name, Shape: int64s(t.Shape()), DataOffsets: []int64{offset, offset + int64(len(b))}}
		offset += int64(len(b))
	}
	return p, nil
}

// writeTo writes p to w, and then the header again with the checksums,
// through patch, over the first (of the same length, 8 bytes in).
func (p *prepared) writeTo(w io.Writer, patch func(final []byte) error) error {
	// The header is written first with the sums' places, then again with
	// the sums once the data they are sums of has been written: the data
	// is read once, whatever its size.
	sums := make(map[string]string, len(p.names))
	for _, name := range p.names {
		sums[name] = "00000000" // a place for the sum, of its final width
	}
	js, err := headerJSON(p.header, p.meta, sums)
	if err != nil {
		return err
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(js)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(js); err != nil {
		return err
	}
	for i, b := range p.data {
		sum, err := writeChunks(w, b)
		if err != nil {
			return err
		}
		sums[p.names[i]] = fmt.Sprintf("%08x", sum)
	}
	final, err := headerJSON(p.header, p.meta, sums)
	if err != nil {
		return err
	}
	if len(final) != len(js) {
		return fmt.Errorf("checkpoint: the header changed length with its checksums (%d, %d bytes)", len(js), len(final))
	}
	return patch(final)
}

// headerJSON returns the JSON header of tensors (entries by name), meta
// and the checksums sums, padded with spaces to a multiple of 8 bytes.
func headerJSON(entries map[string]any, meta, sums map[string]string) ([]byte, error) {
	cs, err := json.Marshal(sums)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	m := make(map[string]string, len(meta)+1)
	maps.Copy(m, meta)
	m[checksumKey] = string(cs)
	entries[metadataKey] = m
	js, err := json.Marshal(entries)
	delete(entries, metadataKey)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if pad := (8 - len(js)%8) % 8; pad > 0 {
		js = append(js, bytes.Repeat([]byte{' '}, pad)...)
	}
	return js, nil
}

// writeChunks writes b to f a chunk at a time, asking the system to bring
// the next chunk in while one is written (b may be a mapped file's, not
// yet in memory), and returns b's CRC-32C.
func writeChunks(f io.Writer, b []byte) (uint32, error) {
	var sum uint32
	for off := 0; off < len(b); off += chunk {
		c := b[off:min(off+chunk, len(b))]
		if next := off + chunk; next < len(b) {
			fileio.WillNeedMemory(b[next:min(next+2*chunk, len(b))])
		}
		sum = crc32.Update(sum, castagnoli, c)
		if _, err := f.Write(c); err != nil {
			return 0, err
		}
	}
	return sum, nil
}

func int64s(s []int) []int64 {
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

// rawBytes returns t's logical row-major values as the file stores them
// in format f: t's own memory when it is a row-major *tensor.Dense that
// is not a view, on a little-endian machine, else a copy.
func rawBytes(t tensor.Tensor, f format) ([]byte, error) {
	d, err := operand.Read("checkpoint", "tensor", t)
	if err != nil {
		return nil, err
	}
	n := d.Shape().TotalSize()
	if d.Shape().IsScalar() {
		n = 1 // TotalSize of the empty shape is 0
	}
	if d.Dtype() == tensor.Int && strconv.IntSize != 64 {
		out := make([]byte, 8*n)
		for i, v := range d.Ints()[:n] {
			binary.LittleEndian.PutUint64(out[8*i:], uint64(int64(v)))
		}
		return out, nil
	}
	b := d.Header.Raw[:n*f.size]
	if !fileio.LittleEndian && f.size > 1 {
		b = fileio.Swapped(b, f.size)
	}
	return b, nil
}
