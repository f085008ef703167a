package nn

import (
	"fmt"
	"math"
	"sync"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/opconfig"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
	"github.com/gathergrad/gather/internal/shapes"
)

// opCrossEntropy and opNLL name the losses in error messages.
const (
	opCrossEntropy = "cross_entropy"
	opNLL          = "nll_loss"
)

// NLLLoss returns the negative log-likelihood of integer targets under
// log-probabilities, PyTorch's F.nll_loss: for example i with target y,
//
//	l_i = -w[y] · logProbs[i..., y]
//
// logProbs has shape [..., classes] (e.g. the output of
// gorgonia.LogSoftMax) and dtype Float32 or Float64; targets has the shape
// of logProbs without its last axis and dtype Int, Int32 or Int64, each in
// [0, classes) as PyTorch requires (any other target is an *IndexError when
// the graph runs). Options: WithIgnoreIndex, WithClassWeights (w; 1 for every class
// without it) and WithReduction. ReduceMean, the default, divides the sum
// by the sum of w[y] over the targets counted (their number without
// weights): with every target ignored it is NaN, as in PyTorch. The
// gradient reaches logProbs at the targets only. It is O(size of
// logProbs).
func NLLLoss(logProbs, targets *gorgonia.Node, opts ...LossOption) (*gorgonia.Node, error) {
	return classLoss(opNLL, "NLLLoss", forNLLLoss, logProbs, targets, opts)
}

// CrossEntropy returns the cross-entropy of integer targets under the
// softmax of logits over their last axis, PyTorch's F.cross_entropy: for
// example i with target y and p = log_softmax(logits[i...]),
//
//	l_i = (1-ε)·(-w[y]·p[y]) + (ε/classes)·Σ_c -w[c]·p[c]
//
// with w the class weights (1 without WithClassWeights) and ε the label
// smoothing (0 without WithLabelSmoothing), as PyTorch 1.13 computes them.
// Options: WithIgnoreIndex, WithClassWeights, WithLabelSmoothing and WithReduction.
// ReduceMean, the default, divides the sum by the sum of w[y] over the
// targets counted (their number without weights); with every target
// ignored, or no rows at all, it is NaN, as in PyTorch. ReduceNone gives
// one loss per example, shaped like the targets, 0 for an ignored one.
//
// It has the value of NLLLoss(gorgonia.LogSoftMax(logits), targets) but is
// one op: it keeps no log-probabilities, and its gradient with respect to
// logits, (softmax(logits) - onehot(targets)) / n for n rows without
// options, is computed in one pass. logits has shape [..., classes] and
// dtype Float32 or Float64; targets has the shape of logits without its
// last axis and dtype Int, Int32 or Int64, each in [0, classes) as PyTorch
// requires; any other target is an *IndexError when the graph runs.
// Float32 logits are exponentiated in float32 (within 2 units in the last
// place), float64 ones with math.Exp; sums and the loss accumulate in
// float64. It is O(size of logits) forward and backward.
func CrossEntropy(logits, targets *gorgonia.Node, opts ...LossOption) (*gorgonia.Node, error) {
	return classLoss(opCrossEntropy, "CrossEntropy", forCrossEntropy, logits, targets, opts)
}

