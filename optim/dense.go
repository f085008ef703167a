package optim

import (
	"fmt"
	"math"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
)

// A Dense optimiser updates dense learnables (weights, biases) from their
// gradients: SGD, Adam and Adagrad. Each is a gorgonia.Solver, so it
// takes the place of Gorgonia's solvers:
//
//	opt := optim.NewAdam(1e-3)
//	opt.Step(gorgonia.NodesToValueGrads(learnables))
//
// and unlike Gorgonia's, its state can be saved and restored
// (DenseState), for an exact resume. As Gorgonia's solvers do, Step sets
// each gradient to zero once it is used, since a TapeMachine with
// BindDualValues adds each run's gradients into them (PyTorch's
// zero_grad). It keeps its state by node name, so the learnables must be
// named nodes, each stepped under one name. Step checks every learnable
// before it changes any: on error nothing has changed.
type Dense interface {
	gorgonia.Solver
	slots() *slots
}

// slots is a dense optimiser's state: its step count and, for each
// learnable by name, one tensor per kind of state (PyTorch's names:
// momentum_buffer, exp_avg, exp_avg_sq, sum), each of the learnable's
// shape and dtype.
type slots struct {
	kinds []string
	step  int
	by    map[string][]*tensor.Dense
	out   []learnable     // check's result, reused by the next check
	seen  map[string]bool // check's names, reused
}

// A learnable is a checked value and gradient of one Step.
type learnable struct {
	name string
	w, g *tensor.Dense
}

// check reads vgs for the optimiser named op: named float tensors with
// gradients of their shape and dtype, and state, if they have any, that
// fits them. With finite, a gradient holding a NaN or an infinity is
// ErrNotFinite.
func (s *slots) check(op string, vgs []gorgonia.ValueGrad, finite bool) ([]learnable, error) {
	out := s.out[:0]
	if s.seen == nil {
		s.seen = make(map[string]bool, len(vgs))
	}
	seen := s.seen
	clear(seen)
	defer func() { s.out = out[:0] }()
	for i, vg := range vgs {
		n, ok := vg.(interface{ Name() string })
		if !ok || n.Name() == "" {
			return nil, fmt.Errorf("%s: learnable %d has no name; step named nodes (gorgonia.NodesToValueGrads): %w", op, i, errs.ErrOption)
		}
		name := n.Name()
		if seen[name] {
			return nil, fmt.Errorf("%s: two learnables are named %q: %w", op, name, errs.ErrOption)
		}
		seen[name] = true
		w, ok := vg.Value().(*tensor.Dense)
		if !ok || w.Dtype() != tensor.Float32 && w.Dtype() != tensor.Float64 || !operand.Writable(w) {
			return nil, fmt.Errorf("%s: %q must hold a row-major float32 or float64 tensor, got %v: %w", op, name, vg.Value(), errs.ErrDtype)
		}
		gv, err := vg.Grad()
		if err != nil {
			return nil, fmt.Errorf("%s: %q has no gradient (bind it with gorgonia.BindDualValues): %v: %w", op, name, err, errs.ErrGraph)
		}
		g, ok := gv.(*tensor.Dense)
		if !ok || g.Dtype() != w.Dtype() || !operand.SameShape(g.Shape(), w.Shape()) {
			return nil, fmt.Errorf("%s: %q is %v of shape %v, its gradient %v: %w", op, name, w.Dtype(), w.Shape(), gv, errs.ErrShape)
		}
		if st, ok := s.by[name]; ok && (st[0].Dtype() != w.Dtype() || !operand.SameShape(st[0].Shape(), w.Shape())) {
			return nil, fmt.Errorf("%s: %q is %v of shape %v, its state %v of shape %v: %w", op, name, w.Dtype(), w.Shape(), st[0].Dtype(), st[0].Shape(), errs.ErrShape)
		}
		if finite {
			if p := operand.PickFloat(w.Dtype(), firstNonFinite[float32], firstNonFinite[float64])(g); p >= 0 {
				return nil, fmt.Errorf("%s: the gradient of %q holds %v at position %d; nothing was updated: %w", op, name, g.Get(p), p, ErrNotFinite)
			}
		}
		out = append(out, learnable{name: name, w: w, g: g})
	}
	return out, nil
}

