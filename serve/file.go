package serve

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/gathergrad/gather/table/driver"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/fileio"
)

// The metadata keys under which Save records a quantized table's layout.
const (
	formatKey = "gathergrad.format"
	dimKey    = "gathergrad.dim"
)

// Save writes the table to path as a safetensors file holding one tensor,
// name: Float32 rows as F32 [rows, dim], Float16 and BFloat16 rows as F16
// and BF16 [rows, dim],
// Int8 and Int4 rows as U8 [rows, row bytes] (PyTorch's prepacked rows:
// torch.frombuffer of the tensor's bytes, reshaped, feeds its
// *_rowwise_offsets ops), with the format and dim in the metadata
// ("gathergrad.format", "gathergrad.dim"). The file is replaced
// atomically: a crash leaves the old file or the new one. A path that is
// the file the table was opened from, or another file this process
// reads, under any name, is an error wrapping ErrSameFile naming both.
func (t *Table) Save(path, name string) error {
	head, err := header(name, t.format, t.rows, t.dim)
	if err != nil {
		return err
	}
	if t.m != nil {
		if err := fileio.Distinct(path, t.m.Name()); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}
	return fileio.WriteAtomic(path, func(f *os.File) error {
		w := bufio.NewWriterSize(fileio.Writer(f), 1<<20)
		w.Write(head)
		if t.patch == nil && t.stride == t.rowBytes {
			w.Write(t.data)
		} else {
			for id := range int64(t.rows) {
				w.Write(t.row(id))
			}
		}
		return w.Flush()
	})
}

// header returns the start of the file of a table of rows rows of dim
// values in format f, up to its data.
func header(name string, f Format, rows, dim int) ([]byte, error) {
	dtype, cols := f.Safetensors(), dim
	if f == Int8 || f == Int4 {
		cols = f.RowBytes(dim)
	}
	return checkpoint.Header(name, dtype, []int{rows, cols}, map[string]string{formatKey: f.String(), dimKey: strconv.Itoa(dim)})
}

// Open maps tensor name of the safetensors file at path as a read-only
// table, without reading it into memory: F32 or F16 [rows, dim] (a table
// file, a checkpoint), or the rows Save wrote of any format. Close
// releases it. A tensor missing, of another dtype or rank, or whose
// recorded layout does not fit its shape is an error naming the file
// that wraps checkpoint.ErrMismatch (or ErrFormat for a malformed file).
func Open(path, name string) (*Table, error) {
	e, meta, err := inspect(path, name)
	if err != nil {
		return nil, err
	}
	if len(e.Shape) != 2 {
		return nil, fmt.Errorf("serve: %s: tensor %q has shape %v, not [rows, dim]: %w", path, name, e.Shape, checkpoint.ErrMismatch)
	}
	f, dim := Float32, e.Shape[1]
	switch e.Format {
	case "F32":
		if dim, err = valueColumns(meta, e.Shape[1]); err != nil {
			return nil, fmt.Errorf("serve: %s: %w", path, err)
		}
	case "F16":
		f = Float16
	case "BF16":
		f = BFloat16
	case "U8":
		if f, err = driver.ParseFormat(meta[formatKey]); err != nil || f != Int8 && f != Int4 {
			return nil, fmt.Errorf("serve: %s: tensor %q of bytes has format %q in its metadata, not int8-rowwise or int4-rowwise: %w", path, name, meta[formatKey], checkpoint.ErrMismatch)
		}
		if dim, err = strconv.Atoi(meta[dimKey]); err != nil || dim <= 0 || f.RowBytes(dim) != e.Shape[1] {
			return nil, fmt.Errorf("serve: %s: tensor %q has rows of %d bytes, which %v rows of dim %q are not: %w", path, name, e.Shape[1], f, meta[dimKey], checkpoint.ErrFormat)
		}
	default:
		return nil, fmt.Errorf("serve: %s: tensor %q is %s, not F32, F16, BF16 or U8: %w", path, name, e.Format, checkpoint.ErrMismatch)
	}
	if dim == 0 || e.Shape[0] == 0 {
		return nil, fmt.Errorf("serve: %s: tensor %q has shape %v, an empty table: %w", path, name, e.Shape, checkpoint.ErrMismatch)
	}
	m, err := fileio.MapRead(path)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	t := newTable(f, dim, m.Bytes()[e.Offset:e.Offset+e.Size])
	t.m, t.stride, t.rows, t.name = m, int(e.Size)/e.Shape[0], e.Shape[0], name
	return t, nil
}