// classLoss builds CrossEntropy (op opCrossEntropy) or NLLLoss (opNLL).
func classLoss(op, fn string, allowed optKind, scores, targets *gorgonia.Node, opts []LossOption) (*gorgonia.Node, error) {
	c, err := newConfig(op, fn, allowed, opts)
	if err != nil {
		return nil, err
	}
	what := "logits"
	if op == opNLL {
		what = "log-probabilities"
	}
	if scores == nil || targets == nil {
		return nil, fmt.Errorf("%s: %s and targets must be nodes: %w", op, what, gather.ErrShape)
	}
	dt := scores.Dtype()
	if dt != tensor.Float32 && dt != tensor.Float64 {
		return nil, fmt.Errorf("%s: %s must be float32 or float64, got %v: %w", op, what, dt, gather.ErrDtype)
	}
	if err := operand.CheckIndexDtype(op, "targets", targets.Dtype()); err != nil {
		return nil, err
	}
	ls := scores.Shape().Clone()
	if err := checkTargets(op, what, ls, targets.Shape()); err != nil {
		return nil, err
	}
	if _, err := shapes.Size(op, what, ls); err != nil {
		return nil, err
	}
	classes := ls[len(ls)-1]
	if classes == 0 && targets.Shape().TotalSize() > 0 && !c.loss.hasIgnore {
		return nil, fmt.Errorf("%s: %s of shape %v have no classes, so no target is valid: %w", op, what, ls, gather.ErrIndexOutOfRange)
	}
	o := &crossEntropyOp{op: op, dtype: dt, targetType: targets.Dtype(), shape: ls,
		reduction: c.loss.reduction, hasIgnore: c.loss.hasIgnore, ignore: c.loss.ignore, smoothing: c.loss.smoothing}
	if c.loss.hasWeights {
		if o.weights, err = classVector(op, "class weights", c.loss.weights, dt, classes); err != nil {
			return nil, err
		}
	}
	o.Op = opkit.New(o, o.dtype, o.targetType, o.shape, o.reduction, o.hasIgnore, o.ignore, o.weights, o.smoothing)
	n, err := gorgonia.ApplyOp(o, scores, targets)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, errs.Graph(err))
	}
	return n, nil
}

// checkTargets reports an error unless targets has the shape of scores
// (named what) without its last axis.
func checkTargets(op, what string, scores, targets tensor.Shape) error {
	if len(scores) < 1 || !shapes.SameShape(scores[:len(scores)-1], targets) {
		return fmt.Errorf("%s: targets of shape %v do not match %s of shape %v (want %v): %w",
			op, targets, what, scores, scores[:max(len(scores)-1, 0)], gather.ErrShape)
	}
	return nil
}

// crossEntropyOp is the op of CrossEntropy (op opCrossEntropy) and of
// NLLLoss (op opNLL, whose inputs are log-probabilities): scores and
// targets in, the reduced loss (a scalar) or the losses (the targets'
// shape, ReduceNone) out.
type crossEntropyOp struct {
	opkit.Op
	op         string
	dtype      tensor.Dtype // of the scores and of the loss
	targetType tensor.Dtype
	shape      tensor.Shape // of the scores

	reduction Reduction
	hasIgnore bool
	ignore    int64
	weights   []float64 // nil: 1 for every class
	smoothing float64
}

// plain reports whether o is CrossEntropy without options, which the
// fastest kernels compute.
func (o *crossEntropyOp) plain() bool {
	return o.op == opCrossEntropy && o.reduction == ReduceMean && !o.hasIgnore && o.weights == nil && o.smoothing == 0
}

// entropyArgs are the checked arguments of the loss and of its gradient.
type entropyArgs struct {
	logits  *tensor.Dense // row-major
	targets operand.Indices
	rows    int
	classes int
}