// of returns the state of the learnable l, zeros if it has none yet.
func (s *slots) of(l learnable) []*tensor.Dense {
	if s.by == nil {
		s.by = map[string][]*tensor.Dense{}
	}
	st, ok := s.by[l.name]
	if !ok {
		st = make([]*tensor.Dense, len(s.kinds))
		for k := range st {
			st[k] = tensor.New(tensor.Of(l.w.Dtype()), tensor.WithShape(l.w.Shape().Clone()...))
		}
		s.by[l.name] = st
	}
	return st
}

// SGD is PyTorch's torch.optim.SGD for dense learnables: with momentum μ,
// dampening τ, weight decay λ and learning rate γ, each step is
//
//	d = g + λ·w
//	b = d on the first step, else μ·b + (1-τ)·d   (when μ ≠ 0)
//	d = d + μ·b with Nesterov, else b             (when μ ≠ 0)
//	w = w - γ·d
//
// Without momentum or weight decay it is Gorgonia's VanillaSolver. Its
// state is the momentum buffer of each learnable, under
// "<name>.<learnable>.momentum_buffer" in DenseState, and the step count.
// A rate, momentum or decay that is negative or not finite, a dampening
// outside [0, 1], and Nesterov without momentum or with dampening (as
// PyTorch refuses them) are ErrOption errors.
type SGD struct {
	LearnRate, Momentum, Dampening, WeightDecay float64
	Nesterov                                    bool
	// CheckFinite makes Step refuse a gradient that holds a NaN or an
	// infinity: an error wrapping ErrNotFinite naming the learnable, with
	// nothing updated.
	CheckFinite bool

	s slots
}

func (o *SGD) slots() *slots {
	if o.s.kinds == nil {
		o.s.kinds = []string{"momentum_buffer"}
	}
	return &o.s
}

// Step updates the learnables in place.
func (o *SGD) Step(vgs []gorgonia.ValueGrad) error {
	const op = "sgd"
	if err := driver.CheckRates(op, o.LearnRate, o.WeightDecay); err != nil {
		return err
	}
	switch {
	case !(o.Momentum >= 0) || math.IsInf(o.Momentum, 1):
		return fmt.Errorf("%s: momentum %v must be finite and at least 0: %w", op, o.Momentum, errs.ErrOption)
	case !(o.Dampening >= 0 && o.Dampening <= 1):
		return fmt.Errorf("%s: dampening %v must lie in [0, 1]: %w", op, o.Dampening, errs.ErrOption)
	case o.Nesterov && (o.Momentum == 0 || o.Dampening != 0):
		return fmt.Errorf("%s: Nesterov momentum needs a momentum above 0 and no dampening: %w", op, errs.ErrOption)
	}
	s := o.slots()
	ls, err := s.check(op, vgs, o.CheckFinite)
	if err != nil {
		return err
	}
	first := s.step == 0
	s.step++
	for _, l := range ls {
		buf := s.of(l)[0]
		operand.PickFloat(l.w.Dtype(), sgdMomentum[float32], sgdMomentum[float64])(l.w, l.g, buf, o, first) // and clears g
	}
	return nil
}

func sgdMomentum[T kernel.Float](w, g, buf *tensor.Dense, o *SGD, first bool) {
	f := operand.Floats[T]
	kernel.SGDMomentum(f(w), f(g), f(buf), T(o.LearnRate), T(o.Momentum), T(o.Dampening), T(o.WeightDecay), o.Nesterov, first)
}

