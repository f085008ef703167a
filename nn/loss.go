package nn

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
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
func NLLLoss(logProbs, targets *gorgonia.Node, opts ...NLLLossOption) (*gorgonia.Node, error) {
	c, err := newConfig(opNLL, forNLLLoss, opts)
	if err != nil {
		return nil, err
	}
	return classLoss(opNLL, c, logProbs, targets)
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
func CrossEntropy(logits, targets *gorgonia.Node, opts ...CrossEntropyOption) (*gorgonia.Node, error) {
	c, err := newConfig(opCrossEntropy, forCrossEntropy, opts)
	if err != nil {
		return nil, err
	}
	return classLoss(opCrossEntropy, c, logits, targets)
}

// classLoss builds CrossEntropy (op opCrossEntropy) or NLLLoss (opNLL).
func classLoss(op string, c config, scores, targets *gorgonia.Node) (*gorgonia.Node, error) {
	what := "logits"
	if op == opNLL {
		what = "log-probabilities"
	}
	if scores == nil || targets == nil {
		return nil, fmt.Errorf("%s: %s and targets must be nodes: %w", op, what, gather.ErrShape)
	}
	dt := scores.Dtype()
	if err := operand.CheckFloat(op, what, dt); err != nil {
		return nil, err
	}
	if err := operand.CheckIndexDtype(op, "targets", targets.Dtype()); err != nil {
		return nil, err
	}
	ls := scores.Shape().Clone()
	if err := checkTargets(op, what, ls, targets.Shape()); err != nil {
		return nil, err
	}
	if _, err := operand.Size(op, what, ls); err != nil {
		return nil, err
	}
	classes := ls[len(ls)-1]
	if classes == 0 && targets.Shape().TotalSize() > 0 && !c.loss.hasIgnore {
		return nil, fmt.Errorf("%s: %s of shape %v have no classes, so no target is valid: %w", op, what, ls, gather.ErrIndexOutOfRange)
	}
	cl := kernel.ClassLoss{Entropy: op == opCrossEntropy, HasIgnore: c.loss.hasIgnore, Ignore: c.loss.ignore, Smoothing: c.loss.smoothing}
	if c.loss.hasWeights {
		var err error
		if cl.Weights, err = classVector(op, "class weights", c.loss.weights, dt, classes); err != nil {
			return nil, err
		}
	}
	o := newCrossEntropyOp(op, dt, targets.Dtype(), ls, c.loss.reduction, cl)
	return opkit.Apply(op, o, scores, targets)
}

// checkTargets reports an error unless targets has the shape of scores
// (named what) without its last axis.
func checkTargets(op, what string, scores, targets tensor.Shape) error {
	if len(scores) < 1 || !operand.SameShape(scores[:len(scores)-1], targets) {
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
	opkit.Diff
	op         string
	dtype      tensor.Dtype // of the scores and of the loss
	targetType tensor.Dtype
	shape      tensor.Shape // of the scores

	reduction Reduction
	kernel.ClassLoss
	k entropyKernels // the loops for dtype and targetType
}

// newCrossEntropyOp returns the op of the loss op ("cross_entropy" or
// "nll_loss") of scores of dtype dt and the given shape and targets of
// dtype it, with its loops chosen.
func newCrossEntropyOp(op string, dt, it tensor.Dtype, shape tensor.Shape, r Reduction, cl kernel.ClassLoss) *crossEntropyOp {
	o := &crossEntropyOp{op: op, dtype: dt, targetType: it, shape: shape, reduction: r, ClassLoss: cl,
		k: operand.PickFloatIndex(dt, it, entropyKernels32, entropyKernels64)}
	in := []hm.Type{operand.Type(len(shape), dt), operand.Type(len(shape)-1, it)}
	out := o.outShape()
	o.Op = opkit.New(opkit.Sig{Name: o.name(), In: in, Dtype: dt, Shape: out, Diff: []bool{true, false}},
		o.reduction, o.HasIgnore, o.Ignore, o.Weights, o.Smoothing)
	grad := opkit.Sig{Name: o.name() + "Grad", In: append(in, operand.Type(len(out), dt)), Dtype: dt, Shape: shape}
	o.Grads, o.What = []*opkit.Grad{opkit.NewGrad(grad, o.runGrad, o.ID()), nil}, op
	return o
}

// The loops of the losses for float32 and float64 scores, each for Int,
// Int32 and Int64 targets, made once.
var (
	entropyKernels32 = [3]entropyKernels{entropyKernelsOf[float32, int](), entropyKernelsOf[float32, int32](), entropyKernelsOf[float32, int64]()}
	entropyKernels64 = [3]entropyKernels{entropyKernelsOf[float64, int](), entropyKernelsOf[float64, int32](), entropyKernelsOf[float64, int64]()}
)

// entropyKernels are the loops of a loss for one dtype of its scores and
// one of its targets, chosen when the op is built.
type entropyKernels struct {
	sum      func(x *tensor.Dense, t operand.Indices, c int) float64
	grad     func(dst, x *tensor.Dense, t operand.Indices, c int, scale float64, add bool)
	rows     func(o *kernel.ClassLoss, x *tensor.Dense, t operand.Indices, c int, per []float64) (float64, float64)
	rowsGrad func(o *kernel.ClassLoss, dst, x *tensor.Dense, t operand.Indices, c int, scale float64, ups []float64, add bool)
	denom    func(o *kernel.ClassLoss, t operand.Indices) float64
	firstBad func(t operand.Indices, classes int, ignore int64) int
}

// entropyKernelsOf returns the loops for scores of Go type T and targets
// of Go type I.
func entropyKernelsOf[T kernel.Float, I kernel.Index]() entropyKernels {
	f, ix := operand.Floats[T], operand.Slice[I]
	return entropyKernels{
		sum: func(x *tensor.Dense, t operand.Indices, c int) float64 { return kernel.EntropySum(f(x), ix(t), c) },
		grad: func(dst, x *tensor.Dense, t operand.Indices, c int, scale float64, add bool) {
			kernel.EntropyGrad(f(dst), f(x), ix(t), c, scale, add)
		},
		rows: func(o *kernel.ClassLoss, x *tensor.Dense, t operand.Indices, c int, per []float64) (float64, float64) {
			return kernel.ClassLossRows(o, f(x), ix(t), c, per)
		},
		rowsGrad: func(o *kernel.ClassLoss, dst, x *tensor.Dense, t operand.Indices, c int, scale float64, ups []float64, add bool) {
			kernel.ClassLossGrad(o, f(dst), f(x), ix(t), c, scale, ups, add)
		},
		denom: func(o *kernel.ClassLoss, t operand.Indices) float64 { return kernel.ClassDenominator(o, ix(t)) },
		firstBad: func(t operand.Indices, classes int, ignore int64) int {
			return kernel.FirstBadTarget(ix(t), classes, ignore)
		},
	}
}

// plain reports whether o is CrossEntropy without options, which the
// fastest kernels compute.
func (o *crossEntropyOp) plain() bool {
	return o.Entropy && o.reduction == ReduceMean && !o.HasIgnore && o.Weights == nil && o.Smoothing == 0
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
	if x.Dtype() != o.dtype || !operand.SameShape(x.Shape(), o.shape) {
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
	l := operand.Label{Op: o.op, Arg: "targets", NonNegative: true}
	if o.HasIgnore {
		if p := o.k.firstBad(t, classes, o.Ignore); p >= 0 {
			return entropyArgs{}, &gather.IndexError{Op: l.Op, Arg: l.Arg, Pos: operand.Unravel(p, t.Shape), Value: t.At(p),
				Axis: len(o.shape) - 1, Size: classes, NonNegative: true}
		}
	} else if err := operand.CheckIndices(l, t, len(o.shape)-1, classes); err != nil {
		return entropyArgs{}, err
	}
	return entropyArgs{logits: x, targets: t, rows: rows, classes: classes}, nil
}

// outShape is the shape of the loss: a scalar, or the targets' shape for
// ReduceNone.
func (o *crossEntropyOp) outShape() tensor.Shape {
	if o.reduction == ReduceNone {
		return tensor.Shape(o.shape[:len(o.shape)-1]).Clone()
	}
	return tensor.ScalarShape()
}

// Do returns the loss: one of Gorgonia's scalar values, or a tensor for
// ReduceNone.
func (o *crossEntropyOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	return o.UsePreallocDo(nil, in...)
}

// UsePreallocDo returns the loss in prealloc when it can hold it (a
// scalar of the op's dtype, or see operand.Prealloc for ReduceNone), else
// in a new value.
func (o *crossEntropyOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity(o.op, "", len(in), 2); err != nil {
		return nil, err
	}
	a, err := o.args(in[0], in[1])
	if err != nil {
		return nil, err
	}
	if o.reduction == ReduceNone {
		per := make([]float64, a.rows)
		o.k.rows(&o.ClassLoss, a.logits, a.targets, a.classes, per)
		if len(o.shape) == 1 {
			return operand.ScalarOut(prealloc, o.dtype, per[0]), nil
		}
		out := operand.Prealloc(prealloc, o.dtype, o.outShape(), in)
		floatsFor(o.dtype).fromFloat64(out, per)
		return out, nil
	}
	var loss float64
	if o.plain() {
		loss = math.NaN()
		if a.rows > 0 {
			loss = o.k.sum(a.logits, a.targets, a.classes) / float64(a.rows)
		}
	} else {
		sum, denom := o.k.rows(&o.ClassLoss, a.logits, a.targets, a.classes, nil)
		loss = sum
		if o.reduction == ReduceMean {
			loss = sum / denom // NaN when nothing is counted, as in PyTorch
		}
	}
	return operand.ScalarOut(prealloc, o.dtype, loss), nil
}

// name returns the op's name, e.g. "CrossEntropy" or
// "NLLLoss{sum, ignore=-100}".
func (o *crossEntropyOp) name() string {
	name := "CrossEntropy"
	if o.op == opNLL {
		name = "NLLLoss"
	}
	if o.plain() {
		return name
	}
	s := fmt.Sprintf("%s{%v", name, o.reduction)
	if o.HasIgnore {
		s += fmt.Sprintf(", ignore=%d", o.Ignore)
	}
	if o.Weights != nil {
		s += ", weights"
	}
	if o.Smoothing != 0 {
		s += fmt.Sprintf(", smoothing=%v", o.Smoothing)
	}
	return s + "}"
}

// runGrad writes (or, with add, adds) into dst the gradient of the logits
// in[0] for the targets in[1] and the upstream gradient in[2], after
// checking every argument, so that dst is untouched on error.
func (o *crossEntropyOp) runGrad(dst *tensor.Dense, add bool, in []gorgonia.Value) error {
	if dst.Dtype() != o.dtype || !operand.SameShape(dst.Shape(), o.shape) || !operand.Writable(dst) {
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
		if u.Dtype() != o.dtype || !operand.SameShape(u.Shape(), o.outShape()) {
			return fmt.Errorf("%s gradient: upstream gradient is %v of shape %v, want %v of shape %v: %w",
				o.op, u.Dtype(), u.Shape(), o.dtype, o.outShape(), gather.ErrShape)
		}
		ups = make([]float64, a.rows)
		floatsFor(o.dtype).toFloat64(ups, u)
	} else if up, err = operand.Scalar("upstream gradient", in[2]); err != nil {
		return fmt.Errorf("%s gradient: %w", o.op, err)
	}
	if a.rows == 0 || a.classes == 0 {
		return nil
	}
	if o.plain() {
		o.k.grad(dst, a.logits, a.targets, a.classes, up/float64(a.rows), add)
		return nil
	}
	scale := up
	if o.reduction == ReduceMean {
		scale /= o.k.denom(&o.ClassLoss, a.targets)
	}
	o.k.rowsGrad(&o.ClassLoss, dst, a.logits, a.targets, a.classes, scale, ups, add)
	return nil
}

var (
	_ gorgonia.SDOp = (*crossEntropyOp)(nil)
	_ gorgonia.ADOp = (*crossEntropyOp)(nil)
)
