package gather

import (
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// IndexAdd adds src into dst at the positions that Take(dst, indices, axis)
// reads: it is the gradient of Gather with respect to data. For axis 0 and
// rows of n elements it is
//
//	for i, j := range indices { dst[j*n:(j+1)*n] += src[i*n:(i+1)*n] }
//
// and likewise for each block before axis. Repeated indices accumulate;
// negative ones add into the row they name. dst must be a row-major float32
// or float64 tensor (not a view); src must have dst's dtype and the shape
// Take would return. On error dst is unchanged. The sum into each element
// runs in index order whatever the number of threads, so the result does
// not depend on GOMAXPROCS. It is O(size of src).
func IndexAdd(dst *tensor.Dense, indices, src tensor.Tensor, axis int) error {
	return backward(opGather, dst, indices, src, axis, 1, -1)
}

// ScatterAdd adds src into dst at the positions that TakeAlongAxis(dst,
// indices, axis) reads: it is the gradient of GatherElements with respect to
// data (ONNX ScatterElements with reduction "add", PyTorch scatter_add_).
// For a matrix and axis 1 it is
//
//	for i, row := range indices { for j, k := range row { dst[i][k] += src[i][j] } }
//
// Repeated indices accumulate. dst must be a row-major float32 or float64
// tensor (not a view); src must have dst's dtype and the shape of indices.
// On error dst is unchanged. The result does not depend on GOMAXPROCS.
// It is O(size of src).
func ScatterAdd(dst *tensor.Dense, indices, src tensor.Tensor, axis int) error {
	return backward(opGatherElements, dst, indices, src, axis, 1, -1)
}

// backward adds scale*src into dst at the positions the op named kind reads,
// after checking everything; for Gather, nothing is added to the slice pad
// of axis (pad < 0 for none).
func backward(kind string, dst *tensor.Dense, indices, src any, axis int, scale float64, pad int) error {
	a, err := planAdd(kind, dst, indices, src, axis)
	if err != nil {
		return err
	}
	a.run(scale, pad, false)
	return nil
}

// addPlan is a checked backward call, ready to run.
type addPlan struct {
	kind     string
	dst, src *tensor.Dense
	ix       indexTensor
	axis     int
}

// planAdd checks the arguments of backward.
func planAdd(kind string, dst *tensor.Dense, indices, src any, axis int) (addPlan, error) {
	var a addPlan
	if dst == nil {
		return a, fmt.Errorf("%s gradient: destination is nil: %w", kind, ErrShape)
	}
	if dt := dst.Dtype(); dt != tensor.Float32 && dt != tensor.Float64 {
		return a, fmt.Errorf("%s gradient: data must be float32 or float64 to have a gradient, got %v: %w", kind, dt, ErrDtype)
	}
	if !writable(dst) {
		return a, fmt.Errorf("%s gradient: destination of shape %v must be a row-major tensor that is not a view: %w", kind, dst.Shape(), ErrShape)
	}
	ix, err := asIndices(kind, indices)
	if err != nil {
		return a, err
	}
	g, err := asDense(kind, "gradient", src)
	if err != nil {
		return a, err
	}
	ax, err := normAxis(kind, axis, dst.Dims())
	if err != nil {
		return a, err
	}
	var buf [8]int
	shape, err := outputShape(buf[:0], kind, dst.Shape(), ix.shape, ax)
	if err != nil {
		return a, err
	}
	if g.Dtype() != dst.Dtype() || !g.Shape().Eq(shape) {
		return a, fmt.Errorf("%s gradient: want a %v gradient of shape %s, got %v of shape %v: %w",
			kind, dst.Dtype(), shapeString(shape), g.Dtype(), g.Shape(), ErrShape)
	}
	if err := checkIndices(kind, ix, ax, dst.Shape()[ax]); err != nil {
		return a, err
	}
	if overlaps(dst, g) {
		g = g.Clone().(*tensor.Dense)
	}
	return addPlan{kind: kind, dst: dst, src: g, ix: ix, axis: ax}, nil
}

// run adds scale*src into dst; with zero, it first sets dst to zero, each
// worker clearing the part of dst it then adds into (while that part is in
// its cache), so that the clear costs no pass of its own.
func (a addPlan) run(scale float64, pad int, zero bool) {
	switch a.dst.Dtype() {
	case tensor.Float32:
		addTyped(a.kind, a.dst.Float32s(), a.src.Float32s(), a.ix, a.dst.Shape(), a.axis, float32(scale), pad, zero)
	case tensor.Float64:
		addTyped(a.kind, a.dst.Float64s(), a.src.Float64s(), a.ix, a.dst.Shape(), a.axis, scale, pad, zero)
	}
}

func addTyped[T float](kind string, dst, src []T, ix indexTensor, shape tensor.Shape, axis int, c T, pad int, zero bool) {
	switch ix.dtype {
	case tensor.Int:
		addIndexed(kind, dst, src, ix.ints, ix.shape, shape, axis, c, pad, zero)
	case tensor.Int32:
		addIndexed(kind, dst, src, ix.i32, ix.shape, shape, axis, c, pad, zero)
	case tensor.Int64:
		addIndexed(kind, dst, src, ix.i64, ix.shape, shape, axis, c, pad, zero)
	}
}

func addIndexed[T float, I index](kind string, dst, src []T, idx []I, ishape, dshape tensor.Shape, axis int, c T, pad int, zero bool) {
	if len(src) == 0 {
		if zero {
			clearParallel(dst)
		}
		return
	}
	if kind == opGather {
		indexAdd(dst, src, idx, dshape, axis, c, pad, zero)
	} else {
		g := newAlongGeom(dshape, ishape, axis)
		scatterAdd(dst, src, idx, &g, c, dshape, zero)
	}
}

// addWork returns the work, in elements, of adding n elements into a
// destination of size m, cleared first with zero: clearing an element costs
// about a quarter of adding one.
func addWork(n, m int, zero bool) int {
	if zero {
		return n + m/4
	}
	return n
}

// indexAdd runs addRows in parallel: over outer blocks when there are
// enough of them, else over ranges of destination rows. Row pad (if >= 0)
// is left out. With zero, each worker clears the blocks or rows it owns:
// block by block as it adds into them when it owns whole blocks, as the
// calling goroutine does when it works alone; ranges of minStream bytes or
// more as addBlocks does blocks that large.
func indexAdd[T float, I index](dst, src []T, idx []I, dshape tensor.Shape, axis int, c T, pad int, zero bool) {
	outer, s, inner := split(dshape, axis)
	p := workers(addWork(len(src), len(dst), zero), max(outer, s))
	switch {
	case p <= 1:
		addBlocks(dst, src, idx, c, s, inner, 0, outer, pad, zero)
	default:
		t := newTask[indexAddTask[T, I]]()
		defer freeTask(t)
		*t = indexAddTask[T, I]{dst: dst, src: src, idx: idx, c: c, outer: outer, s: s, inner: inner, pad: pad, zero: zero}
		if outer >= p {
			t.blocks = true
			parallelRun(outer, p, t)
		} else {
			parallelRunParts(s, p, t)
		}
	}
}

// indexAddTask is indexAdd's work for parallelRun: whole outer blocks
// (blocks set), or a range of destination rows in every block.
type indexAddTask[T float, I index] struct {
	dst, src             []T
	idx                  []I
	c                    T
	outer, s, inner, pad int
	zero, blocks         bool
}

func (t *indexAddTask[T, I]) run(lo, hi int) int {
	switch {
	case t.blocks:
		addBlocks(t.dst, t.src, t.idx, t.c, t.s, t.inner, lo, hi, t.pad, t.zero)
	case !t.zero:
		addRowsExcept(t.dst, t.src, t.idx, t.c, t.s, t.inner, 0, t.outer, lo, hi, t.pad)
	default:
		for o := range t.outer {
			setRows(t.dst, t.src, t.idx, t.c, t.s, t.inner, o, lo, hi, t.pad)
		}
	}
	return -1
}

// addBlocks is addRowsExcept over outer blocks lo..hi-1 and every
// destination row. With zero, it clears each block just before adding into
// it: a block under minStream bytes is then still in cache when it is added
// into; a larger one is written with streaming stores, which do not read it
// from memory first, by addFirstTouch (or, for rows it cannot take, cleared
// by clearStreamed).
func addBlocks[T float, I index](dst, src []T, idx []I, c T, s, inner, lo, hi, pad int, zero bool) {
	if !zero {
		addRowsExcept(dst, src, idx, c, s, inner, lo, hi, 0, s, pad)
		return
	}
	for o := lo; o < hi; o++ {
		setRows(dst, src, idx, c, s, inner, o, 0, s, pad)
	}
}

// setRows sets destination rows jlo..jhi-1 of outer block o to zero and
// then adds into them as addRowsExcept does: with addFirstTouch when they
// are large enough for it, else by clearing them (clearStreamed) and
// adding.
func setRows[T float, I index](dst, src []T, idx []I, c T, s, inner, o, jlo, jhi, pad int) {
	rows := dst[(o*s+jlo)*inner : (o*s+jhi)*inner]
	if writesFirst(rows, inner) {
		n := len(idx)
		addFirstTouch(dst[o*s*inner:(o+1)*s*inner], src[o*n*inner:(o+1)*n*inner], idx, c, inner, jlo, jhi, pad)
		return
	}
	clearStreamed(rows)
	addRowsExcept(dst, src, idx, c, s, inner, o, o+1, jlo, jhi, pad)
}

// addRowsExcept is addRows leaving out destination row pad.
func addRowsExcept[T float, I index](dst, src []T, idx []I, c T, s, inner, olo, ohi, jlo, jhi, pad int) {
	// Rows are added into one block of s rows at a time, which the
	// callers have usually just cleared, so the block's size decides.
	ahead := prefetches(dst[:s*inner], inner)
	if pad >= jlo && pad < jhi {
		addRows(dst, src, idx, c, s, inner, olo, ohi, jlo, pad, ahead)
		jlo = pad + 1
	}
	addRows(dst, src, idx, c, s, inner, olo, ohi, jlo, jhi, ahead)
}

// scatterAdd runs addAlong in parallel over a dimension other than axis, so
// that workers write disjoint parts of dst: the first dimension, or the last
// when axis is the first. With zero, each worker clears the part of dst (of
// shape dshape) it owns, a few blocks at a time as it adds into them when it
// owns a range of the first dimension (as the calling goroutine does when
// it works alone); the last one also clears what lies beyond the indices'
// extent on the split dimension.
func scatterAdd[T float, I index](dst, src []T, idx []I, g *alongGeom, c T, dshape tensor.Shape, zero bool) {
	rows := len(idx) / g.n
	r := len(g.ishape)
	p := 1 // rank 1: a single row, added on the calling goroutine
	switch {
	case r > 1 && g.axis != 0:
		p = workers(addWork(len(idx), len(dst), zero), g.ishape[0])
	case r > 1:
		p = workers(addWork(len(idx), len(dst), zero), g.n)
	}
	switch {
	case g.axis != 0 && p <= 1:
		addFirst(dst, src, idx, c, g, 0, g.ishape[0], dshape[0], zero)
		return
	case p <= 1:
		if zero {
			clear(dst)
		}
		addAlong(dst, src, idx, c, g, 0, rows, 0, g.n)
		return
	}
	t := newTask[scatterAddTask[T, I]]()
	defer freeTask(t)
	// g is copied, so that g itself stays on the caller's stack.
	*t = scatterAddTask[T, I]{dst: dst, src: src, idx: idx, c: c, g: *g, d0: dshape[0], width: dshape[len(dshape)-1], zero: zero}
	if g.axis != 0 {
		parallelRun(g.ishape[0], p, t)
	} else {
		parallelRunParts(g.n, p, t)
	}
}

// scatterAddTask is scatterAdd's work for parallelRun: a range of the
// first dimension when axis is not the first, else a range of columns of
// every row.
type scatterAddTask[T float, I index] struct {
	dst, src  []T
	idx       []I
	c         T
	g         alongGeom
	d0, width int // data's first and last dimensions
	zero      bool
}

func (t *scatterAddTask[T, I]) run(lo, hi int) int {
	if t.g.axis != 0 {
		addFirst(t.dst, t.src, t.idx, t.c, &t.g, lo, hi, t.d0, t.zero)
		return -1
	}
	if t.zero {
		end := hi
		if hi == t.g.n {
			end = t.width
		}
		for b := 0; b < len(t.dst); b += t.width {
			clear(t.dst[b+lo : b+end])
		}
	}
	addAlong(t.dst, t.src, t.idx, t.c, &t.g, 0, len(t.idx)/t.g.n, lo, hi)
	return -1
}

// addFirst is addAlong for the indices' rows whose first coordinate is in
// lo..hi-1, when axis is not the first: they add only into the blocks of
// dst with the same first coordinate. With zero, it clears those blocks a
// few at a time just before adding into them, so that they are still in
// cache when they are added into; the part ending at the indices' extent
// on the first dimension also clears the d0-hi blocks beyond it.
func addFirst[T float, I index](dst, src []T, idx []I, c T, g *alongGeom, lo, hi, d0 int, zero bool) {
	first := g.ishape[0]
	perFirst, block := len(idx)/g.n/first, len(dst)/d0
	if !zero {
		addAlong(dst, src, idx, c, g, lo*perFirst, hi*perFirst, 0, g.n)
		return
	}
	step := max(1, clearStep/block)
	for a := lo; a < hi; a += step {
		b := min(a+step, hi)
		clear(dst[a*block : b*block])
		addAlong(dst, src, idx, c, g, a*perFirst, b*perFirst, 0, g.n)
	}
	if hi == first {
		clear(dst[first*block:])
	}
}

// clearStep is how many destination elements a backward worker clears at a
// time before adding into them: few enough (16 KB of float32, 32 KB of
// float64) to stay in a core's first-level data cache while it adds. With
// four times as many, the adds into elem_axis1's rows waited on the
// second-level cache and the backward took 5-10% longer.
const clearStep = 1 << 12

// clearFloats sets t's elements to zero, in parallel for large tensors.
func clearFloats(t *tensor.Dense) {
	switch t.Dtype() {
	case tensor.Float32:
		clearParallel(t.Float32s())
	case tensor.Float64:
		clearParallel(t.Float64s())
	}
}

func clearParallel[T float](s []T) {
	p := workers(len(s)/4, len(s))
	if p <= 1 {
		clear(s)
		return
	}
	t := newTask[clearTask[T]]()
	defer freeTask(t)
	t.s = s
	parallelRun(len(s), p, t)
}

// clearTask is clearParallel's work for parallelRun.
type clearTask[T float] struct{ s []T }

func (t *clearTask[T]) run(lo, hi int) int {
	clear(t.s[lo:hi])
	return -1
}

// DiffWRT reports that data is differentiable (unless WithoutGrad was
// given) and indices are not.
func (o *op) DiffWRT(inputs int) []bool {
	return []bool{!o.cfg.noGrad, false}
}

// SymDiff returns the gradient node of data: a diffOp applied to indices
// and the upstream gradient.
func (o *op) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if err := checkArity(o.kind, "", len(inputs), 2); err != nil {
		return nil, err
	}
	if o.cfg.noGrad {
		return gorgonia.Nodes{nil, nil}, nil
	}
	if err := o.checkDifferentiable(); err != nil {
		return nil, err
	}
	d, err := gorgonia.ApplyOp(&diffOp{o}, inputs[1], grad)
	if err != nil {
		return nil, fmt.Errorf("%s: building the gradient: %w", o.kind, err)
	}
	return gorgonia.Nodes{d, nil}, nil
}

