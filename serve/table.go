package serve

import (
	"fmt"
	"math"
	"slices"

	"github.com/gathergrad/gather/table/driver"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/parallel"
)

// A Format is how a table stores its rows: package table's Format, one
// type for the rows a table trains and the rows serve answers from. A
// Table serves Float32, Float16, BFloat16, Int8 and Int4 (FBGEMM's
// row-wise formats, the bytes torch.ops.quantized's
// embedding_bag_byte_prepack and embedding_bag_4bit_prepack make).
type Format = driver.Format

// The formats a Table serves.
const (
	Float32  = driver.Float32
	Float16  = driver.Float16
	BFloat16 = driver.BFloat16
	Int8     = driver.Int8
	Int4     = driver.Int4
)

// addRows holds, for each format a Table serves, the kernel that adds w
// times a row of it to acc: a new format is a row here and its kernel.
var addRows = map[Format]func(acc []float32, row []byte, w float32){
	Float32:  kernel.AddRow32,
	Float16:  kernel.AddRowHalf,
	BFloat16: kernel.AddRowBF16,
	Int8:     kernel.AddRow8,
	Int4:     kernel.AddRow4,
}

// served returns the bytes of a row of dim values in format f, 0 for a
// format a Table does not serve.
func served(f Format, dim int) int {
	if addRows[f] == nil {
		return 0
	}
	return f.RowBytes(dim)
}

// A Table is a read-only embedding table for answering requests: rows of
// one format, in memory or mapped from a file (Open). Its methods write
// into buffers the caller owns, allocate nothing, and may be called from
// any number of goroutines at once.
type Table struct {
	format    Format
	rows, dim int
	rowBytes  int
	stride    int // bytes from a row to the next: more than rowBytes when rows carry optimiser state
	data      []byte
	add       func(acc []float32, row []byte, w float32)
	m         *fileio.Mapping // the file's mapping, for Open's tables
	closed    bool

	// The deltas applied (Apply): for each chunk of chunkRows rows, nil
	// (its rows are data's) or a copy of its rows with the deltas'
	// written in; and the version, the full model's base and the
	// deltas applied after it.
	patch     [][]byte
	base, seq uint64
	name      string // the name deltas give the table (Named, Open)
}

// chunkRows is how many rows Apply copies together when one of them
// changes: a chunk is copied once, then shared by the versions after it
// (16 rows: a delta of 1,000 rows of 64 float32 values in 1,000,000 took
// 2.6 ms with 64, 1.1 ms with 16 and 8).
const (
	chunkShift = 4
	chunkRows  = 1 << chunkShift
)

// Quantize returns the table of w's rows (rows of dim values, one after
// another) in format f. Int8 and Int4 rows are byte for byte those of
// PyTorch's embedding_bag_byte_prepack and embedding_bag_4bit_prepack for
// the same float32 rows (which packs 4-bit rows of an even dim only);
// Float16 rounds to nearest even. A row holding NaN or an infinity, a
// Float16 row with a value beyond 65504 (float16's largest), an Int8 or
// Int4 row whose range overflows float32, or an Int4 row whose float16
// bias (its smallest value, rounded) or scale ((largest - bias)/15,
// rounded) overflows float16, is an error naming it that wraps
// optim.ErrNotFinite: no row reads back NaN or an infinity.
func Quantize(w []float32, dim int, f Format) (*Table, error) {
	if dim <= 0 || len(w)%dim != 0 {
		return nil, fmt.Errorf("serve: %d values are not rows of %d: %w", len(w), dim, errs.ErrShape)
	}
	if served(f, dim) == 0 {
		return nil, fmt.Errorf("serve: quantizing to %v: %w", f, errs.ErrOption)
	}
	rows := len(w) / dim
	data := make([]byte, rows*f.RowBytes(dim))
	if err := quantizeRows(data, w, dim, f, 0); err != nil {
		return nil, err
	}
	return newTable(f, dim, data), nil
}

// maxBFloat16 is bfloat16's largest finite value.
var maxBFloat16 = math.Float32frombits(0x7f7f0000)

