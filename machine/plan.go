package machine

import (
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/graphop"
)

// planner turns a sorted graph into a Machine's steps.
type planner struct {
	cfg   config
	g     *gorgonia.ExprGraph
	nodes gorgonia.Nodes // in the order they run
	at    map[*gorgonia.Node]int
	users [][]int // the steps that read each step's value
	group []int   // union-find over steps whose values may share memory
}

func (p *planner) plan() (*Machine, error) {
	m := &Machine{steps: make([]step, len(p.nodes)), vals: make([]gorgonia.Value, len(p.nodes))}
	p.users = make([][]int, len(p.nodes))
	p.group = make([]int, len(p.nodes))
	for i, n := range p.nodes {
		p.at[n] = i
		p.group[i] = i
	}
	if err := p.checkOptions(); err != nil {
		return nil, err
	}
	for i, n := range p.nodes {
		s := &m.steps[i]
		s.n, s.op = n, n.Op()
		children := p.g.From(n.ID())
		for children.Next() {
			c, _ := children.Node().(*gorgonia.Node)
			j, ok := p.at[c]
			if !ok {
				return nil, fmt.Errorf("machine: node %q reads %v, which is not in the graph: %w", n.Name(), children.Node(), errs.ErrGraph)
			}
			s.args = append(s.args, j)
			p.users[j] = append(p.users[j], i)
		}
		s.in = make([]gorgonia.Value, len(s.args))
		if err := p.choose(s); err != nil {
			return nil, err
		}
		if s.kind == do {
			// What Do returns may be an input or share its memory.
			for _, a := range s.args {
				p.union(i, a)
			}
			m.stats.Fallback++
		}
	}
	m.stats.Nodes = len(p.nodes)
	p.buffers(m)
	return m, nil
}

// checkOptions reports an error naming the first node of WithGrads or
// Keep that is nil or not in the graph, or, in WithGrads, has no
// gradient in it.
func (p *planner) checkOptions() error {
	check := func(opt string, ns []*gorgonia.Node, grad bool) error {
		for k, n := range ns {
			if n == nil {
				return fmt.Errorf("machine: %s: node %d of %d is nil: %w", opt, k, len(ns), errs.ErrGraph)
			}
			if _, ok := p.at[n]; !ok {
				return fmt.Errorf("machine: %s: node %q is not in the graph (a node of another graph, or outside a subgraph's roots): %w", opt, n.Name(), errs.ErrGraph)
			}
			if !grad {
				continue
			}
			if d := n.Deriv(); d == nil {
				return fmt.Errorf("machine: %s: node %q has no gradient; differentiate with respect to it (gorgonia.Grad) first: %w", opt, n.Name(), errs.ErrGraph)
			} else if _, ok := p.at[d]; !ok {
				return fmt.Errorf("machine: %s: the gradient of node %q is not in the graph: %w", opt, n.Name(), errs.ErrGraph)
			}
		}
		return nil
	}
	if err := check("WithGrads", p.cfg.grads, true); err != nil {
		return err
	}
	return check("Keep", p.cfg.keep, false)
}

// choose decides how step s runs.
func (p *planner) choose(s *step) error {
	n, op := s.n, s.op
	if into, ok := readInto(op); ok {
		if len(s.args) != 1 {
			return fmt.Errorf("machine: read statement %q has %d inputs, want 1: %w", n.Name(), len(s.args), errs.ErrGraph)
		}
		s.kind, s.into = read, into
		return nil
	}
	switch graphop.TypeName(op) {
	case "gorgonia.letOp", "gorgonia.devTrans":
		return fmt.Errorf("machine: node %q: op %v (%s) is not supported; run the graph on a TapeMachine: %w", n.Name(), op, graphop.TypeName(op), errs.ErrGraph)
	}
	s.shape, s.dtype = n.Shape(), n.Dtype()
	if op == nil || op.Arity() == 0 {
		s.kind = input
		return nil
	}
	if op.Arity() >= 0 && len(s.args) != op.Arity() {
		return fmt.Errorf("machine: node %q (%v) has %d inputs, its op takes %d: %w", n.Name(), op, len(s.args), op.Arity(), errs.ErrGraph)
	}
	s.kind = do
	if !s.shape.IsScalar() && s.shape.TotalSize() == 0 {
		return nil // no buffer to plan: Do makes the empty value
	}
	if s.shape.IsScalar() && s.dtype != tensor.Float64 && s.dtype != tensor.Float32 {
		return nil
	}
	// This package's equivalents first: some of Gorgonia's UsePreallocDo
	// allocate on every call.
	if fn := adapt(s, p.argNodes(s)); fn != nil {
		s.kind, s.fn = adapted, fn
		return nil
	}
	if pre, ok := op.(gorgonia.UsePreallocDoer); ok {
		s.kind, s.pre = prealloc, pre
	}
	return nil
}

