package table

import (
	"context"
	"fmt"
	"os"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/rowcache"
)

// copyChunk bounds the memory of Export and Import: rows move in chunks
// of this many bytes.
const copyChunk = 16 << 20

// Export writes every row of src, as its Schema describes them (float32
// or float64 values and optimiser state), and the optimiser's step count
// steps, to a table file at path, as Create with WithState lays one out: OpenCached
// opens it, NumPy and PyTorch's safetensors read it. It reads src in
// chunks of 16 MB, in order, so its memory stays bounded for any table
// (a cluster.Store: one pipelined round trip per master and chunk), and
// writes atomically, as checkpoint.Write does.
func Export(ctx context.Context, path string, src driver.Store, steps int64) error {
	if src == nil {
		return fmt.Errorf("table: Export needs a store: %w", errs.ErrOption)
	}
	sc := src.Schema()
	name, dim, dt, cols := sc.Name, sc.Dim, sc.Dtype, sc.Columns
	prefix := fmt.Sprintf("table %q", name)
	if sc.Format != format(dt, 0) || (dt != tensor.Float32 && dt != tensor.Float64) || steps < 0 {
		return fmt.Errorf("%s: Export needs float32 or float64 values (the store's are %v) and a step count of at least 0 (%d): %w", prefix, sc.Format, steps, errs.ErrOption)
	}
	key, width, meta, err := layout(prefix, name, dim, cols)
	if err != nil {
		return err
	}
	if len(cols) == 0 {
		return fmt.Errorf("%s: Export writes a table with its optimiser's state; give its columns: %w", prefix, errs.ErrOption)
	}
	rb := width * int(dt.Size())
	if src.RowBytes() != rb {
		return fmt.Errorf("%s: the store's rows are %d bytes; %d values of %v are %d: %w", prefix, src.RowBytes(), width, dt, rb, errs.ErrShape)
	}
	meta[stepKey] = formatSteps(steps)
	format := "F32"
	if dt == tensor.Float64 {
		format = "F64"
	}
	rows := src.Rows()
	header, err := checkpoint.Header(key, format, []int{int(rows), width}, meta)
	if err != nil {
		return err
	}
	return writeTable(path, func(f *os.File) error {
		if err := fileio.Reserve(f, int64(len(header))+rows*int64(rb)); err != nil {
			return fmt.Errorf("%s: %w", prefix, err)
		}
		if _, err := fileio.WriteAt(f, header, 0); err != nil {
			return err
		}
		return chunks(rows, rb, func(ids []int64, buf []byte) error {
			if err := src.ReadRows(ctx, ids, buf); err != nil {
				return err
			}
			_, err := fileio.WriteAt(f, buf, int64(len(header))+ids[0]*int64(rb))
			return err
		})
	})
}

