package nn

import (
	"fmt"

	"github.com/gathergrad/gather/table/driver"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/graphop"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
)

// A BagMode says how EmbeddingBag pools the rows of a bag: one type with
// serve.Table.Bag's (driver.BagMode).
type BagMode = driver.BagMode

// The pooling modes of EmbeddingBag (table's).
const (
	BagSum  = driver.BagSum  // Σ wᵢ·rowᵢ
	BagMean = driver.BagMean // (1/m)·Σ wᵢ·rowᵢ, m the number of non-padding ids
	BagMax  = driver.BagMax  // the elementwise maximum of wᵢ·rowᵢ
)

// bagKernel returns the bag kernels' mode for m, which newBagOp has
// checked.
func bagKernel(m BagMode) kernel.BagMode {
	switch m {
	case BagMean:
		return kernel.BagMean
	case BagMax:
		return kernel.BagMax
	}
	return kernel.BagSum
}

// opBag names EmbeddingBag in error messages.
const opBag = "embedding_bag"

// EmbeddingBag adds a pooled lookup to table's graph, PyTorch's
// F.embedding_bag: each bag of ids becomes one vector, the sum, mean or
// elementwise maximum of its rows of table, each row first multiplied by
// its weight when weights are given. PyTorch takes per_sample_weights in
// sum mode only; weights in mean and max mode are this package's
// extension beyond it (the formulas below), which a PyTorch model does
// not have.
//
// table is [vocab, dim], float32 or float64; the output is [bags, dim].
// Bags are given either as ids of shape [bags, k] with offsets nil (every
// bag k ids), or as ids of shape [n] with offsets of shape [bags]: bag b
// is ids[offsets[b]:offsets[b+1]], the last running to n (PyTorch's
// include_last_offset=False). With WithIncludeLastOffset, offsets has shape
// [bags+1] and its last entry must equal n. offsets[0] must be 0 and
// offsets non-decreasing and at most n; an empty bag pools to zeros in
// every mode. ids and offsets are Int, Int32 or Int64; every id must lie
// in [0, vocab), as for PyTorch. weights is nil or shaped like ids, of the
// table's dtype.
//
//	sum:  out[b] = Σ wᵢ·table[ids[i]]
//	mean: out[b] = (1/m)·Σ wᵢ·table[ids[i]], m the number of non-padding ids of bag b
//	max:  out[b][d] = max over i of wᵢ·table[ids[i]][d]
//
// Options: WithPadding(p) skips the ids equal to p (a negative p
// counts from the end of the vocabulary): they are not pooled, not counted
// in a mean, and row p gets no gradient; a bag of padding only pools to
// zeros. WithFrozen sends the table no gradient;
// WithScaleGradByFreq divides each row's gradient by the number of
// times its id occurs in ids (sum and mean bags only); WithIncludeLastOffset
// is described above. Other options are ErrOption errors.
//
// Gradients flow, in both of Gorgonia's machines, to the table and to the
// weights (sum: ⟨rowᵢ, g_b⟩; mean: that divided by m; max: over the
// elements where entry i was the maximum, ties going to the bag's first).
// The table's gradient is bit-identical for any GOMAXPROCS.
//
// Shapes, ranks, dtypes and the mode are checked here; offsets and ids
// when the graph runs: bad offsets are ErrShape errors naming the
// position and value, an id out of range an *IndexError naming its
// position in ids. The kernels never materialise the [n, dim] rows: one
// pass over each bag into the output, and one back for the gradient.
func EmbeddingBag(table, ids, offsets, weights *gorgonia.Node, mode BagMode, opts ...EmbeddingBagOption) (*gorgonia.Node, error) {
	c, err := newConfig(opBag, forEmbeddingBag, opts)
	if err != nil {
		return nil, err
	}
	cfg := operand.Config{GradScale: 1, HasPad: c.hasPad, Pad: c.pad, NoGrad: c.frozen, ScaleByFreq: c.freq}
	if table != nil {
		cfg.Layer = operand.Label{Op: opBag, Name: table.Name(), Arg: "ids", NonNegative: true}
	}
	return embeddingBag(table, ids, offsets, weights, mode, cfg, c.includeLast)
}

