package optim

import (
	"fmt"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
)

// A Param is a table an optimiser's state belongs to: an *nn.Embedding.
// Name is the table's name, which the state's tensors' names begin with;
// Rows returns the table with opt's state and its step count (an error
// once the table is closed, or for a table whose rows live in a store,
// which keeps the state with them).
type Param interface {
	Name() string
	Rows(opt Sparse) (*MemoryTable, error)
}

// State returns the state of opt for the table p as a checkpoint.Part,
// so that checkpoint.Save keeps it and checkpoint.Load restores it for an
// exact resume. Its tensors are PyTorch's: each column of opt.Columns
// under "<name>.<column>", of shape [vocab, width] ([vocab] for a column
// one value wide), and the step count under "<name>.step" (an I64 scalar):
//
//	SparseSGD:      none (it keeps no state)
//	SparseAdam:     "<name>.exp_avg", "<name>.exp_avg_sq", "<name>.step"
//	SparseAdagrad:  "<name>.sum", "<name>.step"
//	RowWiseAdagrad: "<name>.sum" ([vocab]; its steps are not counted)
//
// A table not yet stepped saves its state's Init values and step 0,
// which is the state it starts from.
func State(p Param, opt Sparse) checkpoint.Part {
	return optimizerState{p: p, opt: opt}
}

// An optimizerState is the Part of State.
type optimizerState struct {
	p   Param
	opt Sparse
}

// table returns the table of s and the name of its step count's tensor,
// "" for none.
func (s optimizerState) table() (*MemoryTable, string, error) {
	if s.p == nil || s.opt == nil {
		return nil, "", fmt.Errorf("optimizer state: needs a table and an optimiser: %w", errs.ErrOption)
	}
	t, err := s.p.Rows(s.opt)
	if err != nil {
		return nil, "", err
	}
	step := s.p.Name() + ".step"
	if _, ok := s.opt.(interface{ stepless() }); ok || len(t.State) == 0 {
		step = ""
	}
	return t, step, nil
}

func (s optimizerState) State() (map[string]tensor.Tensor, error) {
	t, step, err := s.table()
	if err != nil {
		return nil, err
	}
	out := map[string]tensor.Tensor{}
	for k, c := range s.opt.Columns(t.Weight.Shape()[1]) {
		out[s.p.Name()+"."+c.Name] = saved(c, t.State[k])
	}
	if step != "" {
		out[step] = tensor.New(tensor.FromScalar(t.steps))
	}
	return out, nil
}

func (s optimizerState) SetState(tensors map[string]*tensor.Dense) error {
	t, step, err := s.table()
	if err != nil {
		return err
	}
	var steps int64
	if step != "" {
		n, ok := tensors[step].Data().(int64)
		if !ok || n < 0 {
			return fmt.Errorf("table %q: step %v is not a count: %w", s.p.Name(), tensors[step].Data(), checkpoint.ErrFormat)
		}
		steps = n
	}
	cols := s.opt.Columns(t.Weight.Shape()[1])
	for k, c := range cols {
		src := tensors[s.p.Name()+"."+c.Name]
		if src == nil || src.Shape().TotalSize() != t.State[k].Shape().TotalSize() {
			return fmt.Errorf("table %q: no state %q of %v: %w", s.p.Name(), c.Name, t.State[k].Shape(), checkpoint.ErrFormat)
		}
	}
	for k, c := range cols {
		src := tensors[s.p.Name()+"."+c.Name]
		if err := checkpoint.CopyInto(saved(c, t.State[k]), src); err != nil {
			return fmt.Errorf("table %q: %w", s.p.Name(), err)
		}
	}
	t.steps = steps
	return nil
}

// saved returns the state st of the column c as a checkpoint holds it:
// itself, or, for a column one value wide, a [vocab] view of its memory
// (PyTorch's shape for a row-wise accumulator).
func saved(c driver.Column, st *tensor.Dense) *tensor.Dense {
	if c.Width != 1 {
		return st
	}
	return tensor.New(tensor.WithShape(st.Shape()[0]), tensor.WithBacking(st.Data()))
}
