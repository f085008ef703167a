package table

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/parallel"
	"github.com/gathergrad/gather/internal/tablerows"
)

// ErrClosed: a table whose file was closed was used, or a graph that
// looks it up was run after Close. gather.Cause finds it in the error of a
// Gorgonia machine.
var ErrClosed = errs.ErrClosed

// ErrInUse: Open of a file another Open holds open, in this process or
// another, or a write onto such a file's path (Create, checkpoint.Save,
// checkpoint.Write, wordvec.Write), which leaves the file untouched. It
// is checkpoint.ErrInUse.
var ErrInUse = errs.ErrInUse

// ErrSameFile: Create or Export onto a file this process reads, under
// any of its names (the same path spelt another way, a hard or symbolic
// link), such as an open table's file. The error names both; nothing is
// written. It is checkpoint.ErrSameFile.
var ErrSameFile = errs.ErrSameFile

// Create creates at path a safetensors file holding one tensor,
// "<name>.weight", a [vocab, dim] table of dtype dt (Float32 or Float64)
// for Open, initialised as nn.NewEmbedding initialises a table: from
// N(0, 1) with WithSeed's seed (the same values NewEmbedding draws for
// that seed), or by WithInit's initialiser, called once per block of
// 4,096 rows with the shape (rows, dim); WithPadding's row starts at zero.
// Blocks are drawn in parallel and written straight to the file, so it
// runs at the disk's speed and never holds more than a few blocks in
// memory.
//
// The file's space is reserved before anything is written (fallocate), so
// a disk without room is an error here, not a fault during training, and
// the file is written atomically, as checkpoint.Write writes: a crash
// leaves no partial table at path. NumPy, PyTorch's safetensors and
// checkpoint.Read read it.
//
// An existing file at path is an error wrapping os.ErrExist unless
// WithReplace is given; a file an open table holds (Open, in this process
// or another) is an error wrapping ErrInUse, and is left untouched.
func Create(path, name string, vocab, dim int, dt tensor.Dtype, opts ...driver.Option) error {
	prefix := fmt.Sprintf("table %q", name)
	var cfg driver.Config
	for _, o := range opts {
		o(&cfg)
	}
	if name == "" {
		return fmt.Errorf("%s: the table needs a name: %w", prefix, errs.ErrOption)
	}
	if vocab <= 0 || dim <= 0 {
		return fmt.Errorf("%s: vocabulary %d and dimension %d must be positive: %w", prefix, vocab, dim, errs.ErrShape)
	}
	format := "F32"
	switch dt {
	case tensor.Float32:
	case tensor.Float64:
		format = "F64"
	default:
		return fmt.Errorf("%s: dtype must be float32 or float64, got %v: %w", prefix, dt, errs.ErrDtype)
	}
	if cfg.Half != 0 && (!isHalf(driver.Format(cfg.Half)) || dt != tensor.Float32) {
		return fmt.Errorf("%s: half format %v for a %v table; WithHalf takes Float16 or BFloat16 for a float32 table: %w", prefix, driver.Format(cfg.Half), dt, errs.ErrOption)
	}
	if cfg.HasPad {
		var err error
		if cfg.Pad, err = operand.NormIndex(prefix, cfg.Pad, vocab); err != nil {
			return err
		}
	}
	if _, err := os.Lstat(path); err == nil && !cfg.Replace {
		return fmt.Errorf("%s: %s exists; give WithReplace to replace it: %w", prefix, path, os.ErrExist)
	}
	key, width, meta, err := layout(prefix, name, dim, cfg.State)
	if err != nil {
		return err
	}
	shape := []int{vocab, width}
	rowBytes := int64(width) * int64(dt.Size())
	if cfg.Half != 0 {
		meta[valuesKey] = driver.Format(cfg.Half).Safetensors()
		format = driver.Format(cfg.Half).Safetensors()
		rowBytes = int64(2*dim + 4*(width-dim))
		if width > dim {
			format, shape = "U8", []int{vocab, int(rowBytes)}
		}
	}
	header, err := checkpoint.Header(key, format, shape, meta)
	if err != nil {
		return err
	}
	size := int64(len(header)) + int64(vocab)*rowBytes
	return writeTable(path, func(f *os.File) error {
		if err := fileio.Reserve(f, size); err != nil {
			return fmt.Errorf("%s: reserving %d bytes for the table: %w", prefix, size, err)
		}
		if _, err := fileio.WriteAt(f, header, 0); err != nil {
			return err
		}
		if dt == tensor.Float32 {
			return fill[float32](f, int64(len(header)), prefix, vocab, dim, width, rowBytes, dt, cfg)
		}
		return fill[float64](f, int64(len(header)), prefix, vocab, dim, width, rowBytes, dt, cfg)
	})
}