// args reads logits and targets and checks every target, so that nothing is
// written on error.
func (o *crossEntropyOp) args(logits, targets gorgonia.Value) (entropyArgs, error) {
	x, err := operand.Read(o.op, "logits", logits)
	if err != nil {
		return entropyArgs{}, err
	}
	if x.Dtype() != o.dtype || !shapes.SameShape(x.Shape(), o.shape) {
		return entropyArgs{}, fmt.Errorf("%s: logits are %v of shape %v, want %v of shape %v: %w",
			o.op, x.Dtype(), x.Shape(), o.dtype, o.shape, gather.ErrShape)
	}
	t, err := operand.ReadIndices(o.op, "targets", targets)
	if err != nil {
		return entropyArgs{}, err
	}
	classes := o.shape[len(o.shape)-1]
	rows := 1
	for _, d := range o.shape[:len(o.shape)-1] {
		rows *= d
	}
	if len(t.Shape) != len(o.shape)-1 || t.Shape.TotalSize() != rows && !(len(t.Shape) == 0 && rows == 1) {
		return entropyArgs{}, fmt.Errorf("%s: targets of shape %v do not match logits of shape %v: %w",
			o.op, t.Shape, o.shape, gather.ErrShape)
	}
	l := opconfig.Label{Op: o.op, Arg: "targets", NonNegative: true}
	if o.hasIgnore {
		find := operand.Pick(t.Dtype, firstBadTarget[int], firstBadTarget[int32], firstBadTarget[int64])
		if p := find(t, rows, classes, o.ignore); p >= 0 {
			return entropyArgs{}, &gather.IndexError{Op: l.Op, Arg: l.Arg, Pos: shapes.Unravel(p, t.Shape), Value: t.At(p),
				Axis: len(o.shape) - 1, Size: classes, NonNegative: true}
		}
	} else if err := operand.CheckIndices(l, t, len(o.shape)-1, classes); err != nil {
		return entropyArgs{}, err
	}
	return entropyArgs{logits: x, targets: t, rows: rows, classes: classes}, nil
}

// Arity returns 2: logits and targets.
func (o *crossEntropyOp) Arity() int { return 2 }

// outShape is the shape of the loss: a scalar, or the targets' shape for
// ReduceNone.
func (o *crossEntropyOp) outShape() tensor.Shape {
	if o.reduction == ReduceNone {
		return tensor.Shape(o.shape[:len(o.shape)-1]).Clone()
	}
	return tensor.ScalarShape()
}

// outType is the type of the loss.
func (o *crossEntropyOp) outType() hm.Type {
	if o.reduction == ReduceNone && len(o.shape) > 1 {
		return operand.Type(len(o.shape)-1, o.dtype)
	}
	return o.dtype
}

// Type returns logits, targets -> the loss.
func (o *crossEntropyOp) Type() hm.Type {
	return hm.NewFnType(operand.Type(len(o.shape), o.dtype), operand.Type(len(o.shape)-1, o.targetType), o.outType())
}

// InferShape returns the loss's shape.
func (o *crossEntropyOp) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return o.outShape(), nil
}

// Do returns the loss: one of Gorgonia's scalar values, or a tensor for
// ReduceNone.
func (o *crossEntropyOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity(o.op, "", len(in), 2); err != nil {
		return nil, err
	}
	a, err := o.args(in[0], in[1])
	if err != nil {
		return nil, err
	}
	if o.reduction == ReduceNone {
		per := make([]float64, a.rows)
		o.lossRows(a, per)
		if len(o.shape) == 1 {
			return o.scalar(per[0]), nil
		}
		out := tensor.New(tensor.Of(o.dtype), tensor.WithShape(o.outShape()...))
		for i, v := range per {
			if o.dtype == tensor.Float32 {
				out.Float32s()[i] = float32(v)
			} else {
				out.Float64s()[i] = v
			}
		}
		return out, nil
	}
	var loss float64
	if o.plain() {
		loss = math.NaN()
		if a.rows > 0 {
			loss = runEntropy(a) / float64(a.rows)
		}
	} else {
		sum, denom := o.lossRows(a, nil)
		loss = sum
		if o.reduction == ReduceMean {
			loss = sum / denom // NaN when nothing is counted, as in PyTorch
		}
	}
	return o.scalar(loss), nil
}

// scalar returns v as one of Gorgonia's scalar values of the op's dtype.
func (o *crossEntropyOp) scalar(v float64) gorgonia.Value {
	if o.dtype == tensor.Float32 {
		return gorgonia.NewF32(float32(v))
	}
	return gorgonia.NewF64(v)
}

func (o *crossEntropyOp) String() string {
	name := "CrossEntropy"
	if o.op == opNLL {
		name = "NLLLoss"
	}
	if o.plain() {
		return name
	}
	s := fmt.Sprintf("%s{%v", name, o.reduction)
	if o.hasIgnore {
		s += fmt.Sprintf(", ignore=%d", o.ignore)
	}
	if o.weights != nil {
		s += ", weights"
	}
	if o.smoothing != 0 {
		s += fmt.Sprintf(", smoothing=%v", o.smoothing)
	}
	return s + "}"
}

