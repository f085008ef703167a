package nn

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
)

// forCreateTable and forOpenEmbedding are the options CreateTable and
// OpenEmbedding accept.
const (
	forCreateTable   = optInit | optSeed | optPadding
	forOpenEmbedding = optPadding | optFrozen | optSparse | optMaxNorm | optFreq
)

// CreateTable creates at path a safetensors file holding one tensor,
// "<name>.weight", a [vocab, dim] table of dtype dt (Float32 or Float64)
// for OpenEmbedding, initialised as NewEmbedding initialises a table:
// from N(0, 1) with EmbeddingSeed's seed (the same values NewEmbedding
// draws for that seed), or by EmbeddingInit's initialiser, called once
// per block of 4,096 rows with the shape (rows, dim); EmbeddingPadding's
// row starts at zero. Blocks are drawn in parallel and written straight to
// the file, so it runs at the disk's speed and never holds more than a
// few blocks in memory.
//
// The file's space is reserved before anything is written (fallocate), so
// a disk without room is an error here, not a fault during training, and
// the file is written atomically, as checkpoint.Write writes: a crash
// leaves no partial table at path. NumPy, PyTorch's safetensors and
// checkpoint.Read read it.
func CreateTable(path, name string, vocab, dim int, dt tensor.Dtype, opts ...Option) error {
	prefix := fmt.Sprintf("table %q", name)
	cfg, err := newConfig(prefix, "CreateTable", forCreateTable, opts)
	if err != nil {
		return err
	}
	if name == "" {
		return fmt.Errorf("%s: the table needs a name: %w", prefix, gather.ErrOption)
	}
	if vocab <= 0 || dim <= 0 {
		return fmt.Errorf("%s: vocabulary %d and dimension %d must be positive: %w", prefix, vocab, dim, gather.ErrShape)
	}
	format := "F32"
	switch dt {
	case tensor.Float32:
	case tensor.Float64:
		format = "F64"
	default:
		return fmt.Errorf("%s: dtype must be float32 or float64, got %v: %w", prefix, dt, gather.ErrDtype)
	}
	if cfg.hasPad {
		if cfg.pad < -vocab || cfg.pad >= vocab {
			return fmt.Errorf("%s: padding id %d is out of range [%d, %d]: %w", prefix, cfg.pad, -vocab, vocab-1, gather.ErrIndexOutOfRange)
		}
		if cfg.pad < 0 {
			cfg.pad += vocab
		}
	}
	header, err := checkpoint.Header(name+".weight", format, []int{vocab, dim})
	if err != nil {
		return err
	}
	esize := int64(dt.Size())
	size := int64(len(header)) + int64(vocab)*int64(dim)*esize
	return fileio.WriteAtomic(path, func(f *os.File) error {
		if err := fileio.Reserve(f, size); err != nil {
			return fmt.Errorf("%s: reserving %d bytes for the table: %w", prefix, size, err)
		}
		if _, err := f.WriteAt(header, 0); err != nil {
			return err
		}
		if dt == tensor.Float32 {
			return fillTable[float32](f, int64(len(header)), prefix, vocab, dim, dt, cfg)
		}
		return fillTable[float64](f, int64(len(header)), prefix, vocab, dim, dt, cfg)
	})
}

// fillTable writes the table's initial values (of dtype dt, whose Go type
// is T), block by block in parallel, to f from offset on; errors start with
// prefix.
func fillTable[T float32 | float64](f *os.File, offset int64, prefix string, vocab, dim int, dt tensor.Dtype, cfg config) error {
	blocks := (vocab + initRows - 1) / initRows
	var mu sync.Mutex
	var first error
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
	}
	kernel.ParallelFor(blocks, kernel.Workers(vocab*dim, blocks), func(lo, hi int) {
		buf := make([]T, initRows*dim)
		for b := lo; b < hi; b++ {
			r0, r1 := b*initRows, min((b+1)*initRows, vocab)
			v := buf[:(r1-r0)*dim]
			if cfg.init == nil {
				// One block per call: normalBlocks seeds it by its row.
				normalBlocks(v, cfg.seed, dim, r0)
			} else {
				got, ok := cfg.init(dt, r1-r0, dim).([]T)
				if !ok || len(got) != len(v) {
					fail(fmt.Errorf("%s: the initialiser returned a %T of %d values for a block of (%d, %d): %w", prefix, got, len(got), r1-r0, dim, gather.ErrShape))
					return
				}
				copy(v, got)
			}
			if cfg.hasPad && cfg.pad >= r0 && cfg.pad < r1 {
				clear(v[(cfg.pad-r0)*dim : (cfg.pad-r0+1)*dim])
			}
			if _, err := f.WriteAt(fileio.LittleEndianBytes(v), offset+int64(r0)*int64(dim)*int64(dt.Size())); err != nil {
				fail(err)
				return
			}
		}
	})
	return first
}

