package onnx

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/onnxpb"
	"github.com/gathergrad/gather/nn"
)

// A call is one node being built.
type call struct {
	b    *builder
	np   *onnxpb.NodeProto
	name string
	in   []*gorgonia.Node
	out  *tensor.Dense // a Constant's value
}

func (c *call) constOut() (*tensor.Dense, bool) { return c.out, c.out != nil }

// attr returns the attribute name, or nil.
func (c *call) attr(name string) *onnxpb.AttributeProto {
	for _, a := range c.np.GetAttribute() {
		if a.GetName() == name {
			return a
		}
	}
	return nil
}

// int returns the integer attribute name, or def.
func (c *call) int(name string, def int64) int64 {
	if a := c.attr(name); a != nil {
		return a.GetI()
	}
	return def
}

// float returns the float attribute name, or def.
func (c *call) float(name string, def float64) float64 {
	if a := c.attr(name); a != nil {
		return float64(a.GetF())
	}
	return def
}

// ints returns the integers attribute name, or nil.
func (c *call) ints(name string) []int64 {
	if a := c.attr(name); a != nil {
		return a.GetInts()
	}
	return nil
}

// constInts returns the integers of input k, which must be known when
// the graph is built (an initializer or a Constant), or an error naming
// what.
func (c *call) constInts(k int, what string) ([]int64, error) {
	v, ok := c.b.consts[c.np.GetInput()[k]]
	if !ok {
		return nil, fmt.Errorf("%s must be an initializer or a Constant: Import builds graphs of fixed shapes: %w", what, errs.ErrOption)
	}
	switch d := v.Data().(type) {
	case []int64:
		return d, nil
	case int64:
		return []int64{d}, nil
	case []int32:
		out := make([]int64, len(d))
		for i, x := range d {
			out[i] = int64(x)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s holds %v, not integers: %w", what, v.Dtype(), errs.ErrDtype)
}

// axis returns the attribute name, an axis of a tensor of rank r
// (negative counts from the end), or an error.
func (c *call) axis(name string, def int64, r int) (int, error) {
	a := c.int(name, def)
	if r == 0 && a == 0 {
		return 0, nil // a scalar input takes axis 0 alone; the op then says what it makes of it
	}
	return normAxis(name, a, r)
}

// normAxis returns a, what's axis of a tensor of rank r, in [0, r):
// negative counts from the end; another is an error.
func normAxis(what string, a int64, r int) (int, error) {
	if a < -int64(r) || a >= int64(r) {
		return 0, fmt.Errorf("%s %d for rank %d: %w", what, a, r, errs.ErrAxisOutOfRange)
	}
	if a < 0 {
		a += int64(r)
	}
	return int(a), nil
}

// scalar returns a scalar node of x's dtype holding v.
func (c *call) scalar(x *gorgonia.Node, v float64) *gorgonia.Node {
	if x.Dtype() == tensor.Float32 {
		return gorgonia.NewConstant(float32(v))
	}
	return gorgonia.NewConstant(v)
}

// isOne reports whether v is exactly 1.
func isOne(v float64) bool { return v == 1 && !math.Signbit(v) }

// Ops returns the operators Import reads, sorted.
func Ops() []string {
	out := make([]string, 0, len(ops))
	for k := range ops {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// bag reads the last node of a bag's composition that Export wrote, whose
// doc string doc describes it, as nn.EmbeddingBag of its inputs.
func (b *builder) bag(np *onnxpb.NodeProto, doc string) error {
	var d bagDoc
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return fmt.Errorf("onnx: node %q describes a bag that is not one: %v: %w", np.GetName(), err, checkpoint.ErrFormat)
	}
	s := d.Spec
	want := 2
	if s.Offsets {
		want++
	}
	if s.Weights {
		want++
	}
	if len(d.Inputs) != want || len(np.GetOutput()) != 1 || s.Mode < int(nn.BagSum) || s.Mode > int(nn.BagMax) {
		return fmt.Errorf("onnx: node %q describes a bag of %d inputs, mode %d: %w", np.GetName(), len(d.Inputs), s.Mode, checkpoint.ErrFormat)
	}
	in := make([]*gorgonia.Node, 4) // table, ids, offsets, weights
	k := 0
	for i, has := range []bool{true, true, s.Offsets, s.Weights} {
		if !has {
			continue
		}
		n, ok := b.values[d.Inputs[k]]
		if !ok {
			return fmt.Errorf("onnx: node %q: the bag's input %q is defined by no earlier node: %w", np.GetName(), d.Inputs[k], checkpoint.ErrFormat)
		}
		if _, sparse := b.sparse[n]; sparse {
			return fmt.Errorf("onnx: node %q: a bag reads %q, a sparse table (Options.Sparse), which only Gather's data may be: %w", np.GetName(), d.Inputs[k], errs.ErrOption)
		}
		in[i], k = n, k+1
	}
	var opts []nn.EmbeddingBagOption
	if s.HasPad {
		opts = append(opts, nn.WithPadding(s.Pad))
	}
	if s.LastOffset {
		opts = append(opts, nn.WithIncludeLastOffset())
	}
	out, err := nn.EmbeddingBag(in[0], in[1], in[2], in[3], nn.BagMode(s.Mode), opts...)
	if err != nil {
		return fmt.Errorf("onnx: node %q: %w", np.GetName(), err)
	}
	if _, dup := b.values[np.GetOutput()[0]]; dup {
		return fmt.Errorf("onnx: node %q: its output %q is defined twice: %w", np.GetName(), np.GetOutput()[0], checkpoint.ErrFormat)
	}
	b.values[np.GetOutput()[0]] = out
	return nil
}