// DoDiff adds the gradient of data into the gradient it already has, for
// Gorgonia's LispMachine.
func (o *op) DoDiff(ctx gorgonia.ExecutionContext, inputs gorgonia.Nodes, output *gorgonia.Node) error {
	if err := checkArity(o.kind, "", len(inputs), 2); err != nil {
		return err
	}
	if o.cfg.noGrad {
		return nil
	}
	if err := o.checkDifferentiable(); err != nil {
		return err
	}
	dg, err := inputs[0].Grad()
	if err != nil {
		return fmt.Errorf("%s: data has no gradient to add into: %w", o.kind, err)
	}
	up, err := output.Grad()
	if err != nil {
		return fmt.Errorf("%s: output has no gradient: %w", o.kind, err)
	}
	dst, ok := dg.(*tensor.Dense)
	if !ok {
		return fmt.Errorf("%s: gradient of data is a %T, not a *tensor.Dense: %w", o.kind, dg, ErrDtype)
	}
	return backward(o.kind, dst, inputs[1].Value(), up, o.axis, o.cfg.gradScale, o.padding())
}

// padding returns the normalised padding index, or -1 if there is none.
func (o *op) padding() int {
	if o.cfg.hasPad {
		return o.cfg.pad
	}
	return -1
}

func (o *op) checkDifferentiable() error {
	if o.dataType != tensor.Float32 && o.dataType != tensor.Float64 {
		return fmt.Errorf("%s: no gradient for %v data; only float32 and float64 data are differentiable: %w", o.kind, o.dataType, ErrDtype)
	}
	return nil
}