// bagOpInputs returns the inputs of a bag op: table, ids, and offsets and
// weights when they are given.
func bagOpInputs(table, ids, offsets, weights *gorgonia.Node) gorgonia.Nodes {
	in := gorgonia.Nodes{table, ids}
	if offsets != nil {
		in = append(in, offsets)
	}
	if weights != nil {
		in = append(in, weights)
	}
	return in
}

// embeddingBag is EmbeddingBag with the op's configuration.
func embeddingBag(table, ids, offsets, weights *gorgonia.Node, mode BagMode, cfg operand.Config, includeLast bool) (*gorgonia.Node, error) {
	o, err := newBagOp(table, ids, offsets, weights, mode, cfg, includeLast)
	if err != nil {
		return nil, err
	}
	o.setOps()
	return opkit.Apply(opBag, o, bagOpInputs(table, ids, offsets, weights)...)
}

// bagOp is the op of EmbeddingBag: table, ids, offsets (if hasOffsets) and
// weights (if hasWeights) in, [bags, dim] out.
type bagOp struct {
	opkit.Diff
	mode       BagMode
	dtype      tensor.Dtype // of table, weights and output
	idType     tensor.Dtype
	offType    tensor.Dtype
	vocab, dim int
	bags       int
	idShape    tensor.Shape
	hasOffsets bool
	hasWeights bool
	lastOffset bool           // offsets hold bags+1 entries (WithIncludeLastOffset)
	cfg        operand.Config // Pad normalised
	lbl        operand.Label  // how index errors name the op
}

// BagSpec says what the op pools, for package onnx's export.
func (o *bagOp) BagSpec() graphop.BagSpec {
	return graphop.BagSpec{Mode: int(o.mode), Bags: o.bags, Offsets: o.hasOffsets, Weights: o.hasWeights,
		LastOffset: o.lastOffset, HasPad: o.cfg.HasPad, Pad: o.cfg.Pad}
}

func newBagOp(table, ids, offsets, weights *gorgonia.Node, mode BagMode, cfg operand.Config, includeLast bool) (*bagOp, error) {
	if table == nil || ids == nil {
		return nil, fmt.Errorf("%s: table and ids must be nodes: %w", opBag, gather.ErrShape)
	}
	if mode < BagSum || mode > BagMax {
		return nil, fmt.Errorf("%s: unknown mode %v; use BagSum, BagMean or BagMax: %w", opBag, mode, gather.ErrOption)
	}
	if mode == BagMax && cfg.ScaleByFreq {
		return nil, fmt.Errorf("%s: gradient scaling by frequency applies to sum and mean bags, not max: %w", opBag, gather.ErrOption)
	}
	dt := table.Dtype()
	if err := operand.CheckFloat(opBag, "table", dt); err != nil {
		return nil, err
	}
	ts := table.Shape()
	if len(ts) != 2 {
		return nil, fmt.Errorf("%s: table must be a [vocab, dim] matrix, got shape %v: %w", opBag, ts, gather.ErrShape)
	}
	if err := operand.CheckIndexDtype(opBag, "ids", ids.Dtype()); err != nil {
		return nil, err
	}
	is := ids.Shape().Clone()
	o := &bagOp{mode: mode, dtype: dt, idType: ids.Dtype(), vocab: ts[0], dim: ts[1], idShape: is,
		hasOffsets: offsets != nil, hasWeights: weights != nil, lastOffset: includeLast, cfg: cfg}
	if includeLast && offsets == nil {
		return nil, fmt.Errorf("%s: WithIncludeLastOffset needs offsets: %w", opBag, gather.ErrOption)
	}
	if offsets == nil {
		if len(is) != 2 {
			return nil, fmt.Errorf("%s: without offsets, ids must be [bags, k], got shape %v: %w", opBag, is, gather.ErrShape)
		}
		o.bags = is[0]
	} else {
		if len(is) != 1 {
			return nil, fmt.Errorf("%s: with offsets, ids must be a vector [n], got shape %v: %w", opBag, is, gather.ErrShape)
		}
		if err := operand.CheckIndexDtype(opBag, "offsets", offsets.Dtype()); err != nil {
			return nil, err
		}
		if os := offsets.Shape(); len(os) != 1 {
			return nil, fmt.Errorf("%s: offsets must be a vector [bags], got shape %v: %w", opBag, os, gather.ErrShape)
		}
		o.offType, o.bags = offsets.Dtype(), offsets.Shape()[0]
		if includeLast {
			if o.bags == 0 {
				return nil, fmt.Errorf("%s: with WithIncludeLastOffset, offsets must hold at least one entry (the number of ids), got shape %v: %w", opBag, offsets.Shape(), gather.ErrShape)
			}
			o.bags--
		}
	}
	if weights != nil {
		if weights.Dtype() != dt {
			return nil, fmt.Errorf("%s: weights are %v, the table %v: %w", opBag, weights.Dtype(), dt, gather.ErrDtype)
		}
		if !operand.SameShape(weights.Shape(), is) {
			return nil, fmt.Errorf("%s: weights of shape %v must have the shape of ids %v: %w", opBag, weights.Shape(), is, gather.ErrShape)
		}
	}
	if o.vocab == 0 && is.TotalSize() > 0 {
		return nil, fmt.Errorf("%s: the table has no rows, so no id is valid: %w", opBag, gather.ErrIndexOutOfRange)
	}
	if cfg.HasPad {
		var err error
		if o.cfg.Pad, err = operand.NormIndex(opBag, cfg.Pad, o.vocab); err != nil {
			return nil, err
		}
	}
	o.lbl = operand.Label{Op: opBag, Name: cfg.Name, Arg: "ids", NonNegative: true}
	if cfg.Layer.Op != "" {
		o.lbl = cfg.Layer
	}
	return o, nil
}