// ErrClosed: an embedding whose file was closed was used.
var ErrClosed = errors.New("the table's file is closed")

// ErrInUse: OpenEmbedding of a file another OpenEmbedding holds open, in
// this process or another.
var ErrInUse = errors.New("the table's file is in use")

// OpenEmbedding maps the table "<name>.weight" of the safetensors file at
// path (as CreateTable makes it) read-write into memory and returns it as
// a row-sparse embedding of g named name: lookups, bags, Step and the
// optimisers work on it as on an in-memory table, and it is never copied
// into the Go heap, so a table may be larger than the machine's memory.
// Options: EmbeddingPadding, EmbeddingMaxNorm, EmbeddingScaleGradByFreq
// and EmbeddingFrozen (which makes it a read-only, dense-free lookup
// table); EmbeddingSparse is implied. The padding row keeps the file's
// values.
//
// A file whose tensor is missing, of another rank or dtype, or not aligned
// for mapping is an error (checkpoint.ErrFormat), as is a malformed file.
// A file is opened by one OpenEmbedding at a time: a second open, in this
// process or another, is an error wrapping ErrInUse.
//
// Updates reach the file as the system writes the mapping back; Sync makes
// every update so far durable, and Close syncs and unmaps. After a crash
// between syncs the file is still a valid safetensors file of the table's
// shape: each row holds its values from some step since the last Sync (the
// header is never rewritten). For exact restore points, checkpoint.Save
// the embedding (and its optimiser's state) at the steps to keep.
//
// I/O errors on the mapping: Step runs the optimiser with faults turned
// into errors (debug.SetPanicOnFault) on its goroutine, and Sync and Close
// return the errors msync and fsync report. A fault elsewhere, in a lookup
// run by Gorgonia's machine or on another of the optimiser's worker
// goroutines, is not covered: the process ends with a fault report
// naming the address.
func OpenEmbedding(g *gorgonia.ExprGraph, path, name string, opts ...Option) (*Embedding, error) {
	prefix := fmt.Sprintf("embedding %q", name)
	cfg, err := newConfig(prefix, "OpenEmbedding", forOpenEmbedding, opts)
	if err != nil {
		return nil, err
	}
	if err := checkNewNode(prefix, g, name); err != nil {
		return nil, err
	}
	infos, _, err := checkpoint.Inspect(path)
	if err != nil {
		return nil, err
	}
	key := name + ".weight"
	var info *checkpoint.TensorInfo
	for i := range infos {
		if infos[i].Name == key {
			info = &infos[i]
		}
	}
	switch {
	case info == nil:
		return nil, fmt.Errorf("%s: %s holds no tensor %q: %w", prefix, path, key, checkpoint.ErrFormat)
	case info.Format != "F32" && info.Format != "F64":
		return nil, fmt.Errorf("%s: %s's %q is %s; a table is F32 or F64: %w", prefix, path, key, info.Format, checkpoint.ErrFormat)
	case len(info.Shape) != 2 || info.Shape[0] == 0 || info.Shape[1] == 0:
		return nil, fmt.Errorf("%s: %s's %q has shape %v; a table is [vocab, dim]: %w", prefix, path, key, info.Shape, checkpoint.ErrFormat)
	}
	vocab, dim := info.Shape[0], info.Shape[1]
	if cfg.hasPad {
		if cfg.pad < -vocab || cfg.pad >= vocab {
			return nil, fmt.Errorf("%s: padding id %d is out of range [%d, %d]: %w", prefix, cfg.pad, -vocab, vocab-1, gather.ErrIndexOutOfRange)
		}
		if cfg.pad < 0 {
			cfg.pad += vocab
		}
	}
	m, err := fileio.Map(path)
	if errors.Is(err, fileio.ErrLocked) {
		return nil, fmt.Errorf("%s: %s is open in another OpenEmbedding: %w", prefix, path, ErrInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", prefix, err)
	}
	var w *tensor.Dense
	if info.Format == "F32" {
		v, err := fileio.Floats[float32](m.Bytes(), info.Offset, vocab*dim)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("%s: %s: %v: %w", prefix, path, err, checkpoint.ErrFormat)
		}
		w = tensor.New(tensor.WithShape(vocab, dim), tensor.WithBacking(v))
	} else {
		v, err := fileio.Floats[float64](m.Bytes(), info.Offset, vocab*dim)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("%s: %s: %v: %w", prefix, path, err, checkpoint.ErrFormat)
		}
		w = tensor.New(tensor.WithShape(vocab, dim), tensor.WithBacking(v))
	}
	if !cfg.frozen {
		cfg.sparse = true
	}
	table := gorgonia.NewMatrix(g, w.Dtype(), gorgonia.WithShape(vocab, dim), gorgonia.WithName(name), gorgonia.WithValue(w))
	return &Embedding{Table: table, cfg: cfg, file: m, fileOffset: info.Offset}, nil
}

