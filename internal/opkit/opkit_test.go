package opkit

import (
	"errors"
	"testing"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
)

func vec(n int) Sig {
	t := gorgonia.TensorType{Dims: 1, Of: tensor.Float64}
	return Sig{Name: "Double", In: []hm.Type{t}, Dtype: tensor.Float64, Shape: tensor.Shape{n}, Diff: []bool{true}}
}

func TestIdentity(t *testing.T) {
	a, b, c := New(vec(3), "sum"), New(vec(3), "sum"), New(vec(3), "mean")
	if a.Hashcode() != b.Hashcode() || a.ID() != b.ID() {
		t.Errorf("equal identities hash %d and %d", a.Hashcode(), b.Hashcode())
	}
	if a.Hashcode() == c.Hashcode() {
		t.Error("different keys hash alike")
	}
	if d := New(vec(4), "sum"); d.Hashcode() == a.Hashcode() {
		t.Error("different shapes hash alike")
	}
	if a.ReturnsPtr() || a.OverwritesInput() != -1 || a.CallsExtern() {
		t.Error("want a new output")
	}
	s := vec(3)
	s.PassThrough = true
	p := New(s)
	if !p.ReturnsPtr() || p.OverwritesInput() != 0 || p.CallsExtern() {
		t.Error("PassThrough: want the first input returned")
	}
}

func TestSig(t *testing.T) {
	s := vec(3)
	o := New(s)
	s.Shape[0], s.Diff[0] = 9, false // New keeps its own copies
	if o.Arity() != 1 || o.String() != "Double" {
		t.Errorf("Arity %d, String %q", o.Arity(), o.String())
	}
	if got := o.Type().String(); got != "Vector float64 → Vector float64" {
		t.Errorf("Type %s", got)
	}
	if sh, _ := o.InferShape(); !sh.Eq(tensor.Shape{3}) {
		t.Errorf("InferShape %v", sh)
	}
	if d := o.DiffWRT(1); len(d) != 1 || !d[0] {
		t.Errorf("DiffWRT %v", d)
	}
}

// double is a Grad whose Run writes or adds 2·in[0] into dst, failing
// for a negative first value before writing anything.
func double() *Grad {
	s := vec(3)
	s.In = append(s.In, s.In[0])
	return NewGrad(s, func(dst *tensor.Dense, add bool, in []gorgonia.Value) error {
		x := in[0].(*tensor.Dense).Float64s()
		if x[0] < 0 {
			return errs.ErrShape
		}
		d := dst.Float64s()
		for i := range d {
			if !add {
				d[i] = 0
			}
			d[i] += 2 * x[i]
		}
		return nil
	})
}

func TestGrad(t *testing.T) {
	g := double()
	x := tensor.New(tensor.WithBacking([]float64{1, 2, 3}))
	up := tensor.New(tensor.WithBacking([]float64{0, 0, 0}))
	v, err := g.Do(x, up)
	if err != nil || !equal(v, 2, 4, 6) {
		t.Fatalf("Do: %v, %v", v, err)
	}
	buf := tensor.New(tensor.WithBacking([]float64{7, 7, 7}))
	if v, err := g.UsePreallocDo(buf, x, up); err != nil || v != buf || !equal(buf, 2, 4, 6) {
		t.Fatalf("UsePreallocDo: %v, %v", v, err)
	}
	if err := g.IncrDo(buf, x, up); err != nil || !equal(buf, 4, 8, 12) {
		t.Fatalf("IncrDo: %v, %v", buf, err)
	}
	// A buffer of another shape, or one that is an input, is not written.
	small := tensor.New(tensor.WithBacking([]float64{5, 5}))
	if v, err := g.UsePreallocDo(small, x, up); err != nil || v == small || !equal(small, 5, 5) {
		t.Errorf("UsePreallocDo into a misfit: %v, %v, buffer %v", v, err, small)
	}
	if v, err := g.UsePreallocDo(x, x, up); err != nil || v == x || !equal(x, 1, 2, 3) {
		t.Errorf("UsePreallocDo into an input: %v, %v, input %v", v, err, x)
	}
	// Errors: the wrong number of inputs, a target that is not a Dense, and
	// the Run's own.
	if _, err := g.Do(x); !errors.Is(err, errs.ErrShape) {
		t.Errorf("one input: %v", err)
	}
	if err := g.IncrDo(gorgonia.NewF64(1), x, up); !errors.Is(err, errs.ErrDtype) {
		t.Errorf("IncrDo into a scalar: %v", err)
	}
	neg := tensor.New(tensor.WithBacking([]float64{-1, 0, 0}))
	if err := g.IncrDo(buf, neg, up); !errors.Is(err, errs.ErrShape) || !equal(buf, 4, 8, 12) {
		t.Errorf("a failing Run: %v, buffer %v", err, buf)
	}
	if g.ReturnsPtr() || g.DiffWRT(2)[0] {
		t.Error("a Grad returns a new value and has no gradient of its own")
	}
}

// SymDiff applies the Grads of the inputs that have one (DoDiff runs in
// the LispMachine tests of the ops).
func TestSymDiff(t *testing.T) {
	g := gorgonia.NewGraph()
	x := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(3), gorgonia.WithName("x"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]float64{1, 2, 3}))))
	up := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(3), gorgonia.WithName("up"))
	d := &Diff{Op: New(vec(3)), Grads: []*Grad{double()}}
	ns, err := d.SymDiff(gorgonia.Nodes{x}, x, up)
	if err != nil || len(ns) != 1 || ns[0] == nil || ns[0].Op() != gorgonia.Op(d.Grads[0]) {
		t.Fatalf("SymDiff: %v, %v", ns, err)
	}
	if _, err := d.SymDiff(gorgonia.Nodes{x, up}, x, up); !errors.Is(err, errs.ErrShape) {
		t.Errorf("SymDiff with two inputs: %v", err)
	}
	none := &Diff{Op: New(vec(3)), Grads: []*Grad{nil}}
	if ns, err := none.SymDiff(gorgonia.Nodes{x}, x, up); err != nil || ns[0] != nil {
		t.Errorf("SymDiff without a gradient: %v, %v", ns, err)
	}
	bad := &Diff{Op: New(vec(3)), Err: errs.ErrDtype}
	if _, err := bad.SymDiff(gorgonia.Nodes{x}, x, up); !errors.Is(err, errs.ErrDtype) {
		t.Errorf("SymDiff of an op that has no gradient: %v", err)
	}
	if err := bad.DoDiff(gorgonia.ExecutionContext{}, gorgonia.Nodes{x}, x); !errors.Is(err, errs.ErrDtype) {
		t.Errorf("DoDiff of an op that has no gradient: %v", err)
	}
}

func equal(v gorgonia.Value, want ...float64) bool {
	got := v.(*tensor.Dense).Float64s()
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}
