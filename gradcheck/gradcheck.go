// Package gradcheck checks the gradient of a scalar Gorgonia expression
// against central finite differences, in either of Gorgonia's machines.
package gradcheck

import (
	"errors"
	"fmt"
	"math"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/machine"
)

// ErrMismatch: an analytic gradient differs from the numeric one by more
// than the tolerance. Check's other errors wrap the sentinels of package
// gather.
var ErrMismatch = errors.New("gradient mismatch")

// An Option changes how Check compares gradients.
type Option func(*checkConfig)

type checkConfig struct {
	rtol, atol float64 // 0 means the default for the input's dtype
	step       float64 // 0 means the default for the input's dtype
	lisp       bool
}

// WithTolerance sets the relative and absolute tolerances: an analytic
// gradient a matches a numeric one n when
//
//	|a - n| <= atol + rtol*max(|a|, |n|)
//
// The defaults are rtol = 1e-5, atol = 1e-6 for float64 inputs and
// rtol = 1e-2, atol = 1e-3 for float32 inputs.
func WithTolerance(rtol, atol float64) Option {
	return func(c *checkConfig) { c.rtol, c.atol = rtol, atol }
}

// WithStep sets the finite-difference step h, scaled by max(1, |x|) for
// each element x. The default is 1e-6, or 1e-2 when the expression has to be
// evaluated in float32.
func WithStep(h float64) Option { return func(c *checkConfig) { c.step = h } }

// WithLispMachine computes the analytic gradients with a LispMachine, which
// calls each op's DoDiff, instead of gorgonia.Grad on a TapeMachine and on
// machine.Machine, which use SymDiff.
func WithLispMachine() Option { return func(c *checkConfig) { c.lisp = true } }

// Check compares the symbolic gradient of a scalar Gorgonia expression
// with central finite differences.
//
// build receives a new graph and one input node per tensor in inputs (named
// "input0", "input1", ...) and returns the scalar cost. Check takes the
// gradient of the cost with respect to every float32 or float64 input (other
// inputs, such as indices, are held fixed), then for every element x of those
// inputs evaluates the cost at x+h and x-h and forms (f(x+h)-f(x-h))/(2h) in
// float64, with h the step actually representable in the input's dtype.
// The differences are taken on a float64 copy of the expression (float32
// inputs promoted) when build accepts float64 inputs, else in the inputs'
// own dtypes; the tolerances are those of the inputs' dtypes.
//
// The analytic gradients are computed on a TapeMachine and on
// machine.Machine, which must agree bit for bit (else an error wrapping
// gather.ErrGraph names the first element where they differ).
//
// It returns nil if every element matches within tolerance, else an error
// naming the input, the position, the analytic and the numeric value of the
// worst mismatch. inputs are not modified. It runs the forward pass twice
// per input element, so it is for small tests, not for large models.
func Check(build func(g *gorgonia.ExprGraph, in []*gorgonia.Node) (*gorgonia.Node, error),
	inputs []tensor.Tensor, opts ...Option) error {
	var cfg checkConfig
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("gradcheck: a nil Option: %w", gather.ErrOption)
		}
		o(&cfg)
	}
	if build == nil {
		return fmt.Errorf("gradcheck: build is nil: %w", gather.ErrGraph)
	}
	analytic, err := analyticGrads(build, inputs, cfg.lisp, false)
	if err != nil {
		return err
	}
	if !cfg.lisp {
		// The same gradients on machine.Machine, bit for bit.
		planned, err := analyticGrads(build, inputs, false, true)
		if err != nil {
			return err
		}
		if err := sameGrads(analytic, planned); err != nil {
			return err
		}
	}

	// The numeric side runs on its own forward-only graph, over copies of
	// the inputs that it perturbs in place, promoted to float64 so that the
	// differences are taken in float64. An expression that cannot be built
	// on float64 inputs is evaluated in its own dtypes instead.
	g, nodes, vals, err := buildCopy(build, inputs, true)
	if err != nil {
		g, nodes, vals, err = buildCopy(build, inputs, false)
	}
	if err != nil {
		return err
	}
	cost := nodes[len(nodes)-1]
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	// A tensor input's node holds its copy, so perturbing the copy is
	// enough; a scalar node holds a value of its own, set again each time.
	eval := func(k int) (float64, error) {
		if vals[k].Dims() == 0 {
			if err := gorgonia.Let(nodes[k], operand.Value(vals[k])); err != nil {
				return 0, fmt.Errorf("gradcheck: setting input %d: %w", k, errs.Graph(err))
			}
		}
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			return 0, fmt.Errorf("gradcheck: running the cost: %w", errs.Graph(err))
		}
		return scalar(cost.Value())
	}

	worst := mismatch{excess: 1}
	for k, v := range vals {
		if analytic[k] == nil {
			continue
		}
		rtol, atol, _ := cfg.defaults(inputs[k].Dtype())
		_, _, step := cfg.defaults(v.Dtype())
		for p := range analytic[k] {
			x := get(v, p)
			h := step * math.Max(1, math.Abs(x))
			xp := set(v, p, x+h)
			fp, err := eval(k)
			if err != nil {
				return err
			}
			xm := set(v, p, x-h)
			fm, err := eval(k)
			if err != nil {
				return err
			}
			set(v, p, x)
			if _, err := eval(k); err != nil {
				return err
			}
			num := (fp - fm) / (xp - xm)
			a := analytic[k][p]
			tol := atol + rtol*math.Max(math.Abs(a), math.Abs(num))
			if excess := math.Abs(a-num) / tol; excess > worst.excess || math.IsNaN(excess) {
				worst = mismatch{input: k, pos: operand.Unravel(p, v.Shape()), analytic: a, numeric: num, excess: excess, tol: tol}
			}
		}
	}
	if worst.pos != nil {
		return fmt.Errorf("gradcheck: input %d at %v: analytic gradient %.6g, numeric %.6g (|difference| %.3g > tolerance %.3g): %w",
			worst.input, worst.pos, worst.analytic, worst.numeric, math.Abs(worst.analytic-worst.numeric), worst.tol, ErrMismatch)
	}
	return nil
}