// Adam is PyTorch's torch.optim.Adam for dense learnables, and with
// Decoupled its AdamW: at step t (from 1), with learning rate γ, betas
// β1, β2, weight decay λ,
//
//	d = g + λ·w             (Adam; AdamW instead scales w by 1 - γ·λ first)
//	m = β1·m + (1-β1)·d
//	v = β2·v + (1-β2)·d²
//	w = w - γ/(1-β1^t) · m / (√v/√(1-β2^t) + ε)
//
// Every moment moves on every step, unlike SparseAdam's. NewAdam and
// NewAdamW set PyTorch's defaults. Its state is m and v of each learnable,
// under "<name>.<learnable>.exp_avg" and ".exp_avg_sq" in DenseState, and
// the step count. A rate or decay that is negative or not finite, a beta
// outside [0, 1) and a negative Eps are ErrOption errors.
type Adam struct {
	LearnRate, Beta1, Beta2, Eps, WeightDecay float64
	Decoupled                                 bool // AdamW
	// CheckFinite makes Step refuse a gradient that holds a NaN or an
	// infinity: an error wrapping ErrNotFinite naming the learnable, with
	// nothing updated.
	CheckFinite bool

	s slots
}

// NewAdam returns PyTorch's Adam with learning rate lr: betas 0.9 and
// 0.999, eps 1e-8, no weight decay.
func NewAdam(lr float64) *Adam { return &Adam{LearnRate: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8} }

// NewAdamW returns PyTorch's AdamW with learning rate lr: Adam's defaults
// and a decoupled weight decay of 0.01.
func NewAdamW(lr float64) *Adam {
	o := NewAdam(lr)
	o.WeightDecay, o.Decoupled = 0.01, true
	return o
}

func (o *Adam) slots() *slots {
	if o.s.kinds == nil {
		o.s.kinds = []string{"exp_avg", "exp_avg_sq"}
	}
	return &o.s
}

// Step updates the learnables in place.
func (o *Adam) Step(vgs []gorgonia.ValueGrad) error {
	const op = "adam"
	if err := driver.CheckRates(op, o.LearnRate, o.WeightDecay); err != nil {
		return err
	}
	if err := checkBetas(op, o.Beta1, o.Beta2); err != nil {
		return err
	}
	if !(o.Eps >= 0) || math.IsInf(o.Eps, 1) {
		return fmt.Errorf("%s: Eps %v must be finite and at least 0: %w", op, o.Eps, errs.ErrOption)
	}
	s := o.slots()
	ls, err := s.check(op, vgs, o.CheckFinite)
	if err != nil {
		return err
	}
	s.step++
	for _, l := range ls {
		st := s.of(l)
		operand.PickFloat(l.w.Dtype(), adamDense[float32], adamDense[float64])(l.w, l.g, st[0], st[1], o, s.step)
		l.g.Zero()
	}
	return nil
}

func adamDense[T kernel.Float](w, g, m, v *tensor.Dense, o *Adam, step int) {
	f := operand.Floats[T]
	kernel.AdamDense(f(w), f(g), f(m), f(v), o.LearnRate, o.Beta1, o.Beta2, o.Eps, o.WeightDecay, step, o.Decoupled)
}

// Adagrad is PyTorch's torch.optim.Adagrad for dense learnables: at step
// t (from 1), with learning rate γ, rate decay η and weight decay λ,
//
//	d = g + λ·w
//	s = s + d²
//	w = w - γ/(1 + (t-1)·η) · d / (√s + ε)
//
// NewAdagrad sets PyTorch's defaults. Its state is s of each learnable,
// under "<name>.<learnable>.sum" in DenseState, and the step count. A
// rate, rate decay or weight decay that is negative or not finite and a
// negative Eps are ErrOption errors.
type Adagrad struct {
	LearnRate, LRDecay, WeightDecay, Eps float64
	// CheckFinite makes Step refuse a gradient that holds a NaN or an
	// infinity: an error wrapping ErrNotFinite naming the learnable, with
	// nothing updated.
	CheckFinite bool

	s slots
}

// NewAdagrad returns PyTorch's Adagrad with learning rate lr: no decay,
// eps 1e-10.
func NewAdagrad(lr float64) *Adagrad { return &Adagrad{LearnRate: lr, Eps: 1e-10} }