// diffOp computes the gradient of data for an op: indices and the upstream
// gradient in, a tensor shaped like data out.
type diffOp struct{ fwd *op }

func (d *diffOp) Arity() int { return 2 }

func (d *diffOp) Type() hm.Type {
	f := d.fwd
	return hm.NewFnType(
		tensorType(len(f.indexShape), f.indexType),
		tensorType(len(f.outShape), f.dataType),
		tensorType(len(f.dataShape), f.dataType))
}

func (d *diffOp) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return d.fwd.dataShape.Clone(), nil
}

// Do returns a new gradient tensor.
func (d *diffOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := checkArity(d.fwd.kind, " gradient", len(in), 2); err != nil {
		return nil, err
	}
	return d.overwrite(newOutput(d.fwd.dataType, d.fwd.dataShape), in)
}

// UsePreallocDo clears prealloc, which holds the last run's gradient, and
// adds this run's into it; if prealloc cannot hold it, it returns a new tensor.
func (d *diffOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := checkArity(d.fwd.kind, " gradient", len(in), 2); err != nil {
		return nil, err
	}
	out, ok := prealloc.(*tensor.Dense)
	if !ok || !fits(out, d.fwd.dataShape, d.fwd.dataType, in[0], in[1]) {
		return d.Do(in...)
	}
	return d.overwrite(out, in)
}