// fill writes the table's initial values (of dtype dt, whose Go type is
// T), block by block in parallel, to f from offset on, each row's dim
// values followed by width-dim zeros (its optimiser state), rowBytes a
// row (the values in the half format cfg.Half, if set); errors start with
// prefix.
func fill[T float32 | float64](f *os.File, offset int64, prefix string, vocab, dim, width int, rowBytes int64, dt tensor.Dtype, cfg driver.Config) error {
	const rows = kernel.NormalBlock
	blocks := (vocab + rows - 1) / rows
	var mu sync.Mutex
	var first error
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
	}
	parallel.For(blocks, vocab*dim, func(lo, hi int) {
		buf := make([]T, rows*dim)
		var wide []T // rows with their state, if the table has state
		if width > dim {
			wide = make([]T, rows*width)
		}
		for b := lo; b < hi; b++ {
			r0, r1 := b*rows, min((b+1)*rows, vocab)
			v, err := tablerows.Block(cfg, prefix, dt, int64(r0), r1-r0, dim, width, buf, wide)
			if err != nil {
				fail(err)
				return
			}
			b := fileio.LittleEndianBytes(v)
			if cfg.Half != 0 {
				b = halfBlock(driver.Format(cfg.Half), b, r1-r0, dim, rowBytes)
			}
			if _, err := fileio.WriteAt(f, b, offset+int64(r0)*rowBytes); err != nil {
				fail(err)
				return
			}
		}
	})
	return first
}

// A File is a table mapped read-write from a safetensors file (as Create
// makes it): its Weight is backed by the file, never copied into the Go
// heap. A File is held by one Open at a time, in this process or another.
type File struct {
	name   string
	m      *fileio.Mapping
	w      *tensor.Dense
	offset int64 // of the table's first byte in the file
	row    int64 // bytes per row
	closed bool
}

// Open maps the table "<name>.weight" of the safetensors file at path
// read-write into memory.
//
// Only a table file opens: one holding the tensor "<name>.weight" alone
// (as Create makes it). Any other file, such as a checkpoint of several
// tensors, is an error wrapping checkpoint.ErrMismatch that says what the
// file holds, as is a tensor of another rank or dtype; a malformed file,
// or one whose tensor is not aligned for mapping, is checkpoint.ErrFormat.
// A file is opened by one Open at a time: a second open, in this process
// or another, is an error wrapping ErrInUse.
//
// Updates reach the file as the system writes the mapping back; Sync makes
// every update so far durable, and Close syncs and unmaps. After a crash
// between syncs the file is still a valid safetensors file of the table's
// shape: each row holds its values from some step since the last Sync (the
// header is never rewritten).
func Open(path, name string) (*File, error) {
	prefix := fmt.Sprintf("table %q", name)
	infos, _, err := checkpoint.Inspect(path)
	if err != nil {
		return nil, err
	}
	key := name + ".weight"
	if len(infos) == 1 && infos[0].Name == name+rowsSuffix {
		return nil, fmt.Errorf("%s: %s holds the table with its optimiser state (%q); open it with OpenCached: %w",
			prefix, path, infos[0].Name, checkpoint.ErrMismatch)
	}
	if len(infos) != 1 || infos[0].Name != key {
		names := make([]string, 0, min(len(infos), 4))
		for _, in := range infos[:min(len(infos), 4)] {
			names = append(names, strconv.Quote(in.Name))
		}
		if len(infos) > 4 {
			names = append(names, "...")
		}
		return nil, fmt.Errorf("%s: %s holds %d tensors (%s), not a table file, which holds %q alone; "+
			"load a checkpoint with checkpoint.Load: %w", prefix, path, len(infos), strings.Join(names, ", "), key, checkpoint.ErrMismatch)
	}
	info := infos[0]
	switch {
	case info.Format != "F32" && info.Format != "F64":
		return nil, fmt.Errorf("%s: %s's %q is %s; a table Open maps is F32 or F64 (OpenCached opens a half one): %w", prefix, path, key, info.Format, checkpoint.ErrMismatch)
	case len(info.Shape) != 2 || info.Shape[0] == 0 || info.Shape[1] == 0:
		return nil, fmt.Errorf("%s: %s's %q has shape %v; a table is [vocab, dim]: %w", prefix, path, key, info.Shape, checkpoint.ErrMismatch)
	}
	vocab, dim := info.Shape[0], info.Shape[1]
	m, err := fileio.Map(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", prefix, err)
	}
	w, esize, err := mapped(m, info.Format, info.Offset, vocab, dim)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %s: %v: %w", prefix, path, err, checkpoint.ErrFormat)
	}
	return &File{name: name, m: m, w: w, offset: info.Offset, row: int64(dim) * esize}, nil
}

