package optim

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
)

// A Param is a table an optimiser's state belongs to: an *nn.Embedding.
// Name is the table's name, which the state's tensors' names begin with;
// Weight returns the table itself (an error once the table is closed).
type Param interface {
	Name() string
	Weight() (*tensor.Dense, error)
}

// State returns the state of opt for the table p as a
// checkpoint.Part, so that checkpoint.Save keeps it and checkpoint.Load
// restores it for an exact resume. Its tensors' names begin with the
// table's name:
//
//	SparseSGD:      none (it keeps no state)
//	SparseAdam:     "<name>.exp_avg", "<name>.exp_avg_sq" (the moments, the table's shape and dtype), "<name>.step" (I64 scalar)
//	RowWiseAdagrad: "<name>.sum" (one value per row, the table's dtype)
//
// An optimiser not yet stepped saves zero moments and step 0, which is the
// state it starts from; Load binds a fresh one to p's table. An
// optimiser bound to another table is an error wrapping ErrOtherTable, as
// is any optimiser type this package does not know (ErrOption).
func State(p Param, opt Sparse) checkpoint.Part {
	return optimizerState{p: p, opt: opt}
}

// An optimizerState is the Part of State.
type optimizerState struct {
	p   Param
	opt Sparse
}

// A stateful optimiser saves and restores its state for a table.
type stateful interface {
	state(name string, table *tensor.Dense) (map[string]tensor.Tensor, error)
	setState(name string, table *tensor.Dense, tensors map[string]*tensor.Dense) error
}

func (s optimizerState) State() (map[string]tensor.Tensor, error) {
	if s.p == nil || s.opt == nil {
		return nil, fmt.Errorf("optimizer state: needs a table and an optimiser: %w", gather.ErrOption)
	}
	table, err := s.p.Weight()
	if err != nil {
		return nil, err
	}
	switch o := s.opt.(type) {
	case *SparseSGD:
		return map[string]tensor.Tensor{}, nil
	case stateful:
		return o.state(s.p.Name(), table)
	}
	return nil, fmt.Errorf("table %q: State does not know the optimiser %T: %w", s.p.Name(), s.opt, gather.ErrOption)
}

func (s optimizerState) SetState(tensors map[string]*tensor.Dense) error {
	if s.p == nil || s.opt == nil {
		return fmt.Errorf("optimizer state: needs a table and an optimiser: %w", gather.ErrOption)
	}
	table, err := s.p.Weight()
	if err != nil {
		return err
	}
	if o, ok := s.opt.(stateful); ok {
		return o.setState(s.p.Name(), table, tensors)
	}
	return nil
}

// state returns Adam's moments and step count for table; the moments are
// zeros before the first Step.
func (o *SparseAdam) state(name string, table *tensor.Dense) (map[string]tensor.Tensor, error) {
	if o.table != 0 && o.table != table.Uintptr() {
		return nil, fmt.Errorf("sparse adam: its state belongs to another table than %q: %w", name, ErrOtherTable)
	}
	m, v := o.m, o.v
	if m == nil {
		n := table.Shape().TotalSize()
		m, v = zeros(table.Dtype(), n), zeros(table.Dtype(), n)
	}
	shape := table.Shape().Clone()
	return map[string]tensor.Tensor{
		name + ".exp_avg":    tensor.New(tensor.WithShape(shape...), tensor.WithBacking(m)),
		name + ".exp_avg_sq": tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v)),
		name + ".step":       tensor.New(tensor.FromScalar(int64(o.t))),
	}, nil
}

// setState binds o to table with the moments and step count given.
func (o *SparseAdam) setState(name string, table *tensor.Dense, tensors map[string]*tensor.Dense) error {
	step, ok := tensors[name+".step"].Data().(int64)
	if !ok || step < 0 {
		return fmt.Errorf("sparse adam: step %v of %q is not a count: %w", tensors[name+".step"].Data(), name, checkpoint.ErrFormat)
	}
	m, v := tensors[name+".exp_avg"].Data(), tensors[name+".exp_avg_sq"].Data()
	o.m, o.v, o.t, o.table = m, v, int(step), table.Uintptr()
	return nil
}