// Import writes every row of the table file at path (as Export or Create
// with WithState makes it) into dst, in chunks of 16 MB, and returns the
// optimiser's step count the file records. The file must hold the table
// dst's Schema describes (its name, values and state), as many rows:
// anything else is an error wrapping checkpoint.ErrMismatch (or
// ErrFormat for a malformed file) before anything is written. A file an
// open table holds is ErrInUse; a file whose journal holds changes is an
// error: open it with OpenCached first, which applies or drops them.
func Import(ctx context.Context, dst driver.Store, path string) (int64, error) {
	if dst == nil {
		return 0, fmt.Errorf("table: Import needs a store: %w", errs.ErrOption)
	}
	sc := dst.Schema()
	prefix := fmt.Sprintf("table %q", sc.Name)
	t, err := inspectRows(path)
	if err != nil {
		return 0, err
	}
	if t.name != sc.Name || t.dim != sc.Dim || !driver.SameColumns(t.cols, sc.Columns) || t.half != 0 {
		return 0, fmt.Errorf("%s: %s holds the table %q of %d values and the state %v; the store holds %q of %d and %v: %w",
			prefix, path, t.name, t.dim, t.cols, sc.Name, sc.Dim, sc.Columns, checkpoint.ErrMismatch)
	}
	info, dt := t.info, t.info.Dtype
	rb := info.Shape[1] * int(dt.Size())
	if dst.RowBytes() != rb || dst.Rows() != int64(info.Shape[0]) {
		return 0, fmt.Errorf("%s: %s holds %d rows of %d bytes; the store takes %d rows of %d bytes: %w",
			prefix, path, info.Shape[0], rb, dst.Rows(), dst.RowBytes(), checkpoint.ErrMismatch)
	}
	if rowcache.Holds(journalPath(path)) {
		return 0, fmt.Errorf("%s: %s holds changes; open the table with OpenCached first: %w", prefix, journalPath(path), checkpoint.ErrMismatch)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", prefix, err)
	}
	defer f.Close()
	if err := fileio.Lock(f); err != nil {
		return 0, fmt.Errorf("%s: %w", prefix, err)
	}
	at, err := stepsOffset(f)
	if err != nil {
		return 0, fmt.Errorf("%s: %s: %v: %w", prefix, path, err, checkpoint.ErrFormat)
	}
	digits := make([]byte, stepDigits)
	if _, err := f.ReadAt(digits, at); err != nil {
		return 0, fmt.Errorf("%s: %w", prefix, err)
	}
	steps, ok := parseSteps(digits)
	if !ok {
		return 0, fmt.Errorf("%s: %s: step count %q: %w", prefix, path, digits, checkpoint.ErrFormat)
	}
	err = chunks(int64(info.Shape[0]), rb, func(ids []int64, buf []byte) error {
		if _, err := f.ReadAt(buf, info.Offset+ids[0]*int64(rb)); err != nil {
			return err
		}
		return dst.WriteRows(ctx, ids, buf)
	})
	if err != nil {
		return 0, errs.Prefix(prefix, err)
	}
	return steps, nil
}

// chunks calls fn for the rows 0 to rows-1 in order, in runs of ids that
// fill at most copyChunk bytes, with a buffer of the run's size.
func chunks(rows int64, rowBytes int, fn func(ids []int64, buf []byte) error) error {
	per := int64(max(1, copyChunk/rowBytes))
	ids := make([]int64, 0, min(per, rows))
	buf := make([]byte, min(per, rows)*int64(rowBytes))
	for lo := int64(0); lo < rows; lo += per {
		hi := min(lo+per, rows)
		ids = ids[:0]
		for id := lo; id < hi; id++ {
			ids = append(ids, id)
		}
		if err := fn(ids, buf[:len(ids)*rowBytes]); err != nil {
			return err
		}
	}
	return nil
}

// ReadValues returns the values of the rows ids of src as they are now,
// without their optimiser state: a [len(ids), dim] tensor of the store's
// dtype (float32 for a half format, each value widened exactly), in one
// ReadRows. An id outside the store is the store's error, and nothing
// is returned.
func ReadValues(ctx context.Context, src driver.Store, ids []int64) (*tensor.Dense, error) {
	if src == nil {
		return nil, fmt.Errorf("table: ReadValues needs a store: %w", errs.ErrOption)
	}
	sc := src.Schema()
	rb, dim := src.RowBytes(), sc.Dim
	es := int(sc.Dtype.Size())
	if sc.Dtype != tensor.Float32 && sc.Dtype != tensor.Float64 || sc.Format != format(sc.Dtype, sc.Format) {
		return nil, fmt.Errorf("table %q: ReadValues reads float32, float64 and half rows, not %v: %w", sc.Name, sc.Format, errs.ErrDtype)
	}
	raw := make([]byte, len(ids)*rb)
	if err := src.ReadRows(ctx, ids, raw); err != nil {
		return nil, err
	}
	out := make([]byte, len(ids)*dim*es)
	for k := range ids {
		row, dst := raw[k*rb:(k+1)*rb], out[k*dim*es:(k+1)*dim*es]
		if isHalf(sc.Format) {
			kernel.HalfToFloatBytes(halfOf(sc.Format), dst, row[:2*dim])
		} else {
			copy(dst, row[:dim*es])
		}
	}
	return floatsAt(out, 0, sc.Dtype, len(ids), dim)
}
