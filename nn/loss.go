package nn

import (
	"fmt"
	"hash"
	"hash/fnv"
	"math"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/dense"
	"github.com/gathergrad/gather/internal/kernel"
)

// opCrossEntropy names CrossEntropy in error messages.
const opCrossEntropy = "cross_entropy"

// NLLLoss returns the mean negative log-likelihood of integer targets under
// log-probabilities, PyTorch's nll_loss with mean reduction:
//
//	-mean over i of logProbs[i..., targets[i...]]
//
// logProbs has shape [..., classes] (e.g. the output of
// gorgonia.LogSoftMax); targets has the shape of logProbs without its last
// axis and dtype Int, Int32 or Int64. The pick is a GatherElements on the
// last axis, so the gradient reaches logProbs at the targets only.
func NLLLoss(logProbs, targets *gorgonia.Node) (*gorgonia.Node, error) {
	if logProbs == nil || targets == nil {
		return nil, fmt.Errorf("nll loss: logProbs and targets must be nodes: %w", gather.ErrShape)
	}
	ls := logProbs.Shape()
	if err := checkTargets("nll loss", "log-probabilities", ls, targets.Shape()); err != nil {
		return nil, err
	}
	picked := append(ls[:len(ls)-1].Clone(), 1)
	t, err := gorgonia.Reshape(targets, picked)
	if err != nil {
		return nil, fmt.Errorf("nll loss: %w", dense.Graph(err))
	}
	// The pick names the targets in its errors (their positions gain the
	// trailing 0 of the reshape).
	layer := dense.Label{Op: "nll_loss", Arg: "targets", NonNegative: true}
	lp, err := gather.GatherElements(logProbs, t, len(ls)-1, func(c *dense.Config) { c.Layer = layer })
	if err != nil {
		return nil, fmt.Errorf("nll loss: %w", err)
	}
	mean, err := gorgonia.Mean(lp)
	if err != nil {
		return nil, fmt.Errorf("nll loss: %w", dense.Graph(err))
	}
	loss, err := gorgonia.Neg(mean)
	if err != nil {
		return nil, fmt.Errorf("nll loss: %w", dense.Graph(err))
	}
	return loss, nil
}

// CrossEntropy returns the mean cross-entropy of integer targets under the
// softmax of logits over their last axis, PyTorch's cross_entropy with mean
// reduction:
//
//	-mean over i of log(softmax(logits[i...])[targets[i...]])
//
// It has the value of NLLLoss(gorgonia.LogSoftMax(logits), targets) but is
// one op: it keeps no log-probabilities, allocates nothing per row, and its
// gradient with respect to logits, (softmax(logits) - onehot(targets)) / n
// for n rows, is computed in one pass. logits has shape [..., classes] and
// dtype Float32 or Float64; targets has the shape of logits without its last
// axis and dtype Int, Int32 or Int64, each in [0, classes) as PyTorch
// requires; any other target, negative ones included, is an *IndexError
// when the graph runs. With no rows the loss is NaN, as a
// mean over nothing is. Float32 logits are exponentiated in float32 (within
// 2 units in the last place), float64 ones with math.Exp; sums and the loss
// accumulate in float64. It is O(size of logits) forward and backward.
func CrossEntropy(logits, targets *gorgonia.Node) (*gorgonia.Node, error) {
	if logits == nil || targets == nil {
		return nil, fmt.Errorf("%s: logits and targets must be nodes: %w", opCrossEntropy, gather.ErrShape)
	}
	dt := logits.Dtype()
	if dt != tensor.Float32 && dt != tensor.Float64 {
		return nil, fmt.Errorf("%s: logits must be float32 or float64, got %v: %w", opCrossEntropy, dt, gather.ErrDtype)
	}
	if err := dense.CheckIndexDtype(opCrossEntropy, "targets", targets.Dtype()); err != nil {
		return nil, err
	}
	ls := logits.Shape().Clone()
	if err := checkTargets(opCrossEntropy, "logits", ls, targets.Shape()); err != nil {
		return nil, err
	}
	if _, err := dense.Size(opCrossEntropy, "logits", ls); err != nil {
		return nil, err
	}
	if ls[len(ls)-1] == 0 && targets.Shape().TotalSize() > 0 {
		return nil, fmt.Errorf("%s: logits of shape %v have no classes, so no target is valid: %w", opCrossEntropy, ls, gather.ErrIndexOutOfRange)
	}
	o := &crossEntropyOp{dtype: dt, targetType: targets.Dtype(), shape: ls}
	n, err := gorgonia.ApplyOp(o, logits, targets)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", opCrossEntropy, dense.Graph(err))
	}
	return n, nil
}