// mapped returns the [vocab, dim] tensor of format ("F32" or "F64") at
// offset in m, and its element size.
func mapped(m *fileio.Mapping, format string, offset int64, vocab, dim int) (*tensor.Dense, int64, error) {
	dt := tensor.Float64
	if format == "F32" {
		dt = tensor.Float32
	}
	w, err := floatsAt(m.Bytes(), offset, dt, vocab, dim)
	return w, int64(dt.Size()), err
}

// floatsAt returns the [rows, cols] tensor of dtype dt (Float32 or
// Float64) whose values are the bytes of b from offset on, not a copy.
func floatsAt(b []byte, offset int64, dt tensor.Dtype, rows, cols int) (*tensor.Dense, error) {
	if dt == tensor.Float32 {
		v, err := fileio.Floats[float32](b, offset, rows*cols)
		if err != nil {
			return nil, err
		}
		return tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(v)), nil
	}
	v, err := fileio.Floats[float64](b, offset, rows*cols)
	if err != nil {
		return nil, err
	}
	return tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(v)), nil
}

// Name returns the table's name.
func (f *File) Name() string { return f.name }

// Weight returns the [vocab, dim] table, backed by the mapping: writes to
// it reach the file. After Close it is an error wrapping ErrClosed, and
// the tensor returned before must not be used.
func (f *File) Weight() (*tensor.Dense, error) {
	if f.closed {
		return nil, fmt.Errorf("table %q: %w", f.name, ErrClosed)
	}
	return f.w, nil
}

// WillNeed asks the system to bring row r into memory ahead of its use
// (madvise WILLNEED), so that a lookup finds it there, or on its way,
// instead of faulting it in. It does nothing after Close.
func (f *File) WillNeed(r int64) {
	if f.closed {
		return
	}
	f.m.WillNeed(f.offset+r*f.row, f.row)
}

// Guard runs fn, which reads or writes the table, with an I/O error on the
// mapping turned into an error (debug.SetPanicOnFault) on the calling
// goroutine, rather than the end of the process.
func (f *File) Guard(fn func() error) error {
	if err := fileio.Guard(fn); err != nil {
		return fmt.Errorf("table %q: %w", f.name, err)
	}
	return nil
}

// Sync makes every update so far durable: it writes the mapping back to
// the file and the file to its disk.
func (f *File) Sync() error {
	if f.closed {
		return fmt.Errorf("table %q: %w", f.name, ErrClosed)
	}
	if err := f.m.Sync(); err != nil {
		return fmt.Errorf("table %q: %w", f.name, err)
	}
	return nil
}

// Close syncs and unmaps the table, and frees its file for another Open.
// After it, Weight and Sync fail with ErrClosed. A second Close does
// nothing.
func (f *File) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	if err := f.m.Close(); err != nil {
		return fmt.Errorf("table %q: %w", f.name, err)
	}
	return nil
}