func (o *Adagrad) slots() *slots {
	if o.s.kinds == nil {
		o.s.kinds = []string{"sum"}
	}
	return &o.s
}

// Step updates the learnables in place.
func (o *Adagrad) Step(vgs []gorgonia.ValueGrad) error {
	const op = "adagrad"
	if err := driver.CheckRates(op, o.LearnRate, o.WeightDecay); err != nil {
		return err
	}
	if err := driver.CheckRates(op, o.LRDecay, o.Eps); err != nil {
		return fmt.Errorf("%s: the rate decay and Eps: %w", op, err)
	}
	s := o.slots()
	ls, err := s.check(op, vgs, o.CheckFinite)
	if err != nil {
		return err
	}
	s.step++
	clr := o.LearnRate / (1 + float64(s.step-1)*o.LRDecay)
	for _, l := range ls {
		sum := s.of(l)[0]
		operand.PickFloat(l.w.Dtype(), adagradDense[float32], adagradDense[float64])(l.w, l.g, sum, clr, o)
		l.g.Zero()
	}
	return nil
}

func adagradDense[T kernel.Float](w, g, sum *tensor.Dense, clr float64, o *Adagrad) {
	f := operand.Floats[T]
	kernel.AdagradDense(f(w), f(g), f(sum), clr, o.Eps, o.WeightDecay)
}

// checkBetas reports an error unless b1 and b2 lie in [0, 1).
func checkBetas(op string, b1, b2 float64) error {
	if !(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1) {
		return fmt.Errorf("%s: betas %v and %v must lie in [0, 1): %w", op, b1, b2, errs.ErrOption)
	}
	return nil
}

var (
	_ Dense = (*SGD)(nil)
	_ Dense = (*Adam)(nil)
	_ Dense = (*Adagrad)(nil)
)

// StartRows sets the state opt keeps for the given rows of the learnable
// named name, a matrix whose rows are table rows (an embedding's weight),
// to where a new learnable's starts: zeros. nn.RawIDs calls it for the
// rows an id map gives new ids, so that a row taken from one id starts
// afresh for the next, as a sparse optimiser's rows do. A learnable not
// stepped yet has no state, and nothing changes. State that is not a
// matrix, or a row outside it, is an error naming it, and then nothing
// changed. With SGD's dampening τ, a started row's next buffer is
// (1-τ)·d where a new learnable's first is d.
func StartRows(opt Dense, name string, rows []int64) error {
	if opt == nil {
		return fmt.Errorf("optim: StartRows of %q needs an optimiser: %w", name, errs.ErrOption)
	}
	st := opt.slots().by[name]
	for _, t := range st {
		if t.Dims() != 2 {
			return fmt.Errorf("optim: the state of %q is of shape %v; its rows are those of a matrix: %w", name, t.Shape(), errs.ErrShape)
		}
		n := t.Shape()[0]
		for _, r := range rows {
			if r < 0 || r >= int64(n) {
				return fmt.Errorf("optim: row %d of %q is outside its %d rows: %w", r, name, n, errs.ErrIndexOutOfRange)
			}
		}
	}
	for _, t := range st {
		operand.PickFloat(t.Dtype(), zeroRows[float32], zeroRows[float64])(t, rows)
	}
	return nil
}

// zeroRows sets the rows of the matrix t to zeros.
func zeroRows[T kernel.Float](t *tensor.Dense, rows []int64) {
	v, dim := operand.Floats[T](t), t.Shape()[1]
	for _, r := range rows {
		clear(v[int(r)*dim : int(r+1)*dim])
	}
}