type mismatch struct {
	input             int
	pos               []int
	analytic, numeric float64
	excess, tol       float64
}

func (c checkConfig) defaults(dt tensor.Dtype) (rtol, atol, step float64) {
	rtol, atol, step = 1e-5, 1e-6, 1e-6
	if dt == tensor.Float32 {
		rtol, atol, step = 1e-2, 1e-3, 1e-2
	}
	if c.rtol != 0 || c.atol != 0 {
		rtol, atol = c.rtol, c.atol
	}
	if c.step != 0 {
		step = c.step
	}
	return rtol, atol, step
}

// buildCopy builds the expression over copies of inputs. It returns the
// input nodes followed by the cost node, and the copies.
// With promote, float32 inputs become float64 copies.
func buildCopy(build func(*gorgonia.ExprGraph, []*gorgonia.Node) (*gorgonia.Node, error),
	inputs []tensor.Tensor, promote bool) (*gorgonia.ExprGraph, []*gorgonia.Node, []*tensor.Dense, error) {
	g := gorgonia.NewGraph()
	nodes := make([]*gorgonia.Node, len(inputs))
	vals := make([]*tensor.Dense, len(inputs))
	for k, in := range inputs {
		d, err := operand.Read("gradcheck", fmt.Sprintf("input %d", k), in)
		if err != nil {
			return nil, nil, nil, err
		}
		switch {
		case promote && d.Dtype() == tensor.Float32:
			d = toFloat64(d)
		case d == in:
			d = d.Clone().(*tensor.Dense)
		}
		vals[k] = d
		nodes[k] = gorgonia.NodeFromAny(g, operand.Value(d), gorgonia.WithName(fmt.Sprintf("input%d", k)))
	}
	cost, err := build(g, nodes)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("gradcheck: building the expression: %w", errs.Graph(err))
	}
	if cost == nil || !cost.IsScalar() {
		return nil, nil, nil, fmt.Errorf("gradcheck: the cost must be a scalar node, got %v: %w", cost, gather.ErrShape)
	}
	if err := operand.CheckFloat("gradcheck", "the cost", cost.Dtype()); err != nil {
		return nil, nil, nil, err
	}
	return g, append(nodes, cost), vals, nil
}