// DiffWRT reports that logits are differentiable and targets are not.
func (o *crossEntropyOp) DiffWRT(int) []bool { return []bool{true, false} }

// SymDiff returns the gradient node of logits.
func (o *crossEntropyOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if err := operand.CheckArity(o.op, "", len(inputs), 2); err != nil {
		return nil, err
	}
	if err := errs.CheckGradSize(o.op, nil, inputs[0]); err != nil {
		return nil, err
	}
	if o.reduction == ReduceNone {
		if err := errs.CheckGradSize(o.op, output); err != nil {
			return nil, err
		}
	}
	d, err := gorgonia.ApplyOp(&crossEntropyDiffOp{Op: opkit.New(o.ID(), "Grad"), fwd: o}, inputs[0], inputs[1], grad)
	if err != nil {
		return nil, fmt.Errorf("%s: building the gradient: %w", o.op, errs.Graph(err))
	}
	return gorgonia.Nodes{d, nil}, nil
}

// DoDiff adds the gradient of logits into the gradient they already have,
// for Gorgonia's LispMachine.
func (o *crossEntropyOp) DoDiff(ctx gorgonia.ExecutionContext, inputs gorgonia.Nodes, output *gorgonia.Node) error {
	dg, up, err := logitGrads(o.op, inputs, output)
	if err != nil {
		return err
	}
	return (&crossEntropyDiffOp{fwd: o}).IncrDo(dg, inputs[0].Value(), inputs[1].Value(), up)
}

// crossEntropyDiffOp computes the gradient of logits: logits, targets and
// the loss's upstream gradient in, a tensor shaped like logits out.
type crossEntropyDiffOp struct {
	opkit.Op
	fwd *crossEntropyOp
}

func (d *crossEntropyDiffOp) Arity() int { return 3 }

func (d *crossEntropyDiffOp) Type() hm.Type {
	f := d.fwd
	x := operand.Type(len(f.shape), f.dtype)
	return hm.NewFnType(x, operand.Type(len(f.shape)-1, f.targetType), f.outType(), x)
}

func (d *crossEntropyDiffOp) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return d.fwd.shape.Clone(), nil
}

// Do returns a new gradient tensor.
func (d *crossEntropyDiffOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	return doNew(d.fwd.dtype, d.fwd.shape, in, d.run)
}

// UsePreallocDo overwrites prealloc with the gradient when it can hold it,
// else returns a new tensor.
func (d *crossEntropyDiffOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	return doPrealloc(prealloc, d.fwd.dtype, d.fwd.shape, in, d.run)
}

// IncrDo adds the gradient into toIncr.
func (d *crossEntropyDiffOp) IncrDo(toIncr gorgonia.Value, in ...gorgonia.Value) error {
	return doIncr(d.fwd.op, toIncr, in, d.run)
}