// checkTargets reports an error unless targets has the shape of scores
// (named what) without its last axis.
func checkTargets(op, what string, scores, targets tensor.Shape) error {
	if len(scores) < 1 || !dense.SameShape(scores[:len(scores)-1], targets) {
		return fmt.Errorf("%s: targets of shape %v do not match %s of shape %v (want %v): %w",
			op, targets, what, scores, scores[:max(len(scores)-1, 0)], gather.ErrShape)
	}
	return nil
}

// crossEntropyOp is the op of CrossEntropy: logits and targets in, a scalar out.
type crossEntropyOp struct {
	dtype      tensor.Dtype // of logits and of the loss
	targetType tensor.Dtype
	shape      tensor.Shape // of logits
}

// entropyArgs are the checked arguments of the loss and of its gradient.
type entropyArgs struct {
	logits  *tensor.Dense // row-major
	targets dense.Indices
	rows    int
	classes int
}

// args reads logits and targets and checks every target, so that nothing is
// written on error.
func (o *crossEntropyOp) args(logits, targets gorgonia.Value) (entropyArgs, error) {
	x, err := dense.Read(opCrossEntropy, "logits", logits)
	if err != nil {
		return entropyArgs{}, err
	}
	if x.Dtype() != o.dtype || !dense.SameShape(x.Shape(), o.shape) {
		return entropyArgs{}, fmt.Errorf("%s: logits are %v of shape %v, want %v of shape %v: %w",
			opCrossEntropy, x.Dtype(), x.Shape(), o.dtype, o.shape, gather.ErrShape)
	}
	t, err := dense.ReadIndices(opCrossEntropy, "targets", targets)
	if err != nil {
		return entropyArgs{}, err
	}
	classes := o.shape[len(o.shape)-1]
	rows := o.shape.TotalSize() / max(classes, 1)
	if len(t.Shape) != len(o.shape)-1 || t.Shape.TotalSize() != rows {
		return entropyArgs{}, fmt.Errorf("%s: targets of shape %v do not match logits of shape %v: %w",
			opCrossEntropy, t.Shape, o.shape, gather.ErrShape)
	}
	if err := checkIndices(dense.Label{Op: opCrossEntropy, Arg: "targets", NonNegative: true}, t, len(o.shape)-1, classes); err != nil {
		return entropyArgs{}, err
	}
	return entropyArgs{logits: x, targets: t, rows: rows, classes: classes}, nil
}

// Arity returns 2: logits and targets.
func (o *crossEntropyOp) Arity() int { return 2 }

// Type returns logits, targets -> a scalar of the logits' dtype.
func (o *crossEntropyOp) Type() hm.Type {
	return hm.NewFnType(dense.Type(len(o.shape), o.dtype), dense.Type(len(o.shape)-1, o.targetType), o.dtype)
}

// InferShape returns the scalar shape.
func (o *crossEntropyOp) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return tensor.ScalarShape(), nil
}

// Do returns the loss as one of Gorgonia's scalar values.
func (o *crossEntropyOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := checkArity(opCrossEntropy, "", len(in), 2); err != nil {
		return nil, err
	}
	a, err := o.args(in[0], in[1])
	if err != nil {
		return nil, err
	}
	loss := math.NaN()
	if a.rows > 0 {
		loss = runEntropy(a) / float64(a.rows)
	}
	if o.dtype == tensor.Float32 {
		return gorgonia.NewF32(float32(loss)), nil
	}
	return gorgonia.NewF64(loss), nil
}

func (o *crossEntropyOp) ReturnsPtr() bool     { return false }
func (o *crossEntropyOp) CallsExtern() bool    { return false }
func (o *crossEntropyOp) OverwritesInput() int { return -1 }

func (o *crossEntropyOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "%v %v %v %v", o, o.dtype, o.targetType, o.shape)
}

func (o *crossEntropyOp) Hashcode() uint32 {
	h := fnv.New32a()
	o.WriteHash(h)
	return h.Sum32()
}

func (o *crossEntropyOp) String() string { return "CrossEntropy" }

// DiffWRT reports that logits are differentiable and targets are not.
func (o *crossEntropyOp) DiffWRT(int) []bool { return []bool{true, false} }

// SymDiff returns the gradient node of logits.
func (o *crossEntropyOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if err := checkArity(opCrossEntropy, "", len(inputs), 2); err != nil {
		return nil, err
	}
	if err := dense.CheckGradSize(opCrossEntropy, nil, inputs[0]); err != nil {
		return nil, err
	}
	d, err := gorgonia.ApplyOp(&crossEntropyDiffOp{o}, inputs[0], inputs[1], grad)
	if err != nil {
		return nil, fmt.Errorf("%s: building the gradient: %w", opCrossEntropy, dense.Graph(err))
	}
	return gorgonia.Nodes{d, nil}, nil
}