// Sync makes every update of a table OpenEmbedding mapped durable: it
// writes the mapping back to the file and the file to its disk. For a
// table in memory it is an error wrapping gather.ErrOption: save it with
// checkpoint.Save.
func (e *Embedding) Sync() error {
	if e.file == nil {
		return fmt.Errorf("embedding %q lives in memory, not in a file; keep it with checkpoint.Save: %w", e.Table.Name(), gather.ErrOption)
	}
	if e.closed {
		return fmt.Errorf("embedding %q: %w", e.Table.Name(), ErrClosed)
	}
	if err := e.file.Sync(); err != nil {
		return fmt.Errorf("embedding %q: %w", e.Table.Name(), err)
	}
	return nil
}

// Close syncs and unmaps a table OpenEmbedding mapped, and frees its file
// for another OpenEmbedding. Nothing may use the table after, and no
// graph holding it may run: Step, State and Sync then fail with
// ErrClosed. For a table in memory it does nothing. A second Close does
// nothing.
func (e *Embedding) Close() error {
	if e.file == nil || e.closed {
		return nil
	}
	e.closed = true
	if err := e.file.Close(); err != nil {
		return fmt.Errorf("embedding %q: %w", e.Table.Name(), err)
	}
	return nil
}

// willNeedOp asks the system to bring in, all at once, the rows of a file
// table that its ids name (Mapping.WillNeed), and returns the table
// itself: the lookup after it then finds its rows in memory, or on their
// way, instead of faulting them in one at a time. It changes no value.
type willNeedOp struct {
	opkit.Op
	file       *fileio.Mapping
	offset     int64 // of the table's first byte in the file
	rowBytes   int64
	dtype      tensor.Dtype
	idType     tensor.Dtype
	vocab, dim int
	idDims     int
	name       string
}

func (o *willNeedOp) Arity() int { return 2 }

func (o *willNeedOp) Type() hm.Type {
	return hm.NewFnType(operand.Type(2, o.dtype), operand.Type(o.idDims, o.idType), operand.Type(2, o.dtype))
}

func (o *willNeedOp) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{o.vocab, o.dim}, nil
}

// Do hints the rows of the ids in range (the lookup reports the others)
// and returns the table.
func (o *willNeedOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := checkArity("embedding", " prefetch", len(in), 2); err != nil {
		return nil, err
	}
	ix, err := operand.ReadIndices("embedding", "ids", in[1])
	if err != nil {
		return nil, err
	}
	for p := range ix.Shape.TotalSize() {
		if id := ix.At(p); id >= 0 && id < int64(o.vocab) {
			o.file.WillNeed(o.offset+id*o.rowBytes, o.rowBytes)
		}
	}
	return in[0], nil
}

func (o *willNeedOp) String() string { return fmt.Sprintf("WillNeed{%q}", o.name) }

// DiffWRT: the table, by the identity (a file table is row-sparse or
// frozen, so no gradient reaches it through here in practice).
func (o *willNeedOp) DiffWRT(int) []bool { return []bool{true, false} }

func (o *willNeedOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	return gorgonia.Nodes{grad, nil}, nil
}

func (o *willNeedOp) DoDiff(ctx gorgonia.ExecutionContext, inputs gorgonia.Nodes, output *gorgonia.Node) error {
	up, err := output.Grad()
	if err != nil {
		return fmt.Errorf("embedding %q: prefetch: %w", o.name, errs.Graph(err))
	}
	dg, err := inputs[0].Grad()
	if err != nil {
		return fmt.Errorf("embedding %q: prefetch: %w", o.name, errs.Graph(err))
	}
	addGrad(dg, up)
	return nil
}

// prefetched returns table as a lookup of ids in a file table should read
// it: after a willNeedOp. Tables in memory are returned as they are.
func (e *Embedding) prefetched(table, ids *gorgonia.Node) (*gorgonia.Node, error) {
	if e.file == nil || ids == nil {
		return table, nil
	}
	if err := operand.CheckIndexDtype("embedding", "ids", ids.Dtype()); err != nil {
		return nil, err
	}
	vocab, dim := e.Table.Shape()[0], e.Table.Shape()[1]
	o := &willNeedOp{file: e.file, offset: e.fileOffset, rowBytes: int64(dim) * int64(e.Table.Dtype().Size()),
		dtype: e.Table.Dtype(), idType: ids.Dtype(), vocab: vocab, dim: dim, idDims: ids.Dims(), name: e.Table.Name()}
	o.Op = opkit.PassThrough(o, o.dtype, o.idType, o.idDims)
	t, err := gorgonia.ApplyOp(o, table, ids)
	if err != nil {
		return nil, fmt.Errorf("embedding %q: %w", e.Table.Name(), errs.Graph(err))
	}
	return t, nil
}