// overwrite sets out to the gradient of indices in[0] and upstream gradient
// in[1], whatever out held; on error out is unchanged.
func (d *diffOp) overwrite(out *tensor.Dense, in []gorgonia.Value) (gorgonia.Value, error) {
	a, err := planAdd(d.fwd.kind, out, in[0], in[1], d.fwd.axis)
	if err != nil {
		return nil, err
	}
	a.run(d.fwd.cfg.gradScale, d.fwd.padding(), true)
	return out, nil
}

// IncrDo adds the gradient into toIncr without a temporary.
func (d *diffOp) IncrDo(toIncr gorgonia.Value, in ...gorgonia.Value) error {
	if err := checkArity(d.fwd.kind, " gradient", len(in), 2); err != nil {
		return err
	}
	dst, ok := toIncr.(*tensor.Dense)
	if !ok {
		return fmt.Errorf("%s gradient: cannot add into a %T: %w", d.fwd.kind, toIncr, ErrDtype)
	}
	return backward(d.fwd.kind, dst, in[0], in[1], d.fwd.axis, d.fwd.cfg.gradScale, d.fwd.padding())
}

func (d *diffOp) ReturnsPtr() bool     { return false }
func (d *diffOp) CallsExtern() bool    { return false }
func (d *diffOp) OverwritesInput() int { return -1 }

func (d *diffOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%v %v", d, d.fwd.dataShape) }

func (d *diffOp) Hashcode() uint32 {
	h := fnv.New32a()
	d.WriteHash(h)
	return h.Sum32()
}

func (d *diffOp) String() string { return d.fwd.String() + "Grad" }

var (
	_ gorgonia.SDOp            = (*op)(nil)
	_ gorgonia.ADOp            = (*op)(nil)
	_ gorgonia.UsePreallocDoer = (*diffOp)(nil)
	_ gorgonia.IncrDoer        = (*diffOp)(nil)
)