// valueColumns returns how many of a table file's width columns are the
// row's values: the dim of its layout (driver.LayoutKey: "weight:64,sum:1"
// for rows of 64 values and Adagrad's sum), all of them for a table file
// without state or a checkpoint's tensor.
func valueColumns(meta map[string]string, width int) (int, error) {
	desc, ok := meta[driver.LayoutKey]
	if !ok {
		return width, nil
	}
	dim, _, err := driver.ParseLayout(desc)
	if err != nil {
		return 0, err
	}
	if dim > width {
		return 0, fmt.Errorf("metadata %s = %q names %d values in rows %d wide: %w", driver.LayoutKey, desc, dim, width, checkpoint.ErrFormat)
	}
	return dim, nil
}

// inspect returns tensor name of the safetensors file at path, and the
// file's metadata.
func inspect(path, name string) (checkpoint.TensorInfo, map[string]string, error) {
	infos, meta, err := checkpoint.Inspect(path)
	if err != nil {
		return checkpoint.TensorInfo{}, nil, err
	}
	k := slices.IndexFunc(infos, func(e checkpoint.TensorInfo) bool { return e.Name == name })
	if k < 0 {
		held := make([]string, len(infos))
		for i, e := range infos {
			held[i] = strconv.Quote(e.Name)
		}
		return checkpoint.TensorInfo{}, nil, fmt.Errorf("serve: %s holds no tensor %q; it holds %s: %w", path, name, strings.Join(held, ", "), checkpoint.ErrMismatch)
	}
	return infos[k], meta, nil
}

// QuantizeFile writes tensor name of the safetensors file src, F32 rows
// [rows, dim] (a table file, a checkpoint), to dst in format f, as Save
// writes a table, reading src mapped a block of rows at a time: the table
// need not fit in memory. A row that is not finite is an error naming it,
// and dst is then untouched. A dst that is src, or another file this
// process reads, under any name (a hard or symbolic link), is an error
// wrapping ErrSameFile naming both, and nothing is written.
func QuantizeFile(dst, src, name string, f Format) error {
	if err := fileio.Distinct(dst, src); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	e, meta, err := inspect(src, name)
	if err != nil {
		return err
	}
	if e.Format != "F32" || len(e.Shape) != 2 || e.Shape[1] == 0 {
		return fmt.Errorf("serve: %s: tensor %q is %s %v, not F32 [rows, dim]: %w", src, name, e.Format, e.Shape, checkpoint.ErrMismatch)
	}
	rows, width := e.Shape[0], e.Shape[1]
	dim, err := valueColumns(meta, width)
	if err != nil {
		return fmt.Errorf("serve: %s: %w", src, err)
	}
	rb := served(f, dim)
	if rb == 0 {
		return fmt.Errorf("serve: quantizing to %v: %w", f, ErrOption)
	}
	m, err := fileio.MapRead(src)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer m.Close()
	w, err := fileio.Floats[float32](m.Bytes(), e.Offset, rows*width)
	if err != nil {
		return fmt.Errorf("serve: %s: %w", src, err)
	}
	head, err := header(name, f, rows, dim)
	if err != nil {
		return err
	}
	return fileio.WriteAtomic(dst, func(out *os.File) error {
		bw := bufio.NewWriterSize(fileio.Writer(out), 1<<20)
		bw.Write(head)
		per := max(1, (1<<20)/(dim*4))
		buf := make([]byte, per*rb)
		vals := make([]float32, per*dim)
		for lo := 0; lo < rows; lo += per {
			n := min(per, rows-lo)
			if err := fileio.Guard(func() error {
				for r := range n {
					copy(vals[r*dim:(r+1)*dim], w[(lo+r)*width:])
				}
				return quantizeRows(buf[:n*rb], vals[:n*dim], dim, f, lo)
			}); err != nil {
				return fmt.Errorf("%w (in %s)", err, src)
			}
			bw.Write(buf[:n*rb])
		}
		return bw.Flush()
	})
}
