// Package vmtest runs a graph on Gorgonia's TapeMachine and on a
// machine.Machine, one after the other on each run, and fails a test when
// they disagree: in whether the run fails (and on which of the module's
// sentinel errors), or in a bit of a floating-point value the Machine
// keeps (machine.Machine.Kept) or a gorgonia.Read's copy. The tests of the
// module's graphs make their machines here, so that every graph they run
// is run on both.
//
// Ops with effects outside the graph run twice a run: a row cache's fetch
// finds its rows cached on the second, and gives them other slots (an
// integer value, which is not compared); max_norm renormalises the table
// it is given (a value that is an input's, which is not compared).
package vmtest

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/graphop"
	"github.com/gathergrad/gather/machine"
)

// Twin is a gorgonia.VM that runs both machines. After RunAll, the
// graph's nodes hold the Machine's values.
type Twin struct {
	tb      testing.TB
	tape    gorgonia.VM
	m       *machine.Machine
	compare gorgonia.Nodes // roots and kept gradients
	reads   []*gorgonia.Value
	inputs  gorgonia.Nodes
	runs    int
}

// New returns the twin of gorgonia.NewTapeMachine(g).
func New(tb testing.TB, g *gorgonia.ExprGraph) *Twin {
	tb.Helper()
	return newTwin(tb, g, gorgonia.NewTapeMachine(g, gorgonia.TraceExec()))
}

// Bound returns the twin of gorgonia.NewTapeMachine(g,
// gorgonia.BindDualValues(learn...)), the Machine made WithGrads(learn...).
func Bound(tb testing.TB, g *gorgonia.ExprGraph, learn ...*gorgonia.Node) *Twin {
	tb.Helper()
	return newTwin(tb, g, gorgonia.NewTapeMachine(g, gorgonia.TraceExec(), gorgonia.BindDualValues(learn...)), machine.WithGrads(learn...))
}

func newTwin(tb testing.TB, g *gorgonia.ExprGraph, tape gorgonia.VM, opts ...machine.Option) *Twin {
	tb.Helper()
	m, err := machine.New(g, opts...)
	if err != nil {
		tb.Fatalf("machine.New: %v", err)
	}
	t := &Twin{tb: tb, tape: tape, m: m}
	t.compare = m.Kept()
	for _, n := range g.AllNodes() {
		if n.Op() == nil {
			t.inputs = append(t.inputs, n)
		}
		if into, ok := graphop.ReadInto(n.Op()); ok {
			t.reads = append(t.reads, into)
		}
	}
	return t
}

// Machine returns the twin's Machine.
func (t *Twin) Machine() *machine.Machine { return t.m }

// RunAll runs the TapeMachine, then the Machine, and returns the
// Machine's error. A disagreement fails the test and is returned as an
// error as well.
func (t *Twin) RunAll() error {
	t.runs++
	tapeErr := t.tape.RunAll()
	want := make([]gorgonia.Value, len(t.compare))
	if tapeErr == nil {
		for i, n := range t.compare {
			want[i] = clone(n.Value())
		}
	}
	wantReads := make([]gorgonia.Value, len(t.reads))
	for i, r := range t.reads {
		wantReads[i] = clone(*r)
	}
	err := t.m.RunAll()
	if (tapeErr == nil) != (err == nil) || !sameClass(tapeErr, err) {
		return t.disagree("run %d: the TapeMachine's error is %v; the Machine's is %v", t.runs, tapeErr, err)
	}
	if err != nil {
		return err
	}
	inputs := map[gorgonia.Value]bool{}
	for _, n := range t.inputs {
		inputs[n.Value()] = true
	}
	for i, n := range t.compare {
		if dt := n.Dtype(); dt != tensor.Float32 && dt != tensor.Float64 || inputs[n.Value()] {
			continue
		}
		if d := differ(want[i], n.Value()); d != "" {
			return t.disagree("run %d: node %q (%v): %s", t.runs, n.Name(), n.Op(), d)
		}
	}
	for i, r := range t.reads {
		if d := differ(wantReads[i], *r); d != "" {
			return t.disagree("run %d: a gorgonia.Read: %s", t.runs, d)
		}
	}
	return nil
}

func (t *Twin) disagree(format string, args ...any) error {
	t.tb.Helper()
	err := fmt.Errorf("vmtest: the machines disagree: "+format, args...)
	t.tb.Error(err)
	return err
}

// Reset resets both machines.
func (t *Twin) Reset() {
	t.tape.Reset()
	t.m.Reset()
}

// Close closes both machines.
func (t *Twin) Close() error {
	err := t.tape.Close()
	if e := t.m.Close(); err == nil {
		err = e
	}
	return err
}

// sameClass reports whether a and b wrap the same sentinel of the
// module, or both none.
func sameClass(a, b error) bool {
	oa, ob := errs.Ours(a), errs.Ours(b)
	if (oa == nil) != (ob == nil) {
		return false
	}
	if oa == nil {
		return true
	}
	for _, s := range []error{errs.ErrIndexOutOfRange, errs.ErrAxisOutOfRange, errs.ErrShape, errs.ErrDtype, errs.ErrOption, errs.ErrGraph, errs.ErrClosed, errs.ErrInUse} {
		if errors.Is(oa, s) != errors.Is(ob, s) {
			return false
		}
	}
	return true
}

func clone(v gorgonia.Value) gorgonia.Value {
	if v == nil {
		return nil
	}
	c, err := gorgonia.CloneValue(v)
	if err != nil {
		panic(err)
	}
	return c
}

// differ describes how b differs from a, bit for bit, or returns "".
func differ(a, b gorgonia.Value) string {
	if a == nil || b == nil {
		if a == nil && b == nil {
			return ""
		}
		return fmt.Sprintf("TapeMachine %v, Machine %v", a, b)
	}
	if a.Dtype() != b.Dtype() || !a.Shape().Eq(b.Shape()) {
		return fmt.Sprintf("TapeMachine %v %v, Machine %v %v", a.Dtype(), a.Shape(), b.Dtype(), b.Shape())
	}
	fa, fb := floats(a), floats(b)
	if fa == nil || fb == nil {
		if fmt.Sprint(a) != fmt.Sprint(b) {
			return fmt.Sprintf("TapeMachine %v, Machine %v", a, b)
		}
		return ""
	}
	for i := range fa {
		if math.Float64bits(fa[i]) != math.Float64bits(fb[i]) {
			return fmt.Sprintf("element %d: TapeMachine %v, Machine %v", i, fa[i], fb[i])
		}
	}
	return ""
}

// floats returns v's elements in row-major order as float64 (exact for
// float32), or nil for another dtype.
func floats(v gorgonia.Value) []float64 {
	switch x := v.(type) {
	case *gorgonia.F32:
		return []float64{float64(*x)}
	case *gorgonia.F64:
		return []float64{float64(*x)}
	case tensor.Tensor:
		d, ok := x.(*tensor.Dense)
		if !ok {
			return nil
		}
		if d.Shape().TotalSize() == 0 {
			return []float64{}
		}
		if !d.IsMaterializable() && d.DataOrder().IsRowMajor() {
			switch s := d.Data().(type) {
			case []float32:
				out := make([]float64, len(s))
				for i, f := range s {
					out[i] = float64(f)
				}
				return out
			case []float64:
				return append([]float64(nil), s...)
			case float32:
				return []float64{float64(s)}
			case float64:
				return []float64{s}
			}
			return nil
		}
		m := d.Materialize().(*tensor.Dense)
		return floats(m)
	}
	return nil
}
