package optim

import (
	"fmt"
	"math"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
)

// A Schedule returns the learning rate for epoch e (from 0; or step, as
// the caller counts) from the base rate, in the closed form of PyTorch's
// lr_scheduler classes. It is a pure function of the epoch, so a resumed
// run needs only the epoch (e.g. in the checkpoint's metadata). Set any
// optimiser's rate with it, sparse or dense, before each epoch:
//
//	opt.LearnRate = sched(base, epoch)
type Schedule func(base float64, epoch int) float64

// StepLR returns PyTorch's StepLR: base·gamma^⌊e/stepSize⌋. A stepSize
// below 1 or a gamma that is negative or not finite is ErrOption.
func StepLR(stepSize int, gamma float64) (Schedule, error) {
	if stepSize < 1 || !(gamma >= 0) || math.IsInf(gamma, 1) {
		return nil, fmt.Errorf("step schedule: step size %d must be at least 1 and gamma %v finite and at least 0: %w", stepSize, gamma, gather.ErrOption)
	}
	return func(base float64, e int) float64 { return base * math.Pow(gamma, float64(max(e, 0)/stepSize)) }, nil
}

// CosineLR returns PyTorch's CosineAnnealingLR over tMax epochs:
// least + (base-least)·(1 + cos(π·e/tMax))/2, which is base at e = 0 and
// least at e = tMax. A tMax below 1 or a least that is negative or not
// finite is ErrOption.
func CosineLR(tMax int, least float64) (Schedule, error) {
	if tMax < 1 || !(least >= 0) || math.IsInf(least, 1) {
		return nil, fmt.Errorf("cosine schedule: tMax %d must be at least 1 and the least rate %v finite and at least 0: %w", tMax, least, gather.ErrOption)
	}
	return func(base float64, e int) float64 {
		return least + (base-least)*(1+math.Cos(math.Pi*float64(e)/float64(tMax)))/2
	}, nil
}

// WarmupLR returns PyTorch's LinearLR from startFactor to 1 over steps
// epochs: base·(startFactor + (1-startFactor)·min(e, steps)/steps). A
// steps below 1 or a startFactor outside (0, 1] is ErrOption.
func WarmupLR(steps int, startFactor float64) (Schedule, error) {
	if steps < 1 || !(startFactor > 0 && startFactor <= 1) {
		return nil, fmt.Errorf("warm-up schedule: steps %d must be at least 1 and the start factor %v in (0, 1]: %w", steps, startFactor, gather.ErrOption)
	}
	return func(base float64, e int) float64 {
		return base * (startFactor + (1-startFactor)*float64(min(max(e, 0), steps))/float64(steps))
	}, nil
}

// Then returns first for the epochs before n and next for the rest, its
// epochs counted from n (PyTorch's SequentialLR), e.g. a warm-up, then a
// cosine decay.
func Then(first Schedule, n int, next Schedule) Schedule {
	return func(base float64, e int) float64 {
		if e < n {
			return first(base, e)
		}
		return next(base, e-n)
	}
}

// ClipGradNorm scales the gradients of the dense learnables dense and the
// row gradients rows together, in place, so that their global L2 norm
// (over every value of all of them) is at most maxNorm, as PyTorch's
// clip_grad_norm_ does: when the norm exceeds maxNorm each is multiplied
// by maxNorm/(norm + 1e-6). It returns the norm before clipping. A
// maxNorm that is negative or not finite is ErrOption, a gradient that is
// not a float tensor ErrDtype, and a norm that is not finite ErrNotFinite;
// on error no gradient changes.
//
// Clip before stepping: for a row-sparse table, clip the RowGrad it gives
// (Embedding.RowGrad) and step with it (Embedding.StepWith).
func ClipGradNorm(maxNorm float64, dense []gorgonia.ValueGrad, rows ...*RowGrad) (float64, error) {
	const op = "clip grad norm"
	if !(maxNorm >= 0) || math.IsInf(maxNorm, 1) {
		return 0, fmt.Errorf("%s: max norm %v must be finite and at least 0: %w", op, maxNorm, gather.ErrOption)
	}
	grads := make([]*tensor.Dense, 0, len(dense)+len(rows))
	for i, vg := range dense {
		gv, err := vg.Grad()
		if err != nil {
			return 0, fmt.Errorf("%s: learnable %d has no gradient: %v: %w", op, i, err, gather.ErrGraph)
		}
		g, ok := gv.(*tensor.Dense)
		if !ok || g.Dtype() != tensor.Float32 && g.Dtype() != tensor.Float64 || !operand.Writable(g) {
			return 0, fmt.Errorf("%s: the gradient of learnable %d is %v, not a row-major float tensor: %w", op, i, gv, gather.ErrDtype)
		}
		grads = append(grads, g)
	}
	for i, r := range rows {
		if r == nil || r.Values == nil || r.Values.Dtype() != tensor.Float32 && r.Values.Dtype() != tensor.Float64 || !operand.Writable(r.Values) {
			return 0, fmt.Errorf("%s: row gradient %d holds no row-major float values: %w", op, i, gather.ErrDtype)
		}
		grads = append(grads, r.Values)
	}
	var sum float64
	for _, g := range grads {
		sum += operand.PickFloat(g.Dtype(), sumSquares[float32], sumSquares[float64])(g)
	}
	norm := math.Sqrt(sum)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return norm, fmt.Errorf("%s: the gradients' norm is %v; nothing was scaled: %w", op, norm, ErrNotFinite)
	}
	if c := maxNorm / (norm + 1e-6); c < 1 {
		for _, g := range grads {
			operand.PickFloat(g.Dtype(), scale[float32], scale[float64])(g, c)
		}
	}
	return norm, nil
}

func sumSquares[T kernel.Float](t *tensor.Dense) float64 {
	return kernel.SumSquares(operand.Floats[T](t))
}

func scale[T kernel.Float](t *tensor.Dense, c float64) { kernel.Scale(operand.Floats[T](t), T(c)) }
