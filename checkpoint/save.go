package checkpoint

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/shapes"
)

// A Part is a piece of a model with named state: Save writes its tensors,
// Load restores them. Package nn's *Embedding (its table, under
// "<name>.weight") and optim.State are Parts, and so is Nodes.
type Part interface {
	// State returns the part's tensors by name, as they are now. Save
	// writes them; Load reads a tensor of each name and checks its shape
	// and dtype against them.
	State() (map[string]tensor.Tensor, error)
	// SetState copies tensors into the part: Load calls it once every
	// part's tensors are in the file with the right shapes and dtypes,
	// with exactly the names State returned.
	SetState(tensors map[string]*tensor.Dense) error
}

// Save writes the state of parts, and meta, to path with Write: one
// safetensors file, written atomically. Two parts that name one tensor are
// an ErrOption error, and then nothing is written.
func Save(path string, meta map[string]string, parts ...Part) error {
	all, _, err := states(parts)
	if err != nil {
		return err
	}
	return Write(path, all, meta)
}

// states returns the tensors of all parts, and each part's.
func states(parts []Part) (map[string]tensor.Tensor, []map[string]tensor.Tensor, error) {
	all := map[string]tensor.Tensor{}
	each := make([]map[string]tensor.Tensor, len(parts))
	for i, p := range parts {
		if p == nil {
			return nil, nil, fmt.Errorf("checkpoint: part %d is nil: %w", i, gather.ErrOption)
		}
		st, err := p.State()
		if err != nil {
			return nil, nil, err
		}
		for name, t := range st {
			if _, dup := all[name]; dup {
				return nil, nil, fmt.Errorf("checkpoint: two parts hold a tensor named %q: %w", name, gather.ErrOption)
			}
			all[name] = t
		}
		each[i] = st
	}
	return all, each, nil
}

// Load restores parts from the file at path, which Save (or Write, or
// another safetensors writer) made, and returns its metadata. Every part
// is checked before any changes: each of its tensors must be in the file
// with the same shape and dtype (no conversion, F16 to float32 included),
// and every tensor of the file must belong to a part. A missing, unknown,
// misshapen or mistyped tensor is an error wrapping ErrFormat that names
// it, and a malformed file is one too (see Read); on any error the parts
// are exactly as they were.
func Load(path string, parts ...Part) (map[string]string, error) {
	_, each, err := states(parts)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, meta, dataStart, err := readHeader(f, path)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]entry, len(entries))
	for _, e := range entries {
		byName[e.name] = e
	}
	var missing, wrong []string
	claimed := map[string]bool{}
	for _, st := range each {
		for name, t := range st {
			claimed[name] = true
			e, ok := byName[name]
			if !ok {
				missing = append(missing, name)
				continue
			}
			want, ok := formatOf(t.Dtype())
			if !ok || want.name != e.format.name || !shapes.SameShape(e.shape, t.Shape()) {
				wrong = append(wrong, fmt.Sprintf("%s is %s of shape %v in the file, %v of shape %v in the model", name, e.format.name, e.shape, t.Dtype(), t.Shape()))
			}
		}
	}
	var unknown []string
	for _, e := range entries {
		if !claimed[e.name] {
			unknown = append(unknown, e.name)
		}
	}
	slices.Sort(missing)
	slices.Sort(unknown)
	slices.Sort(wrong)
	switch {
	case len(missing) > 0:
		return nil, formatError(path, "missing %s", strings.Join(quoted(missing), ", "))
	case len(wrong) > 0:
		return nil, formatError(path, "%s", strings.Join(wrong, "; "))
	case len(unknown) > 0:
		return nil, formatError(path, "tensors no part holds: %s", strings.Join(quoted(unknown), ", "))
	}
	// Everything fits: read each part's tensors, then hand them over.
	read := make([]map[string]*tensor.Dense, len(parts))
	for i, st := range each {
		read[i] = make(map[string]*tensor.Dense, len(st))
		for name := range st {
			t, err := readTensor(f, dataStart, byName[name])
			if err != nil {
				return nil, fmt.Errorf("checkpoint: %s: tensor %q: %w", path, name, err)
			}
			read[i][name] = t
		}
	}
	for i, p := range parts {
		if err := p.SetState(read[i]); err != nil {
			return nil, err
		}
	}
	return meta, nil
}

func quoted(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

// Nodes returns a Part of dense learnables (weights, biases), each under
// its node's name. Load copies into each node's value in place, so a
// machine built on the graph keeps working with the restored values. Each
// node must have a value: a *tensor.Dense, or a float scalar.
func Nodes(nodes ...*gorgonia.Node) Part { return nodesPart(nodes) }

type nodesPart []*gorgonia.Node

func (p nodesPart) State() (map[string]tensor.Tensor, error) {
	out := make(map[string]tensor.Tensor, len(p))
	for i, n := range p {
		if n == nil {
			return nil, fmt.Errorf("checkpoint: node %d is nil: %w", i, gather.ErrShape)
		}
		if _, dup := out[n.Name()]; dup {
			return nil, fmt.Errorf("checkpoint: two nodes are named %q: %w", n.Name(), gather.ErrOption)
		}
		switch v := n.Value().(type) {
		case *tensor.Dense:
			out[n.Name()] = v
		case gorgonia.Scalar:
			out[n.Name()] = tensor.New(tensor.FromScalar(v.Data()))
		default:
			return nil, fmt.Errorf("checkpoint: node %q has no tensor value (%T): %w", n.Name(), n.Value(), gather.ErrShape)
		}
	}
	return out, nil
}

func (p nodesPart) SetState(tensors map[string]*tensor.Dense) error {
	for _, n := range p {
		t := tensors[n.Name()]
		switch v := n.Value().(type) {
		case *tensor.Dense:
			if err := CopyInto(v, t); err != nil {
				return fmt.Errorf("checkpoint: node %q: %w", n.Name(), err)
			}
		case gorgonia.Scalar:
			var s gorgonia.Value
			switch x := t.Data().(type) {
			case float64:
				s = gorgonia.NewF64(x)
			case float32:
				s = gorgonia.NewF32(x)
			default:
				return fmt.Errorf("checkpoint: node %q: a scalar of %v: %w", n.Name(), t.Dtype(), gather.ErrDtype)
			}
			if err := gorgonia.Let(n, s); err != nil {
				return fmt.Errorf("checkpoint: node %q: %v: %w", n.Name(), err, gather.ErrGraph)
			}
		}
	}
	return nil
}

// CopyInto copies the values of src into dst, in place: both of one dtype
// and shape, dst row-major and not a view. Parts use it in SetState.
func CopyInto(dst, src *tensor.Dense) error {
	if dst == nil || src == nil {
		return fmt.Errorf("checkpoint: copy into or from nil: %w", gather.ErrShape)
	}
	if dst.Dtype() != src.Dtype() || !shapes.SameShape(dst.Shape(), src.Shape()) {
		return fmt.Errorf("checkpoint: copying %v of shape %v into %v of shape %v: %w", src.Dtype(), src.Shape(), dst.Dtype(), dst.Shape(), gather.ErrShape)
	}
	if !operand.Writable(dst) {
		return fmt.Errorf("checkpoint: the destination of shape %v is a view or not row-major: %w", dst.Shape(), gather.ErrShape)
	}
	s, err := operand.Read("checkpoint", "tensor", src)
	if err != nil {
		return err
	}
	n := len(s.Header.Raw)
	if m := len(dst.Header.Raw); m < n {
		n = m
	}
	copy(dst.Header.Raw[:n], s.Header.Raw[:n])
	return nil
}