// bagArgs are the checked values of a run.
type bagArgs struct {
	table  *tensor.Dense
	ids    operand.Indices
	w      *tensor.Dense // nil without weights
	bg     kernel.Bags
	bounds *[]int // bg.Bounds's memory, from kernel.NewBounds
}

// release gives a's bounds back (kernel.FreeBounds); a is not used after.
func (a *bagArgs) release() {
	if a.bounds != nil {
		kernel.FreeBounds(a.bounds)
		a.bounds, a.bg.Bounds = nil, nil
	}
}

// args reads and checks the op's inputs: everything before anything is
// written. The caller calls release on a after its last use.
func (o *bagOp) args(in []gorgonia.Value) (a bagArgs, err error) {
	if err := operand.CheckArity(opBag, "", len(in), o.arity()); err != nil {
		return a, err
	}
	t, err := operand.Read(opBag, "table", in[0])
	if err != nil {
		return a, err
	}
	if t.Dtype() != o.dtype || !operand.SameShape(t.Shape(), []int{o.vocab, o.dim}) {
		return a, fmt.Errorf("%s: table is %v of shape %v, want %v of shape (%d, %d): %w", opBag, t.Dtype(), t.Shape(), o.dtype, o.vocab, o.dim, gather.ErrShape)
	}
	ix, err := operand.ReadIndices(opBag, "ids", in[1])
	if err != nil {
		return a, err
	}
	if !operand.SameShape(ix.Shape, o.idShape) {
		return a, fmt.Errorf("%s: ids of shape %v, want %v: %w", opBag, ix.Shape, o.idShape, gather.ErrShape)
	}
	n := ix.Shape.TotalSize()
	p := kernel.NewBounds(o.bags + 1)
	bounds := *p
	defer func() {
		if err != nil {
			kernel.FreeBounds(p)
		}
	}()
	k := 2
	if o.hasOffsets {
		off, err := operand.ReadIndices(opBag, "offsets", in[2])
		if err != nil {
			return a, err
		}
		nOff := o.bags
		if o.lastOffset {
			nOff++
		}
		if !operand.SameShape(off.Shape, []int{nOff}) {
			return a, fmt.Errorf("%s: offsets of shape %v, want (%d): %w", opBag, off.Shape, nOff, gather.ErrShape)
		}
		if b := operand.Pick(off.Dtype, offsetBounds[int], offsetBounds[int32], offsetBounds[int64])(bounds, off, n); b >= 0 {
			v := off.At(b)
			switch {
			case b == 0:
				return a, fmt.Errorf("%s: offsets[0] = %d; the first bag must start at 0: %w", opBag, v, gather.ErrShape)
			case v < off.At(b-1):
				return a, fmt.Errorf("%s: offsets[%d] = %d is less than offsets[%d] = %d; offsets must not decrease: %w", opBag, b, v, b-1, off.At(b-1), gather.ErrShape)
			default:
				return a, fmt.Errorf("%s: offsets[%d] = %d is past the end of the %d ids: %w", opBag, b, v, n, gather.ErrShape)
			}
		}
		if o.lastOffset {
			// The bags' starts are checked above, each at most n; the
			// last entry closes the last bag and must be n itself.
			if last := off.At(o.bags); last != int64(n) {
				return a, fmt.Errorf("%s: offsets[%d] = %d must equal the number of ids, %d (WithIncludeLastOffset): %w", opBag, o.bags, last, n, gather.ErrShape)
			}
		}
		k = 3
	} else {
		kernel.EvenBounds(bounds, o.idShape[1])
	}
	if err := operand.CheckIndices(o.lbl, ix, 0, o.vocab); err != nil {
		return a, err
	}
	if o.hasWeights {
		w, err := operand.Read(opBag, "weights", in[k])
		if err != nil {
			return a, err
		}
		if w.Dtype() != o.dtype || !operand.SameShape(w.Shape(), o.idShape) {
			return a, fmt.Errorf("%s: weights are %v of shape %v, want %v of shape %v: %w", opBag, w.Dtype(), w.Shape(), o.dtype, o.idShape, gather.ErrShape)
		}
		a.w = w
	}
	pad := -1
	if o.cfg.HasPad {
		pad = o.cfg.Pad
	}
	a.table, a.ids, a.bg, a.bounds = t, ix, kernel.Bags{Bounds: bounds, Pad: pad, Mode: bagKernel(o.mode)}, p
	return a, nil
}