// DoDiff adds the gradient of logits into the gradient they already have,
// for Gorgonia's LispMachine.
func (o *crossEntropyOp) DoDiff(ctx gorgonia.ExecutionContext, inputs gorgonia.Nodes, output *gorgonia.Node) error {
	if err := checkArity(opCrossEntropy, "", len(inputs), 2); err != nil {
		return err
	}
	dg, err := inputs[0].Grad()
	if err != nil {
		return fmt.Errorf("%s: logits have no gradient to add into: %w", opCrossEntropy, dense.Graph(err))
	}
	up, err := output.Grad()
	if err != nil {
		return fmt.Errorf("%s: the loss has no gradient: %w", opCrossEntropy, dense.Graph(err))
	}
	return (&crossEntropyDiffOp{o}).IncrDo(dg, inputs[0].Value(), inputs[1].Value(), up)
}

// crossEntropyDiffOp computes the gradient of logits: logits, targets and
// the loss's upstream gradient in, a tensor shaped like logits out.
type crossEntropyDiffOp struct{ fwd *crossEntropyOp }

func (d *crossEntropyDiffOp) Arity() int { return 3 }

func (d *crossEntropyDiffOp) Type() hm.Type {
	f := d.fwd
	x := dense.Type(len(f.shape), f.dtype)
	return hm.NewFnType(x, dense.Type(len(f.shape)-1, f.targetType), f.dtype, x)
}

func (d *crossEntropyDiffOp) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return d.fwd.shape.Clone(), nil
}

// Do returns a new gradient tensor.
func (d *crossEntropyDiffOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	out := tensor.New(tensor.Of(d.fwd.dtype), tensor.WithShape(d.fwd.shape.Clone()...))
	if err := d.run(out, false, in); err != nil {
		return nil, err
	}
	return out, nil
}

// UsePreallocDo overwrites prealloc with the gradient when it can hold it,
// else returns a new tensor.
func (d *crossEntropyDiffOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	out, ok := prealloc.(*tensor.Dense)
	if !ok || len(in) != 3 || out.Dtype() != d.fwd.dtype || !dense.SameShape(out.Shape(), d.fwd.shape) || !dense.Writable(out) || overlapsValue(out, in[0]) {
		return d.Do(in...)
	}
	if err := d.run(out, false, in); err != nil {
		return nil, err
	}
	return out, nil
}

// IncrDo adds the gradient into toIncr.
func (d *crossEntropyDiffOp) IncrDo(toIncr gorgonia.Value, in ...gorgonia.Value) error {
	dst, ok := toIncr.(*tensor.Dense)
	if !ok {
		return fmt.Errorf("%s gradient: cannot add into a %T: %w", opCrossEntropy, toIncr, gather.ErrDtype)
	}
	return d.run(dst, true, in)
}

// run writes (or, with add, adds) the gradient into dst after checking
// every argument, so that dst is untouched on error.
func (d *crossEntropyDiffOp) run(dst *tensor.Dense, add bool, in []gorgonia.Value) error {
	if err := checkArity(opCrossEntropy, " gradient", len(in), 3); err != nil {
		return err
	}
	if dst.Dtype() != d.fwd.dtype || !dense.SameShape(dst.Shape(), d.fwd.shape) || !dense.Writable(dst) {
		return fmt.Errorf("%s gradient: destination is %v of shape %v, want a row-major %v tensor of shape %v: %w",
			opCrossEntropy, dst.Dtype(), dst.Shape(), d.fwd.dtype, d.fwd.shape, gather.ErrShape)
	}
	a, err := d.fwd.args(in[0], in[1])
	if err != nil {
		return err
	}
	up, err := dense.Scalar("upstream gradient", in[2])
	if err != nil {
		return fmt.Errorf("%s gradient: %w", opCrossEntropy, err)
	}
	if a.rows == 0 {
		return nil
	}
	runEntropyGrad(dst, a, up/float64(a.rows), add)
	return nil
}

func (d *crossEntropyDiffOp) ReturnsPtr() bool     { return false }
func (d *crossEntropyDiffOp) CallsExtern() bool    { return false }
func (d *crossEntropyDiffOp) OverwritesInput() int { return -1 }

func (d *crossEntropyDiffOp) WriteHash(h hash.Hash) {
	d.fwd.WriteHash(h)
	fmt.Fprint(h, "Grad")
}