// run writes (or, with add, adds) the gradient into dst after checking
// every argument, so that dst is untouched on error.
func (d *crossEntropyDiffOp) run(dst *tensor.Dense, add bool, in []gorgonia.Value) error {
	o := d.fwd
	if err := operand.CheckArity(o.op, " gradient", len(in), 3); err != nil {
		return err
	}
	if dst.Dtype() != o.dtype || !shapes.SameShape(dst.Shape(), o.shape) || !operand.Writable(dst) {
		return fmt.Errorf("%s gradient: destination is %v of shape %v, want a row-major %v tensor of shape %v: %w",
			o.op, dst.Dtype(), dst.Shape(), o.dtype, o.shape, gather.ErrShape)
	}
	a, err := o.args(in[0], in[1])
	if err != nil {
		return err
	}
	var up float64
	var ups []float64 // ReduceNone: the upstream gradient of each row
	if o.reduction == ReduceNone && len(o.shape) > 1 {
		u, err := operand.Read(o.op, "upstream gradient", in[2])
		if err != nil {
			return err
		}
		if u.Dtype() != o.dtype || !shapes.SameShape(u.Shape(), o.outShape()) {
			return fmt.Errorf("%s gradient: upstream gradient is %v of shape %v, want %v of shape %v: %w",
				o.op, u.Dtype(), u.Shape(), o.dtype, o.outShape(), gather.ErrShape)
		}
		ups = make([]float64, a.rows)
		for i := range ups {
			if o.dtype == tensor.Float32 {
				ups[i] = float64(u.Float32s()[i])
			} else {
				ups[i] = u.Float64s()[i]
			}
		}
	} else if up, err = operand.Scalar("upstream gradient", in[2]); err != nil {
		return fmt.Errorf("%s gradient: %w", o.op, err)
	}
	if a.rows == 0 || a.classes == 0 {
		return nil
	}
	if o.plain() {
		runEntropyGrad(dst, a, up/float64(a.rows), add)
		return nil
	}
	scale := up
	if o.reduction == ReduceMean {
		scale /= o.denominator(a)
	}
	o.gradRows(dst, a, scale, ups, add)
	return nil
}

func (d *crossEntropyDiffOp) String() string { return d.fwd.String() + "Grad" }

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
	return operand.Pick(a.targets.Dtype, entropySum[T, int], entropySum[T, int32], entropySum[T, int64])(x, a.targets, a.classes)
}

// entropyRows is the number of rows whose losses are summed together before
// their sum joins the total: the blocks, not the workers, fix the order of
// the additions, so the loss is the same for any GOMAXPROCS.
const entropyRows = 256

// blockScratch is the memory a loss works a block of entropyRows rows of
// c classes in: e the rows' exponentials, m and s their shifts and sums.
// The parallel parts of a loss take it from a pool, so that a loss run
// over and over allocates none once the pool holds a scratch per thread.
type blockScratch[T kernel.Float] struct {
	e    []T
	m, s []float64
}

// blockScratches holds the free *blockScratch[float32] and
// *blockScratch[float64].
var blockScratches = [2]sync.Pool{}

func scratchPool[T kernel.Float]() *sync.Pool {
	if _, ok := any(T(0)).(float32); ok {
		return &blockScratches[0]
	}
	return &blockScratches[1]
}

// getBlockScratch returns a scratch for rows of c classes.
func getBlockScratch[T kernel.Float](c int) *blockScratch[T] {
	sc, _ := scratchPool[T]().Get().(*blockScratch[T])
	if sc == nil {
		sc = &blockScratch[T]{m: make([]float64, entropyRows), s: make([]float64, entropyRows)}
	}
	if cap(sc.e) < entropyRows*c {
		sc.e = make([]T, entropyRows*c)
	}
	sc.e = sc.e[:entropyRows*c]
	return sc
}

// putBlockScratch gives sc back to its pool.
func putBlockScratch[T kernel.Float](sc *blockScratch[T]) { scratchPool[T]().Put(sc) }