// arity returns the number of inputs: table, ids, and offsets and weights
// when given.
func (o *bagOp) arity() int {
	n := 2
	if o.hasOffsets {
		n++
	}
	if o.hasWeights {
		n++
	}
	return n
}

// weightsInput returns the position of weights among the inputs.
func (o *bagOp) weightsInput() int { return o.arity() - 1 }

// setOps sets the op's Op and its gradient ops: table, ids[, offsets][,
// weights] -> [bags, dim]; the gradients of the table (unless WithoutGrad)
// and of the weights.
func (o *bagOp) setOps() {
	in := []hm.Type{operand.Type(2, o.dtype), operand.Type(len(o.idShape), o.idType)}
	if o.hasOffsets {
		in = append(in, operand.Type(1, o.offType))
	}
	if o.hasWeights {
		in = append(in, operand.Type(len(o.idShape), o.dtype))
	}
	last := ""
	if o.lastOffset {
		last = ", includeLastOffset"
	}
	name := fmt.Sprintf("EmbeddingBag{%v, offsets=%v, weights=%v%s%v}", o.mode, o.hasOffsets, o.hasWeights, last, o.cfg)
	diff := make([]bool, len(in))
	diff[0] = !o.cfg.NoGrad
	if o.hasWeights {
		diff[len(in)-1] = true
	}
	o.Op = opkit.New(opkit.Sig{Name: name, In: in, Dtype: o.dtype, Shape: tensor.Shape{o.bags, o.dim}, Diff: diff},
		o.idShape, o.vocab, o.lbl)
	o.Grads, o.What = make([]*opkit.Grad, len(in)), o.lbl.String()
	in = append(in, operand.Type(2, o.dtype))
	if !o.cfg.NoGrad {
		s := opkit.Sig{Name: name + "GradTable", In: in, Dtype: o.dtype, Shape: tensor.Shape{o.vocab, o.dim}}
		o.Grads[0] = opkit.NewGrad(s, o.gradRun(true), o.ID(), "table")
	}
	if o.hasWeights {
		s := opkit.Sig{Name: name + "GradWeights", In: in, Dtype: o.dtype, Shape: o.idShape}
		o.Grads[len(o.Grads)-1] = opkit.NewGrad(s, o.gradRun(false), o.ID(), "weights")
	}
}