func (d *crossEntropyDiffOp) Hashcode() uint32 {
	h := fnv.New32a()
	d.WriteHash(h)
	return h.Sum32()
}

func (d *crossEntropyDiffOp) String() string { return "CrossEntropyGrad" }

var (
	_ gorgonia.SDOp            = (*crossEntropyOp)(nil)
	_ gorgonia.ADOp            = (*crossEntropyOp)(nil)
	_ gorgonia.UsePreallocDoer = (*crossEntropyDiffOp)(nil)
	_ gorgonia.IncrDoer        = (*crossEntropyDiffOp)(nil)
)

// runEntropy returns the summed loss of a's rows.
func runEntropy(a entropyArgs) float64 {
	switch a.logits.Dtype() {
	case tensor.Float32:
		return entropyByIndex(a.logits.Float32s(), a)
	case tensor.Float64:
		return entropyByIndex(a.logits.Float64s(), a)
	}
	return math.NaN()
}

func entropyByIndex[T kernel.Float](x []T, a entropyArgs) float64 {
	switch a.targets.Dtype {
	case tensor.Int:
		return entropySum(x, a.targets.Ints, a.classes)
	case tensor.Int32:
		return entropySum(x, a.targets.I32, a.classes)
	case tensor.Int64:
		return entropySum(x, a.targets.I64, a.classes)
	}
	return math.NaN()
}

// entropyRows is the number of rows whose losses are summed together before
// their sum joins the total: the blocks, not the workers, fix the order of
// the additions, so the loss is the same for any GOMAXPROCS.
const entropyRows = 256

// entropySum returns the sum over rows r of
//
//	logsumexp(x[r*c:(r+1)*c]) - x[r*c+t[r]]
//
// with t's values checked to lie in [-c, c-1]. Each row is shifted by its
// maximum before exp, so large logits do not overflow.
func entropySum[T kernel.Float, I kernel.Index](x []T, t []I, c int) float64 {
	blocks := make([]float64, (len(t)+entropyRows-1)/entropyRows)
	p := kernel.Workers(len(x), len(blocks))
	kernel.ParallelFor(len(blocks), p, func(lo, hi int) {
		e, m, s := make([]T, entropyRows*c), make([]float64, entropyRows), make([]float64, entropyRows)
		for b := lo; b < hi; b++ {
			r0, r1 := b*entropyRows, min((b+1)*entropyRows, len(t))
			expRows(e, m[:r1-r0], s, x[r0*c:r1*c], c)
			var sum float64
			for r := r0; r < r1; r++ {
				sum += m[r-r0] + math.Log(s[r-r0]) - float64(x[r*c+kernel.Wrap(t[r], c)])
			}
			blocks[b] = sum
		}
	})
	var total float64
	for _, s := range blocks {
		total += s
	}
	return total
}

// expRows sets, for each row r of x (rows of c elements, len(m) rows),
// m[r] to the row's shift (see shift), e[r*c+j] to exp(x[r*c+j] - m[r])
// in T, and s[r] to the row's sum of e, added in float64 in order. float32
// rows with a finite maximum are exponentiated in float32 by kernel.Exp32
// (within 2 units in the last place), all in one call; the others by
// math.Exp.
func expRows[T kernel.Float](e []T, m, s []float64, x []T, c int) {
	e32, fast := any(e[:len(m)*c]).([]float32)
	for r := range m {
		row, er := x[r*c:(r+1)*c], e[r*c:(r+1)*c]
		var finite bool
		m[r], finite = shift(row)
		switch {
		case !fast:
			expRow(er, row, m[r])
		case finite:
			s := T(m[r]) // one of the row's elements
			for j, v := range row {
				er[j] = v - s
			}
		} // a float32 row with an infinite maximum: after Exp32, below
	}
	if fast {
		kernel.Exp32(e32, e32)
		for r := range m { // rows with an infinite maximum (shift 0) again, with math.Exp
			if m[r] != 0 {
				continue
			}
			row := x[r*c : (r+1)*c]
			if _, finite := shift(row); !finite {
				expRow(e[r*c:(r+1)*c], row, 0)
			}
		}
	}
	for r := range m {
		var sum float64
		for _, v := range e[r*c : (r+1)*c] {
			sum += float64(v)
		}
		s[r] = sum
	}
}

// expRow sets er[j] = exp(row[j] - m) with math.Exp, in float64.
func expRow[T kernel.Float](er, row []T, m float64) {
	for j, v := range row {
		er[j] = T(math.Exp(float64(v) - m))
	}
}