// entropySum returns the sum over rows r of
//
//	logsumexp(x[r*c:(r+1)*c]) - x[r*c+t[r]]
//
// with t's values checked to lie in [-c, c-1]. Each row is shifted by its
// maximum before exp, so large logits do not overflow.
func entropySum[T kernel.Float, I kernel.Index](x []T, targets operand.Indices, c int) float64 {
	t := operand.Slice[I](targets)
	blocks := make([]float64, (len(t)+entropyRows-1)/entropyRows)
	p := kernel.Workers(len(x), len(blocks))
	kernel.ParallelFor(len(blocks), p, func(lo, hi int) {
		sc := getBlockScratch[T](c)
		defer putBlockScratch(sc)
		e, m, s := sc.e, sc.m, sc.s
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

// expRows sets, for each row r of x (rows of c elements, len(m) rows, at
// most entropyRows), m[r] to the row's shift (see shift), e[r*c+j] to
// exp(x[r*c+j] - m[r]) in T, and s[r] to the row's sum of e in float64.
// float32 rows go to expRows32; float64 rows are exponentiated by math.Exp
// and summed in order.
func expRows[T kernel.Float](e []T, m, s []float64, x []T, c int) {
	if e32, ok := any(e).([]float32); ok {
		expRows32(e32, m, s, any(x).([]float32), c)
		return
	}
	for r := range m {
		row, er := x[r*c:(r+1)*c], e[r*c:(r+1)*c]
		m[r], _ = shift(row)
		expRow(er, row, m[r])
		var sum float64
		for _, v := range er {
			sum += float64(v)
		}
		s[r] = sum
	}
}

// expRows32 is expRows on float32 rows: the shifted rows by
// kernel.RowMaxShift32 and their exponentials by kernel.Exp32 (within 2
// units in the last place), all in one call each, and the sums by
// kernel.RowSums32. A row whose maximum is infinite gets shift 0 and is
// exponentiated again by math.Exp, as shift says.
func expRows32(e []float32, m, s []float64, x []float32, c int) {
	var mx [entropyRows]float32
	n := len(m) * c
	kernel.RowMaxShift32(e, x, mx[:len(m)], c)
	kernel.Exp32(e[:n], e[:n])
	for r, v := range mx[:len(m)] {
		m[r] = float64(v)
		if math.IsInf(m[r], 0) { // all -Inf or NaN, or a +Inf in the row
			m[r] = 0
			expRow(e[r*c:(r+1)*c], x[r*c:(r+1)*c], 0)
		}
	}
	kernel.RowSums32(s, e, c)
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
	f := operand.Pick(a.targets.Dtype, entropyGrad[T, int], entropyGrad[T, int32], entropyGrad[T, int64])
	kernel.ParallelFor(a.rows, p, func(lo, hi int) { f(dst, x, a.targets, a.classes, scale, add, lo, hi) })
}

// entropyGrad is, for the rows r in [lo, hi) and p = softmax(x[r*c:(r+1)*c]),
//
//	dst[r*c+j] = scale * (p[j] - (j == t[r] ? 1 : 0))
//
// or dst[r*c+j] += the same with add. Every element is computed on its own,
// so the result does not depend on how the rows are split.
func entropyGrad[T kernel.Float, I kernel.Index](dst, x []T, targets operand.Indices, c int, scale float64, add bool, lo, hi int) {
	t := operand.Slice[I](targets)
	// exp(x - max) of a block of rows, the rows' shifts and sums
	sc := getBlockScratch[T](c)
	defer putBlockScratch(sc)
	e, m, s := sc.e, sc.m, sc.s
	for r0 := lo; r0 < hi; r0 += entropyRows {
		r1 := min(r0+entropyRows, hi)
		expRows(e, m[:r1-r0], s, x[r0*c:r1*c], c)
		for r := r0; r < r1; r++ {
			er, out := e[(r-r0)*c:(r-r0+1)*c], dst[r*c:(r+1)*c]
			out = out[:len(er)]
			k := scale / s[r-r0]
			target := kernel.Wrap(t[r], c)
			before := out[target]
			if add {
				for j, v := range er {
					out[j] += T(k * float64(v))
				}
			} else {
				for j, v := range er {
					out[j] = T(k * float64(v))
				}
			}
			g := T(k*float64(er[target]) - scale)
			if add {
				g += before
			}
			out[target] = g
		}
	}
}

// weight returns the weight of class j: 1 without WithClassWeights.
func (o *crossEntropyOp) weight(j int) float64 {
	if o.weights == nil {
		return 1
	}
	return o.weights[j]
}

// counted reports whether a row with target y counts (is not ignored).
func (o *crossEntropyOp) counted(y int64) bool { return !o.hasIgnore || y != o.ignore }

// denominator returns what ReduceMean divides by: the sum of the weights
// of the counted targets, added in the order lossRows adds them.
func (o *crossEntropyOp) denominator(a entropyArgs) float64 {
	return operand.Pick(a.targets.Dtype, denominatorOf[int], denominatorOf[int32], denominatorOf[int64])(o, a.targets, a.rows)
}

func denominatorOf[I kernel.Index](o *crossEntropyOp, targets operand.Indices, rows int) float64 {
	t := operand.Slice[I](targets)
	var total float64
	for r0 := 0; r0 < rows; r0 += entropyRows {
		var d float64
		for _, v := range t[r0:min(r0+entropyRows, rows)] {
			if y := int64(v); o.counted(y) {
				d += o.weight(int(y))
			}
		}
		total += d
	}
	return total
}

// firstBadTarget returns the first of the first rows targets that is
// neither ignore nor in [0, classes), or -1.
func firstBadTarget[I kernel.Index](targets operand.Indices, rows, classes int, ignore int64) int {
	for p, v := range operand.Slice[I](targets)[:rows] {
		if y := int64(v); y != ignore && (y < 0 || y >= int64(classes)) {
			return p
		}
	}
	return -1
}

// lossRows returns the sum of the rows' losses and the denominator of
// their mean (see denominator), and with per not nil sets per[r] to the
// loss of row r: the loss of CrossEntropy or NLLLoss with options.
func (o *crossEntropyOp) lossRows(a entropyArgs, per []float64) (sum, denom float64) {
	switch a.logits.Dtype() {
	case tensor.Float32:
		return lossRowsOf(o, a.logits.Float32s(), a, per)
	default:
		return lossRowsOf(o, a.logits.Float64s(), a, per)
	}
}

func lossRowsOf[T kernel.Float](o *crossEntropyOp, x []T, a entropyArgs, per []float64) (float64, float64) {
	return operand.Pick(a.targets.Dtype, lossRowsTyped[T, int], lossRowsTyped[T, int32], lossRowsTyped[T, int64])(o, x, a.targets, a.classes, per)
}

// lossRowsTyped is lossRows. For row r with target y, not ignored, w the
// class weights, ε the smoothing and lse the row's log-sum-exp:
//
//	NLLLoss:      l = -w[y]·x[y]
//	CrossEntropy: l = (1-ε)·w[y]·(lse - x[y]) + (ε/c)·Σ_j w[j]·(lse - x[j])
//
// Blocks of entropyRows rows are summed on their own and then in order,
// so the result is the same for any GOMAXPROCS.
func lossRowsTyped[T kernel.Float, I kernel.Index](o *crossEntropyOp, x []T, targets operand.Indices, c int, per []float64) (float64, float64) {
	t := operand.Slice[I](targets)
	nb := (len(t) + entropyRows - 1) / entropyRows
	sums, dens := make([]float64, nb), make([]float64, nb)
	ce := o.op == opCrossEntropy
	eps := o.smoothing
	kernel.ParallelFor(nb, kernel.Workers(len(x), nb), func(lo, hi int) {
		var e []T
		var m, s []float64
		if ce {
			sc := getBlockScratch[T](c)
			defer putBlockScratch(sc)
			e, m, s = sc.e, sc.m, sc.s
		}
		for b := lo; b < hi; b++ {
			r0, r1 := b*entropyRows, min((b+1)*entropyRows, len(t))
			if ce {
				expRows(e, m[:r1-r0], s, x[r0*c:r1*c], c)
			}
			var ls, ds float64
			for r := r0; r < r1; r++ {
				y := int64(t[r])
				if !o.counted(y) {
					if per != nil {
						per[r] = 0
					}
					continue
				}
				row := x[r*c : (r+1)*c]
				wy := o.weight(int(y))
				var l float64
				if ce {
					lse := m[r-r0] + math.Log(s[r-r0])
					l = wy * (lse - float64(row[y]))
					if eps != 0 {
						var sm float64
						for j, v := range row {
							sm += o.weight(j) * (lse - float64(v))
						}
						l = (1-eps)*l + eps/float64(c)*sm
					}
				} else {
					l = -wy * float64(row[y])
				}
				ls += l
				ds += wy
				if per != nil {
					per[r] = l
				}
			}
			sums[b], dens[b] = ls, ds
		}
	})
	var sum, denom float64
	for b := range sums {
		sum += sums[b]
		denom += dens[b]
	}
	return sum, denom
}

// gradRows writes (or adds) the gradient of the loss with options into
// dst: each row's gradient times scale, or times ups[r] when ups is not nil.
func (o *crossEntropyOp) gradRows(dst *tensor.Dense, a entropyArgs, scale float64, ups []float64, add bool) {
	switch a.logits.Dtype() {
	case tensor.Float32:
		gradRowsOf(o, dst.Float32s(), a.logits.Float32s(), a, scale, ups, add)
	default:
		gradRowsOf(o, dst.Float64s(), a.logits.Float64s(), a, scale, ups, add)
	}
}

func gradRowsOf[T kernel.Float](o *crossEntropyOp, dst, x []T, a entropyArgs, scale float64, ups []float64, add bool) {
	p := kernel.Workers(len(x), a.rows)
	f := operand.Pick(a.targets.Dtype, gradRowsTyped[T, int], gradRowsTyped[T, int32], gradRowsTyped[T, int64])
	kernel.ParallelFor(a.rows, p, func(lo, hi int) { f(o, dst, x, a.targets, a.classes, scale, ups, add, lo, hi) })
}

// gradRowsTyped is gradRows for the rows [lo, hi). For row r with target y,
// not ignored, scaled by k, with p = softmax(x[r]) and W = Σ_j w[j]:
//
//	NLLLoss:      g[j] = -k·w[y] if j == y, else 0
//	CrossEntropy: g[j] = k·((1-ε)·w[y]·(p[j] - [j == y]) + (ε/c)·(p[j]·W - w[j]))
//
// An ignored row's gradient is zero.
func gradRowsTyped[T kernel.Float, I kernel.Index](o *crossEntropyOp, dst, x []T, targets operand.Indices, c int, scale float64, ups []float64, add bool, lo, hi int) {
	t := operand.Slice[I](targets)
	ce := o.op == opCrossEntropy
	eps := o.smoothing
	wsum := float64(c)
	if o.weights != nil {
		wsum = 0
		for _, w := range o.weights {
			wsum += w
		}
	}
	var e []T
	var m, s []float64
	if ce {
		sc := getBlockScratch[T](c)
		defer putBlockScratch(sc)
		e, m, s = sc.e, sc.m, sc.s
	}
	for r0 := lo; r0 < hi; r0 += entropyRows {
		r1 := min(r0+entropyRows, hi)
		if ce {
			expRows(e, m[:r1-r0], s, x[r0*c:r1*c], c)
		}
		for r := r0; r < r1; r++ {
			out := dst[r*c : (r+1)*c]
			y := int64(t[r])
			if !o.counted(y) {
				if !add {
					clear(out)
				}
				continue
			}
			k := scale
			if ups != nil {
				k = ups[r]
			}
			wy := o.weight(int(y))
			if !ce {
				if !add {
					clear(out)
				}
				out[y] += T(-k * wy)
				continue
			}
			er := e[(r-r0)*c : (r-r0+1)*c]
			out = out[:len(er)]
			inv := 1 / s[r-r0]
			a := (1 - eps) * wy
			if eps != 0 {
				for j := range out {
					pj := float64(er[j]) * inv
					g := a * pj
					if int64(j) == y {
						g -= a
					}
					g += eps / float64(c) * (pj*wsum - o.weight(j))
					if add {
						out[j] += T(k * g)
					} else {
						out[j] = T(k * g)
					}
				}
				continue
			}
			// Without smoothing: every element as if it were not the
			// target, without a branch per element, then the target's.
			before := out[y]
			if add {
				for j, v := range er {
					out[j] += T(k * (a * (float64(v) * inv)))
				}
			} else {
				for j, v := range er {
					out[j] = T(k * (a * (float64(v) * inv)))
				}
			}
			g := T(k * (a*(float64(er[y])*inv) - a))
			if add {
				g += before
			}
			out[y] = g
		}
	}
}
