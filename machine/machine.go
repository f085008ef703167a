package machine

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/graphop"
)

// ErrClosed is the error of RunAll after Close: the same value as
// table.ErrClosed, so errors.Is(err, table.ErrClosed) holds for either.
var ErrClosed = errs.ErrClosed

// ErrBusy is the error of a RunAll while another RunAll of the same
// machine runs.
var ErrBusy = errors.New("machine: another RunAll of this machine is running")

// An Option configures New.
type Option func(*config)

type config struct {
	grads    []*gorgonia.Node
	gradsSet bool
	keep     []*gorgonia.Node
}

// WithGrads names the nodes whose gradients a run keeps, as
// gorgonia.BindDualValues names those a TapeMachine binds: after a run,
// their Grad() is this run's gradient. Without it, the gradients of every
// input are kept.
func WithGrads(nodes ...*gorgonia.Node) Option {
	return func(c *config) {
		c.grads = append(c.grads, nodes...)
		c.gradsSet = true
	}
}

// Keep names nodes whose values a run leaves in place, besides those the
// package doc lists: gradients of intermediate nodes a caller reads.
func Keep(nodes ...*gorgonia.Node) Option {
	return func(c *config) { c.keep = append(c.keep, nodes...) }
}

// A Machine runs one graph. It implements gorgonia.VM.
type Machine struct {
	steps []step
	vals  []gorgonia.Value // each step's value in the current run
	busy  atomic.Bool
	// closed is set by Close; RunAll, which holds busy, reads it.
	closed atomic.Bool
	stats  Stats
}

var _ gorgonia.VM = (*Machine)(nil)

// Stats describes a machine's plan.
type Stats struct {
	Nodes    int   // nodes run, inputs included
	Buffers  int   // output buffers made for them
	Bytes    int64 // the bytes of those buffers
	Unshared int64 // the bytes the buffers would take with none reused
	Fallback int   // ops run through their Do on every run
}

// Stats returns the plan's figures.
func (m *Machine) Stats() Stats { return m.stats }

// RunAll runs the graph once. An error names the node whose op failed and
// wraps the op's error; the values of the nodes after it are those of the
// run before.
func (m *Machine) RunAll() error {
	if !m.busy.CompareAndSwap(false, true) {
		return ErrBusy
	}
	defer m.busy.Store(false)
	if m.closed.Load() {
		return fmt.Errorf("machine: %w", ErrClosed)
	}
	for i := range m.steps {
		s := &m.steps[i]
		for j, a := range s.args {
			s.in[j] = m.vals[a]
		}
		v, err := s.run()
		if err != nil {
			return s.fail(err)
		}
		m.vals[i] = v
		if s.kind != input && s.kind != read && s.n.Value() != v {
			if err := gorgonia.UnsafeLet(s.n, v); err != nil {
				return s.fail(err)
			}
		}
	}
	return nil
}

// Reset does nothing: a machine keeps its buffers from run to run, and
// each run starts from the graph's inputs. It is there for gorgonia.VM.
func (m *Machine) Reset() {}

// Close releases the machine's buffers. The values nodes hold stay theirs.
func (m *Machine) Close() error {
	m.closed.Store(true)
	if m.busy.CompareAndSwap(false, true) {
		m.steps, m.vals = nil, nil
		m.busy.Store(false)
	}
	return nil
}

// kind is how a step makes its value.
type kind uint8

const (
	input    kind = iota // the value bound to the node: an input, a learnable, a constant
	prealloc             // the op's UsePreallocDo into the step's buffer
	adapted              // this package's equivalent of the op, into the buffer
	do                   // the op's Do
	read                 // a gorgonia.Read statement
)

// step is one node of the graph.
type step struct {
	n     *gorgonia.Node
	op    gorgonia.Op
	kind  kind
	pre   gorgonia.UsePreallocDoer
	fn    func(dst gorgonia.Value, in []gorgonia.Value) error
	args  []int            // the steps of the inputs
	in    []gorgonia.Value // the inputs of this run
	buf   gorgonia.Value   // the output buffer of prealloc and adapted steps
	into  *gorgonia.Value  // a read's destination
	shape tensor.Shape
	dtype tensor.Dtype
	kept  bool // the value outlives the run
}