// DenseState returns the checkpoint.Part of opt's state for the
// learnables nodes, under name: its step count as "<name>.step" (an int64
// scalar) and each node's state as "<name>.<node>.<kind>", with PyTorch's
// kinds (SGD: momentum_buffer; Adam: exp_avg, exp_avg_sq; Adagrad: sum).
// Before a node's first step its state is zeros, which is also what a
// fresh optimiser starts from, so a checkpoint taken at any point
// restores it exactly:
//
//	parts := []checkpoint.Part{checkpoint.Nodes(w, b), optim.DenseState("mlp", adam, w, b)}
//	checkpoint.Save(path, meta, parts...)
//	checkpoint.Load(path, parts...) // in a new process: adam steps on as if never stopped
func DenseState(name string, opt Dense, nodes ...*gorgonia.Node) checkpoint.Part {
	return denseState{name: name, opt: opt, nodes: nodes}
}

type denseState struct {
	name  string
	opt   Dense
	nodes []*gorgonia.Node
}

func (d denseState) check() (*slots, error) {
	if d.opt == nil || d.name == "" {
		return nil, fmt.Errorf("dense optimiser state: needs a name and an optimiser: %w", errs.ErrOption)
	}
	return d.opt.slots(), nil
}

func (d denseState) State() (map[string]tensor.Tensor, error) {
	s, err := d.check()
	if err != nil {
		return nil, err
	}
	out := map[string]tensor.Tensor{d.name + ".step": tensor.New(tensor.FromScalar(int64(s.step)))}
	for i, n := range d.nodes {
		if n == nil {
			return nil, fmt.Errorf("dense optimiser state %q: node %d is nil: %w", d.name, i, errs.ErrShape)
		}
		w, ok := n.Value().(*tensor.Dense)
		if !ok {
			return nil, fmt.Errorf("dense optimiser state %q: node %q holds no tensor: %w", d.name, n.Name(), errs.ErrShape)
		}
		st := s.of(learnable{name: n.Name(), w: w})
		for k, kind := range s.kinds {
			out[d.name+"."+n.Name()+"."+kind] = st[k]
		}
	}
	return out, nil
}

func (d denseState) SetState(tensors map[string]*tensor.Dense) error {
	s, err := d.check()
	if err != nil {
		return err
	}
	step, ok := tensors[d.name+".step"]
	if !ok {
		return fmt.Errorf("dense optimiser state %q: no step count: %w", d.name, checkpoint.ErrMismatch)
	}
	n, ok := step.Data().(int64)
	if !ok || n < 0 {
		return fmt.Errorf("dense optimiser state %q: step %v is not a count: %w", d.name, step.Data(), checkpoint.ErrFormat)
	}
	by := make(map[string][]*tensor.Dense, len(d.nodes))
	for _, node := range d.nodes {
		st := make([]*tensor.Dense, len(s.kinds))
		for k, kind := range s.kinds {
			t, ok := tensors[d.name+"."+node.Name()+"."+kind]
			if !ok {
				return fmt.Errorf("dense optimiser state %q: no %s for %q: %w", d.name, kind, node.Name(), checkpoint.ErrMismatch)
			}
			st[k] = t.Clone().(*tensor.Dense)
		}
		by[node.Name()] = st
	}
	s.step, s.by = int(n), by
	return nil
}

// A Schedule returns the learning rate for epoch e (from 0; or step, as
// the caller counts) from the base rate, in the closed form of PyTorch's
// lr_scheduler classes. It is a pure function of the epoch, so a resumed
// run needs only the epoch (e.g. in the checkpoint's metadata). Set any
// optimiser's rate with it, sparse or dense, before each epoch:
//
//	opt.LearnRate = sched(base, epoch)
//
// The schedules here return NaN for a negative epoch, which every
// optimiser's step refuses (ErrOption), never a rate of another epoch.
type Schedule func(base float64, epoch int) float64

// StepLR returns PyTorch's StepLR: base·gamma^⌊e/stepSize⌋. A stepSize
// below 1 or a gamma that is negative or not finite is ErrOption.
func StepLR(stepSize int, gamma float64) (Schedule, error) {
	if stepSize < 1 || !(gamma >= 0) || math.IsInf(gamma, 1) {
		return nil, fmt.Errorf("step schedule: step size %d must be at least 1 and gamma %v finite and at least 0: %w", stepSize, gamma, errs.ErrOption)
	}
	return func(base float64, e int) float64 {
		if e < 0 {
			return math.NaN()
		}
		return base * math.Pow(gamma, float64(e/stepSize))
	}, nil
}