// quantizeRows writes the rows of w, the first of them row first of the
// table, into data in format f.
func quantizeRows(data []byte, w []float32, dim int, f Format, first int) error {
	rb := f.RowBytes(dim)
	for r := range len(w) / dim {
		x := w[r*dim : (r+1)*dim]
		if p := kernel.FirstNonFinite(x); p >= 0 {
			return fmt.Errorf("serve: row %d holds %v at column %d: %w", first+r, x[p], p, errs.ErrNotFinite)
		}
		dst := data[r*rb : (r+1)*rb]
		switch f {
		case Float32:
			copy(dst, fileio.LittleEndianBytes(x))
		case Float16:
			lo, hi := kernel.MinMax(x)
			if big := max(-lo, hi); big > kernel.MaxFloat16 {
				j := slices.Index(x, hi)
				if -lo > hi {
					j = slices.Index(x, lo)
				}
				return fmt.Errorf("serve: row %d holds %v at column %d, beyond float16's largest value, %d: %w", first+r, x[j], j, kernel.MaxFloat16, errs.ErrNotFinite)
			}
			kernel.ToHalf(kernel.Float16, dst, x)
		case BFloat16:
			lo, hi := kernel.MinMax(x)
			if big := max(-lo, hi); big > maxBFloat16 {
				j := slices.Index(x, hi)
				if -lo > hi {
					j = slices.Index(x, lo)
				}
				return fmt.Errorf("serve: row %d holds %v at column %d, beyond bfloat16's largest value, %v: %w", first+r, x[j], j, maxBFloat16, errs.ErrNotFinite)
			}
			kernel.ToHalf(kernel.BFloat16, dst, x)
		case Int8, Int4:
			lo, hi := kernel.MinMax(x)
			if math.IsInf(float64(hi-lo), 0) {
				return fmt.Errorf("serve: row %d spans %v to %v, a range float32 cannot hold: %w", first+r, lo, hi, errs.ErrNotFinite)
			}
			if f == Int8 {
				kernel.QuantizeRow8(dst, x)
			} else {
				if bias, _, ok := kernel.Row4Fits(lo, hi); !ok {
					if math.IsInf(float64(bias), 0) {
						return fmt.Errorf("serve: row %d holds %v at column %d: int4's float16 bias, the row's smallest value, would overflow (float16's largest value is %d): %w",
							first+r, lo, slices.Index(x, lo), kernel.MaxFloat16, errs.ErrNotFinite)
					}
					return fmt.Errorf("serve: row %d spans %v to %v: int4's float16 scale, (%v - %v)/15 = %v, would overflow (float16's largest value is %d): %w",
						first+r, lo, hi, hi, bias, (hi-bias)/15, kernel.MaxFloat16, errs.ErrNotFinite)
				}
				kernel.QuantizeRow4(dst, x)
			}
		}
	}
	return nil
}

// FromBytes returns the table of rows of dim values in format f that
// data holds, such as the prepacked rows of PyTorch's
// embedding_bag_byte_prepack (Int8) or embedding_bag_4bit_prepack (Int4).
// The table uses data, which the caller must not change.
func FromBytes(f Format, dim int, data []byte) (*Table, error) {
	rb := served(f, dim)
	if dim <= 0 || rb == 0 || len(data)%rb != 0 {
		return nil, fmt.Errorf("serve: %d bytes are not rows of %d values in %v (%d bytes each): %w", len(data), dim, f, rb, errs.ErrShape)
	}
	return newTable(f, dim, data), nil
}

func newTable(f Format, dim int, data []byte) *Table {
	rb := f.RowBytes(dim)
	return &Table{format: f, rows: len(data) / rb, dim: dim, rowBytes: rb, stride: rb, data: data, add: addRows[f]}
}

// Format, Rows and Dim describe the table.
func (t *Table) Format() Format { return t.format }
func (t *Table) Rows() int      { return t.rows }
func (t *Table) Dim() int       { return t.dim }

// Bytes returns the table's rows in its format, one after another: the
// table's own memory, not to be changed; nil for a table Open mapped from
// a table file whose rows carry optimiser state between them. A table
// that deltas changed (Apply) gives a copy of its rows.
func (t *Table) Bytes() []byte {
	if t.stride != t.rowBytes {
		return nil
	}
	if t.patch == nil {
		return t.data
	}
	out := make([]byte, 0, t.rows*t.rowBytes)
	for id := range int64(t.rows) {
		out = append(out, t.row(id)...)
	}
	return out
}

// Close releases a table Open mapped: its methods then return errors
// wrapping ErrClosed. It does nothing to a table in memory. It must not
// run while another call on the table does.
func (t *Table) Close() error {
	if t.m == nil {
		return nil
	}
	t.data, t.closed = nil, true
	err := t.m.Close()
	t.m = nil
	return err
}

// checkIDs returns an error naming the first id outside [0, rows).
func (t *Table) checkIDs(ids []int64) error {
	if t.closed {
		return fmt.Errorf("serve: %w", errs.ErrClosed)
	}
	for k, id := range ids {
		if uint64(id) >= uint64(t.rows) {
			return fmt.Errorf("serve: ids[%d] = %d is outside the table's %d rows: %w", k, id, t.rows, errs.ErrIndexOutOfRange)
		}
	}
	return nil
}

// Lookup writes the values of rows ids into dst (len(ids)·Dim values):
// row ids[k] as float32 into dst[k·Dim:]. An id outside [0, Rows) is an
// error naming it, and dst is then unchanged.
func (t *Table) Lookup(dst []float32, ids []int64) error {
	if len(dst) != len(ids)*t.dim {
		return fmt.Errorf("serve: lookup of %d ids of %d values into %d: %w", len(ids), t.dim, len(dst), errs.ErrShape)
	}
	if err := t.checkIDs(ids); err != nil {
		return err
	}
	for k, id := range ids {
		out := dst[k*t.dim : (k+1)*t.dim]
		clear(out)
		t.add(out, t.row(id), 1)
	}
	return nil
}