// argNodes returns the input nodes of s.
func (p *planner) argNodes(s *step) gorgonia.Nodes {
	ns := make(gorgonia.Nodes, len(s.args))
	for i, a := range s.args {
		ns[i] = p.nodes[a]
	}
	return ns
}

func (p *planner) find(i int) int {
	for p.group[i] != i {
		p.group[i] = p.group[p.group[i]]
		i = p.group[i]
	}
	return i
}

func (p *planner) union(a, b int) { p.group[p.find(a)] = p.find(b) }

// kept returns, for each step, whether its value must outlive the run:
// the forward pass, the roots, the gradients asked for, Keep's nodes.
func (p *planner) kept() []bool {
	backward := make([]bool, len(p.nodes))
	for i, n := range p.nodes {
		if n.Op() != nil && n.Op().Arity() > 0 && len(n.DerivOf()) > 0 {
			backward[i] = true
		}
	}
	for i := range p.nodes {
		if backward[i] {
			for _, u := range p.users[i] {
				backward[u] = true
			}
		}
	}
	keep := make([]bool, len(p.nodes))
	for i := range p.nodes {
		keep[i] = !backward[i] || len(p.users[i]) == 0
	}
	mark := func(n *gorgonia.Node) {
		if n == nil {
			return
		}
		if i, ok := p.at[n]; ok {
			keep[i] = true
		}
	}
	if p.cfg.gradsSet {
		for _, n := range p.cfg.grads {
			mark(n.Deriv())
		}
	} else {
		for _, n := range p.nodes {
			if n.Op() == nil {
				mark(n.Deriv())
			}
		}
	}
	for _, n := range p.cfg.keep {
		mark(n)
	}
	return keep
}

// buffers gives each prealloc and adapted step its buffer: a tensor's
// memory comes from a pool of the memory of values no step will read
// again, by dtype and length.
func (p *planner) buffers(m *Machine) {
	keep := p.kept()
	n := len(p.nodes)
	pinned := make([]bool, n)
	last := make([]int, n)
	for i := range last {
		last[i] = -1
	}
	for i := range p.nodes {
		m.steps[i].kept = keep[i]
		r := p.find(i)
		if keep[i] || m.steps[i].kind == input {
			pinned[r] = true
		}
		last[r] = max(last[r], i)
		for _, u := range p.users[i] {
			last[r] = max(last[r], u)
		}
	}
	ends := make([][]int, n)
	for r := range last {
		if p.find(r) == r && !pinned[r] {
			ends[last[r]] = append(ends[last[r]], r)
		}
	}
	type key struct {
		dt   tensor.Dtype
		size int
	}
	type buffer struct {
		k    key
		back any // the tensor's backing slice
	}
	pool := map[key][]any{}
	owned := make([][]buffer, n)
	for i := range m.steps {
		s := &m.steps[i]
		if s.kind == prealloc || s.kind == adapted {
			if s.shape.IsScalar() {
				if s.dtype == tensor.Float32 {
					s.buf = gorgonia.NewF32(0)
				} else {
					s.buf = gorgonia.NewF64(0)
				}
				m.stats.Buffers++
				m.stats.Bytes += int64(s.dtype.Size())
			} else {
				k := key{s.dtype, s.shape.TotalSize()}
				var back any
				if free := pool[k]; len(free) > 0 {
					back, pool[k] = free[len(free)-1], free[:len(free)-1]
				} else {
					back = tensor.New(tensor.Of(s.dtype), tensor.WithShape(k.size)).Data()
					m.stats.Buffers++
					m.stats.Bytes += int64(k.size) * int64(s.dtype.Size())
				}
				s.buf = tensor.New(tensor.WithShape(s.shape.Clone()...), tensor.WithBacking(back))
				r := p.find(i)
				owned[r] = append(owned[r], buffer{k, back})
			}
			m.stats.Unshared += int64(s.shape.TotalSize()) * int64(s.dtype.Size())
		}
		for _, r := range ends[i] {
			for _, b := range owned[r] {
				pool[b.k] = append(pool[b.k], b.back)
			}
		}
	}
}
