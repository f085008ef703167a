package optim

import (
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
)

// DenseState returns the checkpoint.Part of opt's state for the
// learnables nodes, under name: its step count as "<name>.step" (an int64
// scalar) and each node's state as "<name>.<node>.<kind>", with PyTorch's
// kinds (SGD: momentum_buffer; Adam: exp_avg, exp_avg_sq; Adagrad: sum).
// Before a node's first step its state is zeros, which is also what a
// fresh optimiser starts from, so a checkpoint taken at any point
// restores it exactly:
//
//	parts := []checkpoint.Part{checkpoint.Nodes(w, b), optim.DenseState("mlp", adam, w, b)}
//	checkpoint.Save(path, meta, parts...)
//	checkpoint.Load(path, parts...) // in a new process: adam steps on as if never stopped
func DenseState(name string, opt Dense, nodes ...*gorgonia.Node) checkpoint.Part {
	return denseState{name: name, opt: opt, nodes: nodes}
}

type denseState struct {
	name  string
	opt   Dense
	nodes []*gorgonia.Node
}

func (d denseState) check() (*slots, error) {
	if d.opt == nil || d.name == "" {
		return nil, fmt.Errorf("dense optimiser state: needs a name and an optimiser: %w", gather.ErrOption)
	}
	return d.opt.slots(), nil
}

func (d denseState) State() (map[string]tensor.Tensor, error) {
	s, err := d.check()
	if err != nil {
		return nil, err
	}
	out := map[string]tensor.Tensor{d.name + ".step": tensor.New(tensor.FromScalar(int64(s.step)))}
	for i, n := range d.nodes {
		if n == nil {
			return nil, fmt.Errorf("dense optimiser state %q: node %d is nil: %w", d.name, i, gather.ErrShape)
		}
		w, ok := n.Value().(*tensor.Dense)
		if !ok {
			return nil, fmt.Errorf("dense optimiser state %q: node %q holds no tensor: %w", d.name, n.Name(), gather.ErrShape)
		}
		st := s.of(learnable{name: n.Name(), w: w})
		for k, kind := range s.kinds {
			out[d.name+"."+n.Name()+"."+kind] = st[k]
		}
	}
	return out, nil
}

func (d denseState) SetState(tensors map[string]*tensor.Dense) error {
	s, err := d.check()
	if err != nil {
		return err
	}
	step, ok := tensors[d.name+".step"]
	if !ok {
		return fmt.Errorf("dense optimiser state %q: no step count: %w", d.name, checkpoint.ErrMismatch)
	}
	n, ok := step.Data().(int64)
	if !ok || n < 0 {
		return fmt.Errorf("dense optimiser state %q: step %v is not a count: %w", d.name, step.Data(), checkpoint.ErrFormat)
	}
	by := make(map[string][]*tensor.Dense, len(d.nodes))
	for _, node := range d.nodes {
		st := make([]*tensor.Dense, len(s.kinds))
		for k, kind := range s.kinds {
			t, ok := tensors[d.name+"."+node.Name()+"."+kind]
			if !ok {
				return fmt.Errorf("dense optimiser state %q: no %s for %q: %w", d.name, kind, node.Name(), checkpoint.ErrMismatch)
			}
			st[k] = t.Clone().(*tensor.Dense)
		}
		by[node.Name()] = st
	}
	s.step, s.by = int(n), by
	return nil
}