func (t *Table) row(id int64) []byte {
	if t.patch != nil {
		if c := t.patch[id>>chunkShift]; c != nil {
			at := int(id&(chunkRows-1)) * t.stride
			return c[at : at+t.rowBytes]
		}
	}
	at := int(id) * t.stride
	return t.data[at : at+t.rowBytes]
}

// BagOptions are Bag's options: the zero value sums, with no weights, no
// padding, and offsets without the last one.
type BagOptions struct {
	// Mode is driver.BagSum or driver.BagMean (the sum over the bag's
	// number of ids that are not padding; an empty bag pools to zeros),
	// nn.EmbeddingBag's modes; Bag does not pool by the maximum.
	Mode driver.BagMode
	// Weights is nil or one weight per id: each row is multiplied by
	// its weight before pooling, in either mode.
	Weights []float32
	// IncludeLastOffset: offsets has one entry more than there are
	// bags, the last equal to len(ids) (PyTorch's include_last_offset).
	IncludeLastOffset bool
	// Padding, when not nil, names an id that is skipped: not pooled and
	// not counted in a mean.
	Padding *int64
}

// Bag pools bags of rows into dst (one row of Dim values per bag), as
// PyTorch's F.embedding_bag and torch.ops.quantized's
// embedding_bag_byte_rowwise_offsets and embedding_bag_4bit_rowwise_offsets
// do: bag b is ids[offsets[b]:offsets[b+1]], the last running to
// len(ids). offsets[0] must be 0, and offsets non-decreasing and at most
// len(ids). A bad id, offset or weight count is an error naming it, and
// dst is then unchanged. Bag runs on up to GOMAXPROCS goroutines for large
// batches.
func (t *Table) Bag(dst []float32, ids, offsets []int64, o BagOptions) error {
	bags := len(offsets)
	if o.IncludeLastOffset {
		bags--
		if bags < 0 {
			return fmt.Errorf("serve: IncludeLastOffset with no offsets: %w", errs.ErrShape)
		}
		if last := offsets[bags]; last != int64(len(ids)) {
			return fmt.Errorf("serve: the last offset is %d, not len(ids) = %d: %w", last, len(ids), errs.ErrIndexOutOfRange)
		}
	}
	if len(dst) != bags*t.dim {
		return fmt.Errorf("serve: %d bags of %d values into %d: %w", bags, t.dim, len(dst), errs.ErrShape)
	}
	if o.Weights != nil && len(o.Weights) != len(ids) {
		return fmt.Errorf("serve: %d weights for %d ids: %w", len(o.Weights), len(ids), errs.ErrShape)
	}
	if o.Mode != driver.BagSum && o.Mode != driver.BagMean {
		return fmt.Errorf("serve: bag mode %v: Bag pools by sum or mean: %w", o.Mode, errs.ErrOption)
	}
	for b, v := range offsets[:bags] {
		if b == 0 && v != 0 || b > 0 && v < offsets[b-1] || v > int64(len(ids)) {
			return fmt.Errorf("serve: offsets[%d] = %d: offsets start at 0 and rise to at most len(ids) = %d: %w", b, v, len(ids), errs.ErrIndexOutOfRange)
		}
	}
	if err := t.checkIDs(ids); err != nil {
		return err
	}
	pad := int64(-1)
	if o.Padding != nil {
		pad = *o.Padding
	}
	parallel.Run(bags, len(ids)*t.dim, bagTask{t, dst, ids, offsets[:bags], o.Weights, pad, o.Mode})
	return nil
}

// A bagTask pools a range of bags.
type bagTask struct {
	t       *Table
	dst     []float32
	ids     []int64
	offsets []int64 // the bags' starts
	w       []float32
	pad     int64
	mode    driver.BagMode
}

func (k bagTask) Part(lo, hi int) int {
	t := k.t
	for b := lo; b < hi; b++ {
		end := int64(len(k.ids))
		if b+1 < len(k.offsets) {
			end = k.offsets[b+1]
		}
		out := k.dst[b*t.dim : (b+1)*t.dim]
		clear(out)
		n := 0
		for i := k.offsets[b]; i < end; i++ {
			id := k.ids[i]
			if id == k.pad {
				continue
			}
			w := float32(1)
			if k.w != nil {
				w = k.w[i]
			}
			t.add(out, t.row(id), w)
			n++
		}
		if k.mode == driver.BagMean && n > 1 {
			inv := 1 / float32(n)
			for j := range out {
				out[j] *= inv
			}
		}
	}
	return -1
}