func (s *step) run() (gorgonia.Value, error) {
	switch s.kind {
	case input:
		return s.bound()
	case prealloc:
		v, err := s.pre.UsePreallocDo(s.buf, s.in...)
		if err != nil {
			return nil, err
		}
		if v != s.buf {
			// The op made a value of its own: its arithmetic, in the
			// planned buffer.
			if _, err := gorgonia.Copy(s.buf, v); err != nil {
				return nil, err
			}
		}
		return s.buf, nil
	case adapted:
		if err := s.fn(s.buf, s.in); err != nil {
			return nil, err
		}
		return s.buf, nil
	case do:
		return s.op.Do(s.in...)
	case read:
		v := s.in[0]
		if *s.into != nil {
			_, err := gorgonia.Copy(*s.into, v)
			return nil, err
		}
		c, err := gorgonia.CloneValue(v)
		*s.into = c
		return nil, err
	}
	panic("machine: unknown step kind")
}

// bound returns the value bound to an input node after checking it.
func (s *step) bound() (gorgonia.Value, error) {
	v := s.n.Value()
	if v == nil {
		return nil, fmt.Errorf("no value is bound to input %q: gorgonia.Let one before the run: %w", s.n.Name(), errs.ErrGraph)
	}
	if v.Dtype() != s.dtype {
		return nil, fmt.Errorf("input %q holds a %v value, want %v: %w", s.n.Name(), v.Dtype(), s.dtype, errs.ErrDtype)
	}
	if !sameShape(v.Shape(), s.shape) {
		return nil, fmt.Errorf("input %q holds a value of shape %v, want %v: %w", s.n.Name(), v.Shape(), s.shape, errs.ErrShape)
	}
	return v, nil
}

// fail returns err naming the step's node: by its name and op, or, for
// a node with no name of its own (Gorgonia then names it by its op and
// inputs), by that alone.
func (s *step) fail(err error) error {
	if s.kind == input {
		return fmt.Errorf("machine: %w", err)
	}
	if name := s.n.Name(); !strings.HasPrefix(name, s.op.String()) {
		return fmt.Errorf("machine: node %q (%v): %w", name, s.op, err)
	}
	return fmt.Errorf("machine: node %s: %w", s.n.Name(), err)
}

// sameShape reports whether a and b are equal, a scalar's shape () and a
// 0-d tensor's alike.
func sameShape(a, b tensor.Shape) bool {
	if len(a) != len(b) {
		return a.IsScalar() && b.IsScalar()
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// New plans g: it sorts it as a TapeMachine does, decides how each node
// runs and gives each computed node its buffer. An op that cannot run is
// an error naming the node and its op.
func New(g *gorgonia.ExprGraph, opts ...Option) (*Machine, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if g == nil || len(g.AllNodes()) == 0 {
		return nil, fmt.Errorf("machine: an empty graph: %w", errs.ErrGraph)
	}
	sorted, err := gorgonia.Sort(g)
	if err != nil {
		return nil, fmt.Errorf("machine: %w: %w", err, errs.ErrGraph)
	}
	for i, j := 0, len(sorted)-1; i < j; i, j = i+1, j-1 {
		sorted[i], sorted[j] = sorted[j], sorted[i]
	}
	p := planner{cfg: c, g: g, nodes: sorted, at: make(map[*gorgonia.Node]int, len(sorted))}
	return p.plan()
}

// readInto is graphop.ReadInto, for plan.go.
var readInto = graphop.ReadInto

// Kept returns the nodes whose values a run leaves in place (see the
// package doc), inputs left out, in the order they run.
func (m *Machine) Kept() gorgonia.Nodes {
	var ns gorgonia.Nodes
	for i := range m.steps {
		if s := &m.steps[i]; s.kept && s.kind != input && s.kind != read {
			ns = append(ns, s.n)
		}
	}
	return ns
}