// shift returns the row's largest element that is not NaN, which
// subtracted from every element before exp keeps exp from overflowing, and
// true; or 0 and false when that maximum is infinite (all -Inf, or a +Inf
// in the row), where the unshifted formula gives IEEE's answer. A NaN in
// the row makes its loss and gradient NaN with any shift.
func shift[T kernel.Float](row []T) (float64, bool) {
	m := T(math.Inf(-1))
	for _, v := range row {
		if v > m {
			m = v
		}
	}
	if math.IsInf(float64(m), 0) {
		return 0, false
	}
	return float64(m), true
}

// runEntropyGrad writes or adds scale × (softmax - onehot) into dst.
func runEntropyGrad(dst *tensor.Dense, a entropyArgs, scale float64, add bool) {
	switch a.logits.Dtype() {
	case tensor.Float32:
		entropyGradByIndex(dst.Float32s(), a.logits.Float32s(), a, scale, add)
	case tensor.Float64:
		entropyGradByIndex(dst.Float64s(), a.logits.Float64s(), a, scale, add)
	}
}

func entropyGradByIndex[T kernel.Float](dst, x []T, a entropyArgs, scale float64, add bool) {
	p := kernel.Workers(len(x), a.rows)
	switch a.targets.Dtype {
	case tensor.Int:
		kernel.ParallelFor(a.rows, p, func(lo, hi int) { entropyGrad(dst, x, a.targets.Ints, a.classes, scale, add, lo, hi) })
	case tensor.Int32:
		kernel.ParallelFor(a.rows, p, func(lo, hi int) { entropyGrad(dst, x, a.targets.I32, a.classes, scale, add, lo, hi) })
	case tensor.Int64:
		kernel.ParallelFor(a.rows, p, func(lo, hi int) { entropyGrad(dst, x, a.targets.I64, a.classes, scale, add, lo, hi) })
	}
}

// entropyGrad is, for the rows r in [lo, hi) and p = softmax(x[r*c:(r+1)*c]),
//
//	dst[r*c+j] = scale * (p[j] - (j == t[r] ? 1 : 0))
//
// or dst[r*c+j] += the same with add. Every element is computed on its own,
// so the result does not depend on how the rows are split.
func entropyGrad[T kernel.Float, I kernel.Index](dst, x []T, t []I, c int, scale float64, add bool, lo, hi int) {
	// exp(x - max) of a block of rows, the rows' shifts and sums
	e, m, s := make([]T, entropyRows*c), make([]float64, entropyRows), make([]float64, entropyRows)
	for r0 := lo; r0 < hi; r0 += entropyRows {
		r1 := min(r0+entropyRows, hi)
		expRows(e, m[:r1-r0], s, x[r0*c:r1*c], c)
		for r := r0; r < r1; r++ {
			er, out := e[(r-r0)*c:(r-r0+1)*c], dst[r*c:(r+1)*c]
			out = out[:len(er)]
			k := scale / s[r-r0]
			target := kernel.Wrap(t[r], c)
			for j := range out {
				g := k * float64(er[j])
				if j == target {
					g -= scale
				}
				if add {
					out[j] += T(g)
				} else {
					out[j] = T(g)
				}
			}
		}
	}
}

// overlapsValue reports whether out shares memory with the value v.
func overlapsValue(out *tensor.Dense, v gorgonia.Value) bool {
	t, ok := v.(*tensor.Dense)
	return ok && dense.Overlaps(out, t)
}

// checkArity reports an error unless the op named op got want inputs.
func checkArity(op, role string, n, want int) error {
	if n != want {
		return fmt.Errorf("%s%s: want %d inputs, got %d: %w", op, role, want, n, gather.ErrShape)
	}
	return nil
}

// checkIndices returns a *gather.IndexError for the first index of ix
// outside the range l admits ([0, s) or [-s, s-1]), or nil; l names where
// the indices are, axis what they index.
func checkIndices(l dense.Label, ix dense.Indices, axis, s int) error {
	if p := ix.FirstBadIn(l, s); p >= 0 {
		return &gather.IndexError{Op: l.Op, Name: l.Name, Arg: l.Arg, Pos: dense.Unravel(p, ix.Shape), Value: ix.At(p), Axis: axis, Size: s, NonNegative: l.NonNegative}
	}
	return nil
}

// clearFloats sets a float32 or float64 tensor to zero.
func clearFloats(t *tensor.Dense) {
	switch t.Dtype() {
	case tensor.Float32:
		kernel.Clear(t.Float32s())
	case tensor.Float64:
		kernel.Clear(t.Float64s())
	}
}