// Do pools into a new [bags, dim] tensor.
func (o *bagOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) { return o.do(nil, in) }

// UsePreallocDo pools into prealloc when it can hold the result (a
// row-major [bags, dim] tensor of the table's dtype that shares no memory
// with the table or the weights), else into a new tensor. Every argument
// is checked before prealloc is written.
func (o *bagOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	out, ok := prealloc.(*tensor.Dense)
	if !ok || out.Dtype() != o.dtype || !operand.SameShape(out.Shape(), []int{o.bags, o.dim}) || !operand.Writable(out) {
		out = nil
	}
	for _, v := range in {
		if out != nil && overlapsValue(out, v) {
			out = nil
		}
	}
	return o.do(out, in)
}

// do pools into out, or into a new tensor if out is nil.
func (o *bagOp) do(out *tensor.Dense, in []gorgonia.Value) (gorgonia.Value, error) {
	a, err := o.args(in)
	if err != nil {
		return nil, err
	}
	defer a.release()
	if out == nil {
		out = operand.NewOutput(o.dtype, tensor.Shape{o.bags, o.dim})
	}
	if o.bags*o.dim == 0 {
		return out, nil
	}
	floatsFor(o.dtype).pool(out, a.table, a, o.dim)
	return out, nil
}

// gradRun returns the Run of the gradient of the table (wrtTable) or of
// the weights: from the bag op's inputs and the upstream gradient, into a
// tensor shaped like the table or the ids. Every argument is checked
// before dst is written.
func (o *bagOp) gradRun(wrtTable bool) opkit.Run {
	return func(dst *tensor.Dense, add bool, in []gorgonia.Value) error {
		want := o.idShape
		if wrtTable {
			want = tensor.Shape{o.vocab, o.dim}
		}
		if dst.Dtype() != o.dtype || !operand.SameShape(dst.Shape(), want) || !operand.Writable(dst) {
			return fmt.Errorf("%s gradient: cannot write into %v: %w", opBag, dst, gather.ErrShape)
		}
		a, g, err := o.gradArgs(in)
		if err != nil {
			return err
		}
		defer a.release()
		if !add {
			floatsFor(o.dtype).clear(dst)
		}
		if o.bags*o.dim == 0 || a.ids.Shape.TotalSize() == 0 {
			return nil
		}
		floatsFor(o.dtype).bagGrad(dst, g, a.table, a, o.dim, wrtTable, o.cfg.GradScale, o.cfg.ScaleByFreq)
		return nil
	}
}

// gradArgs reads and checks the bag op's inputs and the upstream gradient.
func (o *bagOp) gradArgs(in []gorgonia.Value) (bagArgs, *tensor.Dense, error) {
	a, err := o.args(in[:len(in)-1])
	if err != nil {
		return bagArgs{}, nil, err
	}
	g, err := operand.Read(opBag, "gradient", in[len(in)-1])
	if err != nil {
		a.release()
		return bagArgs{}, nil, err
	}
	if g.Dtype() != o.dtype || !operand.SameShape(g.Shape(), []int{o.bags, o.dim}) {
		a.release()
		return bagArgs{}, nil, fmt.Errorf("%s gradient: upstream gradient is %v of shape %v, want %v of shape (%d, %d): %w",
			opBag, g.Dtype(), g.Shape(), o.dtype, o.bags, o.dim, gather.ErrShape)
	}
	return a, g, nil
}

var (
	_ gorgonia.SDOp            = (*bagOp)(nil)
	_ gorgonia.ADOp            = (*bagOp)(nil)
	_ gorgonia.UsePreallocDoer = (*bagOp)(nil)
)