// sameGrads returns an error naming the first element where the
// TapeMachine's gradients a and machine.Machine's b differ in a bit.
func sameGrads(a, b [][]float64) error {
	for k := range a {
		for p := range a[k] {
			if math.Float64bits(a[k][p]) != math.Float64bits(b[k][p]) {
				return fmt.Errorf("gradcheck: the gradient of input %d at %d is %v on the TapeMachine and %v on machine.Machine: %w",
					k, p, a[k][p], b[k][p], gather.ErrGraph)
			}
		}
	}
	return nil
}

// analyticGrads returns the gradient of the cost with respect to each float
// input, flattened, and nil for other inputs: by a LispMachine with lisp,
// else by gorgonia.Grad and a TapeMachine, or machine.Machine with planned.
func analyticGrads(build func(*gorgonia.ExprGraph, []*gorgonia.Node) (*gorgonia.Node, error),
	inputs []tensor.Tensor, lisp, planned bool) ([][]float64, error) {
	g, nodes, vals, err := buildCopy(build, inputs, false)
	if err != nil {
		return nil, err
	}
	cost := nodes[len(nodes)-1]
	var wrt []*gorgonia.Node
	for k, v := range vals {
		if dt := v.Dtype(); dt == tensor.Float32 || dt == tensor.Float64 {
			wrt = append(wrt, nodes[k])
		}
	}
	if len(wrt) == 0 {
		return nil, fmt.Errorf("gradcheck: no float32 or float64 input to differentiate: %w", gather.ErrDtype)
	}
	var vm gorgonia.VM
	if lisp {
		vm = gorgonia.NewLispMachine(g)
	} else {
		if _, err := gorgonia.Grad(cost, wrt...); err != nil {
			return nil, fmt.Errorf("gradcheck: gorgonia.Grad: %w", errs.Graph(err))
		}
		vm = gorgonia.NewTapeMachine(g)
		if planned {
			if vm, err = machine.New(g); err != nil {
				return nil, fmt.Errorf("gradcheck: %w", err)
			}
		}
	}
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		return nil, fmt.Errorf("gradcheck: running the gradient: %w", errs.Graph(err))
	}
	out := make([][]float64, len(inputs))
	for k, v := range vals {
		if dt := v.Dtype(); dt != tensor.Float32 && dt != tensor.Float64 {
			continue
		}
		gv, err := nodes[k].Grad()
		if err != nil {
			return nil, fmt.Errorf("gradcheck: input %d has no gradient: %w", k, errs.Graph(err))
		}
		gd, err := operand.Read("gradcheck", "gradient", gv)
		if err != nil || !operand.SameShape(gd.Shape(), v.Shape()) {
			return nil, fmt.Errorf("gradcheck: the gradient of input %d is %v, want a tensor of shape %v: %w", k, gv, v.Shape(), gather.ErrShape)
		}
		out[k] = make([]float64, v.Shape().TotalSize())
		for p := range out[k] {
			out[k][p] = get(gd, p)
		}
	}
	return out, nil
}

// get returns element p of a row-major float tensor as a float64.
func get(t *tensor.Dense, p int) float64 {
	if t.Dtype() == tensor.Float32 {
		return float64(t.Float32s()[p])
	}
	return t.Float64s()[p]
}

// set stores x at element p of a row-major float tensor and returns the
// value actually stored.
func set(t *tensor.Dense, p int, x float64) float64 {
	if t.Dtype() == tensor.Float32 {
		t.Float32s()[p] = float32(x)
		return float64(float32(x))
	}
	t.Float64s()[p] = x
	return x
}

// toFloat64 returns a float64 copy of a row-major float32 tensor.
func toFloat64(t *tensor.Dense) *tensor.Dense {
	out := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(t.Shape().Clone()...))
	n := t.Shape().TotalSize()
	if n == 0 {
		return out
	}
	dst := out.Float64s()
	for i, x := range t.Float32s()[:n] {
		dst[i] = float64(x)
	}
	return out
}

// scalar returns the value of the cost, a float scalar.
func scalar(v gorgonia.Value) (float64, error) { return operand.Scalar("gradcheck: the cost", v) }
