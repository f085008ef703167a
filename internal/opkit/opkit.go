// Package opkit holds what every Gorgonia op of the module shares. An Op,
// made from a Sig, answers every question Gorgonia asks an op except Do:
// its name, arity, type, output shape, identity (which Gorgonia's
// hash-consing compares), which inputs have a gradient, and what memory
// its output uses. A Grad is a whole gradient op made from a Sig and one
// function that writes or adds its result; DoDiff and SymDiff run and
// apply the Grads of a differentiable op.
package opkit

import (
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"slices"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/operand"
)

// Sig describes an op.
type Sig struct {
	Name  string       // what String returns, e.g. "Gather{axis=1}"
	In    []hm.Type    // the inputs' types, one per input
	Dtype tensor.Dtype // the output's dtype
	Shape tensor.Shape // the output's shape; rank 0 for a scalar
	Diff  []bool       // for each input, whether it has a gradient; nil for none
	// PassThrough says that the output is the first input itself.
	PassThrough bool
}

// Op is embedded in each of the module's Gorgonia ops, which add Do. It
// implements Arity, Type, InferShape, String and DiffWRT from its Sig,
// and WriteHash and Hashcode from its identity: the Sig's name, types and
// shape, and the key parts given to New, which must name everything else
// that sets the op's results. Gorgonia merges two nodes whose ops write
// the same hash and whose inputs are the same nodes, so the identity must
// differ wherever a result could. It also implements ReturnsPtr,
// CallsExtern and OverwritesInput: the output is a new value unless the
// Sig says PassThrough, and no op of the module runs outside Go.
type Op struct {
	sig Sig
	out hm.Type
	id  string
}

// New returns the Op of s, whose identity adds the key parts (formatted
// as fmt.Sprintln does, without the newline) to s.
func New(s Sig, key ...any) Op {
	s.In, s.Shape, s.Diff = slices.Clone(s.In), s.Shape.Clone(), slices.Clone(s.Diff)
	o := Op{sig: s, out: operand.Type(len(s.Shape), s.Dtype)}
	id := fmt.Sprintln(append([]any{s.Name, s.In, "->", o.out, s.Shape}, key...)...)
	o.id = id[:len(id)-1]
	return o
}

// ID returns the op's identity, for an op derived from it (a gradient op)
// to build its own on.
func (o *Op) ID() string { return o.id }

// Arity returns the number of inputs.
func (o *Op) Arity() int { return len(o.sig.In) }

// Type returns the inputs' types -> the output's.
func (o *Op) Type() hm.Type {
	return hm.NewFnType(append(o.sig.In[:len(o.sig.In):len(o.sig.In)], o.out)...)
}

// InferShape returns the output's shape.
func (o *Op) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) { return o.sig.Shape.Clone(), nil }

// String returns the op's name.
func (o *Op) String() string { return o.sig.Name }

// DiffWRT reports which inputs have a gradient.
func (o *Op) DiffWRT(int) []bool {
	d := make([]bool, len(o.sig.In))
	copy(d, o.sig.Diff)
	return d
}

// WriteHash writes the identity.
func (o *Op) WriteHash(h hash.Hash) { io.WriteString(h, o.id) }

// Hashcode returns the FNV-1a hash of the identity.
func (o *Op) Hashcode() uint32 {
	h := fnv.New32a()
	o.WriteHash(h)
	return h.Sum32()
}

// ReturnsPtr reports whether the output is the first input itself.
func (o *Op) ReturnsPtr() bool { return o.sig.PassThrough }

// CallsExtern returns false.
func (o *Op) CallsExtern() bool { return false }

// OverwritesInput returns 0 (the first input) when the output is the
// first input itself, else -1.
func (o *Op) OverwritesInput() int {
	if o.sig.PassThrough {
		return 0
	}
	return -1
}

// Run writes (add false) or adds (add true) a gradient into dst from the
// inputs in, after checking dst and every input, so that on error dst is
// unchanged. Without add it writes every element of dst.
type Run func(dst *tensor.Dense, add bool, in []gorgonia.Value) error

// Grad is a gradient op: its Sig and a Run supply all of it. It takes the
// inputs of the op it differentiates and that op's upstream gradient.
type Grad struct {
	Op
	run Run
}

// NewGrad returns the gradient op of s that run computes; key is as for
// New. Its output is a new value.
func NewGrad(s Sig, run Run, key ...any) *Grad {
	s.PassThrough, s.Diff = false, nil
	return &Grad{Op: New(s, key...), run: run}
}

// Do returns the gradient in a new tensor.
func (g *Grad) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := g.check(in); err != nil {
		return nil, err
	}
	return g.into(operand.NewOutput(g.sig.Dtype, g.sig.Shape), in)
}

// UsePreallocDo overwrites prealloc with the gradient when it can hold it
// (a row-major tensor of the output's dtype and shape, not a view, sharing
// memory with no input), else returns it in a new tensor.
func (g *Grad) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	out, ok := prealloc.(*tensor.Dense)
	if !ok || !g.fits(out, in) {
		return g.Do(in...)
	}
	if err := g.check(in); err != nil {
		return nil, err
	}
	return g.into(out, in)
}

// IncrDo adds the gradient into toIncr.
func (g *Grad) IncrDo(toIncr gorgonia.Value, in ...gorgonia.Value) error {
	if err := g.check(in); err != nil {
		return err
	}
	dst, ok := toIncr.(*tensor.Dense)
	if !ok {
		return fmt.Errorf("%s: cannot add into a %T: %w", g.sig.Name, toIncr, errs.ErrDtype)
	}
	return g.run(dst, true, in)
}