// CosineLR returns PyTorch's CosineAnnealingLR over tMax epochs:
// least + (base-least)·(1 + cos(π·e/tMax))/2, which is base at e = 0 and
// least at e = tMax. A tMax below 1 or a least that is negative or not
// finite is ErrOption.
func CosineLR(tMax int, least float64) (Schedule, error) {
	if tMax < 1 || !(least >= 0) || math.IsInf(least, 1) {
		return nil, fmt.Errorf("cosine schedule: tMax %d must be at least 1 and the least rate %v finite and at least 0: %w", tMax, least, errs.ErrOption)
	}
	return func(base float64, e int) float64 {
		if e < 0 {
			return math.NaN()
		}
		return least + (base-least)*(1+math.Cos(math.Pi*float64(e)/float64(tMax)))/2
	}, nil
}

// WarmupLR returns PyTorch's LinearLR from startFactor to 1 over steps
// epochs: base·(startFactor + (1-startFactor)·min(e, steps)/steps). A
// steps below 1 or a startFactor outside (0, 1] is ErrOption.
func WarmupLR(steps int, startFactor float64) (Schedule, error) {
	if steps < 1 || !(startFactor > 0 && startFactor <= 1) {
		return nil, fmt.Errorf("warm-up schedule: steps %d must be at least 1 and the start factor %v in (0, 1]: %w", steps, startFactor, errs.ErrOption)
	}
	return func(base float64, e int) float64 {
		if e < 0 {
			return math.NaN()
		}
		return base * (startFactor + (1-startFactor)*float64(min(e, steps))/float64(steps))
	}, nil
}

// Then returns first for the epochs before n and next for the rest, its
// epochs counted from n (PyTorch's SequentialLR), e.g. a warm-up, then a
// cosine decay. A nil schedule or an n below 0 is ErrOption.
func Then(first Schedule, n int, next Schedule) (Schedule, error) {
	if first == nil || next == nil || n < 0 {
		return nil, fmt.Errorf("sequential schedule: needs two schedules (%t, %t) and a switch at epoch %d of at least 0: %w",
			first != nil, next != nil, n, errs.ErrOption)
	}
	return func(base float64, e int) float64 {
		if e < 0 {
			return math.NaN()
		}
		if e < n {
			return first(base, e)
		}
		return next(base, e-n)
	}, nil
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
		return 0, fmt.Errorf("%s: max norm %v must be finite and at least 0: %w", op, maxNorm, errs.ErrOption)
	}
	grads := make([]*tensor.Dense, 0, len(dense)+len(rows))
	for i, vg := range dense {
		gv, err := vg.Grad()
		if err != nil {
			return 0, fmt.Errorf("%s: learnable %d has no gradient: %v: %w", op, i, err, errs.ErrGraph)
		}
		g, ok := gv.(*tensor.Dense)
		if !ok || g.Dtype() != tensor.Float32 && g.Dtype() != tensor.Float64 || !operand.Writable(g) {
			return 0, fmt.Errorf("%s: the gradient of learnable %d is %v, not a row-major float tensor: %w", op, i, gv, errs.ErrDtype)
		}
		grads = append(grads, g)
	}
	for i, r := range rows {
		if r == nil || r.Values == nil || r.Values.Dtype() != tensor.Float32 && r.Values.Dtype() != tensor.Float64 || !operand.Writable(r.Values) {
			return 0, fmt.Errorf("%s: row gradient %d holds no row-major float values: %w", op, i, errs.ErrDtype)
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

// firstNonFinite returns the position of the first NaN or infinity of
// t, a tensor of Go type T, or -1.
func firstNonFinite[T kernel.Float](t *tensor.Dense) int {
	return kernel.FirstNonFinite(operand.Floats[T](t))
}
