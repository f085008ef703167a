package nn

import (
	"context"
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
	"github.com/gathergrad/gather/table"
)

// OpenEmbedding maps the table "<name>.weight" of the safetensors file at
// path (as table.Create makes it) read-write into memory and returns it as
// a row-sparse embedding of g named name: lookups, bags, Step and the
// optimisers work on it as on an in-memory table, and it is never copied
// into the Go heap, so a table may be larger than the machine's memory.
// Options: WithPadding, WithMaxNorm, WithScaleGradByFreq
// and WithFrozen (which makes it a read-only, dense-free lookup
// table); WithSparse is implied. The padding row keeps the file's
// values.
//
// Only a table file opens (see table.Open): a checkpoint of several
// tensors, or a tensor of another name, rank or dtype, is an error
// wrapping checkpoint.ErrMismatch that says what the file holds; a
// malformed file is checkpoint.ErrFormat.
// A file is opened by one OpenEmbedding at a time: a second open, in this
// process or another, is an error wrapping table.ErrInUse.
//
// Updates reach the file as the system writes the mapping back; its
// Home's Sync (a Syncer) makes every update so far durable, and Close
// syncs and unmaps. After a crash
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
func OpenEmbedding(g *gorgonia.ExprGraph, path, name string, opts ...OpenOption) (*Embedding, error) {
	prefix := fmt.Sprintf("embedding %q", name)
	cfg, err := newConfig(prefix, forOpen, opts)
	if err != nil {
		return nil, err
	}
	if err := checkNewNode(prefix, g, name); err != nil {
		return nil, err
	}
	f, err := table.Open(path, name)
	if err != nil {
		return nil, err
	}
	w, _ := f.Weight()
	vocab := w.Shape()[0]
	if cfg.hasPad {
		if cfg.pad, err = operand.NormIndex(prefix, cfg.pad, vocab); err != nil {
			f.Close()
			return nil, err
		}
	}
	if !cfg.frozen {
		cfg.sparse = true
	}
	t := gorgonia.NewMatrix(g, w.Dtype(), gorgonia.WithShape(w.Shape()...), gorgonia.WithName(name), gorgonia.WithValue(w))
	m := &mapped{heap: heap{w: w}, file: f}
	m.e = &Embedding{Table: t, cfg: cfg, home: m}
	return m.e, nil
}

// Close syncs and unmaps a table OpenEmbedding mapped, or syncs and closes
// a CachedEmbedding's table, and frees its file for another open. After
// it, Step, State, Lookup, Bag and its Home's Weight and Sync fail with
// table.ErrClosed, and so does running a graph that looks the table up
// (gather.Cause finds it in the machine's error); the tensor a Weight or
// Table.Value() returned before must not be read.
// For a table in memory it does nothing. A second Close does nothing.
// ctx bounds the sync of a cached table (its store may be a server).
func (e *Embedding) Close(ctx context.Context) error {
	if e.closed {
		return nil
	}
	holds, err := e.home.close(ctx)
	e.closed = holds
	return err
}

// willNeedOp asks the system to bring in, all at once, the rows of a file
// table that its ids name (Mapping.WillNeed), and returns the table
// itself: the lookup after it then finds its rows in memory, or on their
// way, instead of faulting them in one at a time. It changes no value.
type willNeedOp struct {
	passGrad
	file       *table.File
	dtype      tensor.Dtype
	idType     tensor.Dtype
	vocab, dim int
	idDims     int
	name       string
}

// Do hints the rows of the ids in range (the lookup reports the others)
// and returns the table; after Close it returns an error wrapping
// table.ErrClosed instead, so that the lookup after it never reads the
// unmapped table.
func (o *willNeedOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity("embedding", " prefetch", len(in), 2); err != nil {
		return nil, err
	}
	if _, err := o.file.Weight(); err != nil {
		return nil, fmt.Errorf("embedding %q: the graph ran after Close: %w", o.name, err)
	}
	ix, err := operand.ReadIndices("embedding", "ids", in[1])
	if err != nil {
		return nil, err
	}
	for p := range ix.Shape.TotalSize() {
		if id := ix.At(p); id >= 0 && id < int64(o.vocab) {
			o.file.WillNeed(id)
		}
	}
	return in[0], nil
}

var _ gorgonia.ADOp = (*willNeedOp)(nil)

// willNeed returns the table as a lookup of ids in the mapped file f
// should read it: after a willNeedOp.
func (e *Embedding) willNeed(f *table.File, ids *gorgonia.Node) (*gorgonia.Node, error) {
	if ids == nil {
		return e.Table, nil
	}
	if err := operand.CheckIndexDtype("embedding", "ids", ids.Dtype()); err != nil {
		return nil, err
	}
	vocab, dim := e.Table.Shape()[0], e.Table.Shape()[1]
	o := &willNeedOp{file: f, dtype: e.Table.Dtype(), idType: ids.Dtype(), vocab: vocab, dim: dim, idDims: ids.Dims(), name: e.Table.Name()}
	// The gradient is the identity: a file table is row-sparse or frozen,
	// so none reaches it through here in practice.
	o.passGrad = passGrad{what: fmt.Sprintf("embedding %q: prefetch", o.name), Op: opkit.New(opkit.Sig{
		Name: fmt.Sprintf("WillNeed{%q}", o.name), PassThrough: true, Diff: []bool{true, false},
		In: []hm.Type{operand.Type(2, o.dtype), operand.Type(o.idDims, o.idType)}, Dtype: o.dtype, Shape: tensor.Shape{vocab, dim}}, fmt.Sprintf("%p", o.file))}
	return opkit.Apply(fmt.Sprintf("embedding %q", e.Table.Name()), o, e.Table, ids)
}