// PackBags writes bags into ids and offsets, vectors of a fixed size, so
// that a graph of fixed shape can take batches whose bags hold a different
// number of ids each time. Bag b's ids go to ids[offsets[b]:], one bag after
// another; every position of ids after the last bag's is set to pad. Give
// the table the padding id pad (WithPadding(pad), a row of its own,
// e.g. vocab for a table of vocab+1 rows): a bag skips padding ids (they
// are not pooled, not counted in a mean, and their row gets no gradient),
// so the filler changes neither the last bag nor any gradient.
//
//	ids, offsets := tensor.New(tensor.Of(tensor.Int), tensor.WithShape(capacity)), ...WithShape(bags)
//	idsNode := gorgonia.NewVector(g, tensor.Int, gorgonia.WithValue(ids), ...)
//	for each batch {
//		nn.PackBags(ids, offsets, batch, pad)  // writes the nodes' values in place
//		vm.RunAll(); ...; vm.Reset()
//	}
//
// ids and offsets are row-major Int, Int32 or Int64 tensors that are not
// views; offsets has len(bags) elements and ids at least as many as the
// bags hold together. Anything else is an error wrapping gather.ErrShape or
// gather.ErrDtype, and then neither tensor is changed. Ids are checked
// against the table when the graph runs. PackBags is O(capacity + bags).
func PackBags(ids, offsets *tensor.Dense, bags [][]int, pad int) error {
	const op = "pack bags"
	if ids == nil || offsets == nil {
		return fmt.Errorf("%s: ids and offsets must be tensors: %w", op, gather.ErrShape)
	}
	for _, t := range []struct {
		what string
		t    *tensor.Dense
	}{{"ids", ids}, {"offsets", offsets}} {
		if err := operand.CheckIndexDtype(op, t.what, t.t.Dtype()); err != nil {
			return err
		}
		if t.t.Dims() != 1 || !operand.Writable(t.t) {
			return fmt.Errorf("%s: %s of shape %v must be a vector that is not a view: %w", op, t.what, t.t.Shape(), gather.ErrShape)
		}
	}
	if offsets.Shape()[0] != len(bags) {
		return fmt.Errorf("%s: offsets hold %d entries for %d bags: %w", op, offsets.Shape()[0], len(bags), gather.ErrShape)
	}
	total := 0
	for _, b := range bags {
		total += len(b)
	}
	if capacity := ids.Shape()[0]; total > capacity {
		return fmt.Errorf("%s: the %d bags hold %d ids, more than the %d ids have room for: %w", op, len(bags), total, capacity, gather.ErrShape)
	}
	if ids.Dtype() == tensor.Int32 {
		if bad, ok := kernel.Int32Misfit(bags, pad); !ok {
			return fmt.Errorf("%s: id %d does not fit the int32 ids: %w", op, bad, gather.ErrDtype)
		}
	}
	if offsets.Dtype() == tensor.Int32 && int(int32(total)) != total {
		return fmt.Errorf("%s: offset %d does not fit the int32 offsets: %w", op, total, gather.ErrDtype)
	}
	idx, err := operand.ReadIndices(op, "ids", ids)
	if err != nil {
		return err
	}
	off, err := operand.ReadIndices(op, "offsets", offsets)
	if err != nil {
		return err
	}
	operand.Pick(idx.Dtype, packIDs[int], packIDs[int32], packIDs[int64])(idx, bags, pad)
	operand.Pick(off.Dtype, packOffsets[int], packOffsets[int32], packOffsets[int64])(off, bags)
	return nil
}

// packIDs and packOffsets are kernel.PackIDs and PackOffsets for ids of
// Go type I; offsetBounds is kernel.OffsetBounds.
func packIDs[I kernel.Index](ix operand.Indices, bags [][]int, pad int) {
	kernel.PackIDs(operand.Slice[I](ix), bags, pad)
}

func packOffsets[I kernel.Index](ix operand.Indices, bags [][]int) {
	kernel.PackOffsets(operand.Slice[I](ix), bags)
}

func offsetBounds[I kernel.Index](bounds []int, off operand.Indices, n int) int {
	return kernel.OffsetBounds(bounds, operand.Slice[I](off), n)
}
