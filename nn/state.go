package nn

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
)

// State returns the table under "<name>.weight", the key PyTorch's
// nn.Embedding uses in a state dict: with it an *Embedding is a
// checkpoint.Part, saved by checkpoint.Save and restored by
// checkpoint.Load. The tensor is the table itself, not a copy.
func (e *Embedding) State() (map[string]tensor.Tensor, error) {
	t, err := e.table()
	if err != nil {
		return nil, err
	}
	return map[string]tensor.Tensor{e.Table.Name() + ".weight": t}, nil
}

// SetState copies the table checkpoint.Load read into the embedding's
// table, in place, so that graphs and machines built on it see the new
// values.
func (e *Embedding) SetState(tensors map[string]*tensor.Dense) error {
	t, err := e.table()
	if err != nil {
		return err
	}
	key := e.Table.Name() + ".weight"
	if err := checkpoint.CopyInto(t, tensors[key]); err != nil {
		return fmt.Errorf("embedding %q: %w", e.Table.Name(), err)
	}
	return nil
}

// table returns the table's value.
func (e *Embedding) table() (*tensor.Dense, error) {
	if e.closed {
		return nil, fmt.Errorf("embedding %q: %w", e.Table.Name(), ErrClosed)
	}
	t, ok := e.Table.Value().(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("embedding %q: the table holds a %T: %w", e.Table.Name(), e.Table.Value(), gather.ErrDtype)
	}
	return t, nil
}

// OptimizerState returns the state of opt for the table of emb as a
// checkpoint.Part, so that checkpoint.Save keeps it and checkpoint.Load
// restores it for an exact resume. Its tensors' names begin with the
// table's name:
//
//	SparseSGD:      none (it keeps no state)
//	SparseAdam:     "<name>.exp_avg", "<name>.exp_avg_sq" (the moments, the table's shape and dtype), "<name>.step" (I64 scalar)
//	RowWiseAdagrad: "<name>.sum" (one value per row, the table's dtype)
//
// An optimiser not yet stepped saves zero moments and step 0, which is the
// state it starts from; Load binds a fresh one to emb's table. An
// optimiser bound to another table is an error wrapping ErrOtherTable, as
// is any optimiser type this package does not know (ErrOption).
func OptimizerState(emb *Embedding, opt SparseOptimizer) checkpoint.Part {
	return optimizerState{emb: emb, opt: opt}
}

// An optimizerState is the Part of OptimizerState.
type optimizerState struct {
	emb *Embedding
	opt SparseOptimizer
}

// A stateful optimiser saves and restores its state for a table.
type stateful interface {
	state(name string, table *tensor.Dense) (map[string]tensor.Tensor, error)
	setState(name string, table *tensor.Dense, tensors map[string]*tensor.Dense) error
}

func (s optimizerState) State() (map[string]tensor.Tensor, error) {
	if s.emb == nil || s.opt == nil {
		return nil, fmt.Errorf("optimizer state: needs an embedding and an optimiser: %w", gather.ErrOption)
	}
	table, err := s.emb.table()
	if err != nil {
		return nil, err
	}
	switch o := s.opt.(type) {
	case *SparseSGD:
		return map[string]tensor.Tensor{}, nil
	case stateful:
		return o.state(s.emb.Table.Name(), table)
	}
	return nil, fmt.Errorf("embedding %q: OptimizerState does not know the optimiser %T: %w", s.emb.Table.Name(), s.opt, gather.ErrOption)
}

func (s optimizerState) SetState(tensors map[string]*tensor.Dense) error {
	table, err := s.emb.table()
	if err != nil {
		return err
	}
	if o, ok := s.opt.(stateful); ok {
		return o.setState(s.emb.Table.Name(), table, tensors)
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
