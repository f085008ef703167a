package nn

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/table"
)

// State returns the table under "<name>.weight", the key PyTorch's
// nn.Embedding uses in a state dict: with it an *Embedding is a
// checkpoint.Part, saved by checkpoint.Save and restored by
// checkpoint.Load. The tensor is the table itself, not a copy.
func (e *Embedding) State() (map[string]tensor.Tensor, error) {
	t, err := e.Weight()
	if err != nil {
		return nil, err
	}
	return map[string]tensor.Tensor{e.Table.Name() + ".weight": t}, nil
}

// SetState copies the table checkpoint.Load read into the embedding's
// table, in place, so that graphs and machines built on it see the new
// values.
func (e *Embedding) SetState(tensors map[string]*tensor.Dense) error {
	t, err := e.Weight()
	if err != nil {
		return err
	}
	key := e.Table.Name() + ".weight"
	if err := checkpoint.CopyInto(t, tensors[key]); err != nil {
		return fmt.Errorf("embedding %q: %w", e.Table.Name(), err)
	}
	return nil
}

// Name returns the table's name, which its checkpoint keys and its
// optimiser state's keys begin with.
func (e *Embedding) Name() string { return e.Table.Name() }

// Weight returns the table's value, the [vocab, dim] tensor itself
// (PyTorch's emb.weight): writes to it change the table. After Close it
// is an error wrapping table.ErrClosed.
func (e *Embedding) Weight() (*tensor.Dense, error) {
	if e.closed {
		return nil, fmt.Errorf("embedding %q: %w", e.Table.Name(), table.ErrClosed)
	}
	t, ok := e.Table.Value().(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("embedding %q: the table holds a %T: %w", e.Table.Name(), e.Table.Value(), gather.ErrDtype)
	}
	return t, nil
}