func (g *Grad) into(out *tensor.Dense, in []gorgonia.Value) (gorgonia.Value, error) {
	if err := g.run(out, false, in); err != nil {
		return nil, err
	}
	return out, nil
}

func (g *Grad) check(in []gorgonia.Value) error {
	return operand.CheckArity(g.sig.Name, "", len(in), len(g.sig.In))
}

// fits reports whether out can hold the gradient in place.
func (g *Grad) fits(out *tensor.Dense, in []gorgonia.Value) bool {
	if out == nil || out.Dtype() != g.sig.Dtype || !operand.SameShape(out.Shape(), g.sig.Shape) || !operand.Writable(out) {
		return false
	}
	for _, v := range in {
		if t, ok := v.(*tensor.Dense); ok && operand.Overlaps(out, t) {
			return false
		}
	}
	return true
}

// Diff is an Op with a gradient op per differentiable input: it
// implements SymDiff and DoDiff for the ops that embed it.
type Diff struct {
	Op
	// Grads holds, for each input, its gradient op: one taking the op's
	// inputs and its upstream gradient. It is nil for an input without
	// a gradient.
	Grads []*Grad
	// What names the op in errors; the Sig's name when empty.
	What string
	// Err, when set, is what SymDiff and DoDiff return: the op has no
	// gradient (data of a dtype that is not differentiable).
	Err error
	// FromOutput makes the gradient ops of a one-input op take the op's
	// output in place of its input (LogSoftmax's gradient is computed
	// from the log-probabilities).
	FromOutput bool
}

func (d *Diff) what() string {
	if d.What != "" {
		return d.What
	}
	return d.sig.Name
}

// SymDiff applies each input's gradient op to the inputs and the upstream
// gradient grad, and returns the gradient nodes (nil for an input without
// one). A zero-sized gradient Gorgonia would have to allocate is an error
// (see errs.CheckGradSize).
func (d *Diff) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if err := d.check(len(inputs)); err != nil {
		return nil, err
	}
	out := make(gorgonia.Nodes, len(inputs))
	var diff gorgonia.Nodes
	for i, g := range d.Grads {
		if g != nil {
			diff = append(diff, inputs[i])
		}
	}
	if diff == nil {
		return out, nil
	}
	if err := errs.CheckGradSize(d.what(), grad, diff...); err != nil {
		return nil, err
	}
	args := append(append(make(gorgonia.Nodes, 0, len(inputs)+1), inputs...), grad)
	if d.FromOutput {
		args = gorgonia.Nodes{output, grad}
	}
	for i, g := range d.Grads {
		if g == nil {
			continue
		}
		n, err := gorgonia.ApplyOp(g, args...)
		if err != nil {
			return nil, fmt.Errorf("%s: building the gradient: %w", d.what(), errs.Graph(err))
		}
		out[i] = n
	}
	return out, nil
}

// DoDiff adds each input's gradient into the gradient the input already
// has, for Gorgonia's LispMachine.
func (d *Diff) DoDiff(ctx gorgonia.ExecutionContext, inputs gorgonia.Nodes, output *gorgonia.Node) error {
	if err := d.check(len(inputs)); err != nil {
		return err
	}
	up, err := output.Grad()
	if err != nil {
		return fmt.Errorf("%s: the output has no gradient: %w", d.what(), errs.Graph(err))
	}
	in := make([]gorgonia.Value, 0, len(inputs)+1)
	for _, n := range inputs {
		in = append(in, n.Value())
	}
	in = append(in, up)
	if d.FromOutput {
		in = []gorgonia.Value{output.Value(), up}
	}
	for i, g := range d.Grads {
		if g == nil {
			continue
		}
		dg, err := inputs[i].Grad()
		if err != nil {
			return fmt.Errorf("%s: input %d has no gradient to add into: %w", d.what(), i, errs.Graph(err))
		}
		if err := g.IncrDo(dg, in...); err != nil {
			return err
		}
	}
	return nil
}

func (d *Diff) check(n int) error {
	if d.Err != nil {
		return d.Err
	}
	return operand.CheckArity(d.what(), "", n, len(d.sig.In))
}

// NewDiff returns the Diff of an op of Sig s (s.Diff is ignored) each of
// whose inputs has a gradient: input i's gradient op, named s.Name +
// "Grad" + i, takes the op's inputs and its upstream gradient, has shape
// shapes[i], and run(i) computes it. what names the op in errors; key is
// as for New.
func NewDiff(s Sig, what string, shapes []tensor.Shape, run func(i int) Run, key ...any) Diff {
	s.Diff = make([]bool, len(s.In))
	for i := range s.Diff {
		s.Diff[i] = true
	}
	d := Diff{Op: New(s, key...), What: what}
	up := operand.Type(len(s.Shape), s.Dtype)
	for i := range s.In {
		g := Sig{Name: fmt.Sprintf("%sGrad%d", s.Name, i), In: append(slices.Clip(s.In), up), Dtype: s.Dtype, Shape: shapes[i]}
		d.Grads = append(d.Grads, NewGrad(g, run(i), d.ID(), i))
	}
	return d
}

// Apply adds op of the inputs in to their graph and returns its node; an
// error of Gorgonia's is one wrapping gather.ErrGraph, prefixed by what.
func Apply(what string, op gorgonia.Op, in ...*gorgonia.Node) (*gorgonia.Node, error) {
	out, err := gorgonia.ApplyOp(op, in...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, errs.Graph(err))
	}
	return out, nil
}
