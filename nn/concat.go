package nn

import (
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
)

// opConcat names Concat in error messages.
const opConcat = "concat"

// Concat joins xs along axis (negative counts from the back), as
// torch.cat: every x has the first's rank, dtype and shape but on axis,
// and the output's size on axis is the sum of theirs. It computes what
// gorgonia.Concat computes, and its gradient gives each x its part of the
// output's gradient, copying runs of contiguous elements where Gorgonia's
// slices walk them one by one; the pooled bags and dense features of a
// recommendation model join this way before its top layers:
//
//	z, _ := nn.Concat(1, userBag, itemBag, dense) // [batch, d1+d2+d3]
//
// xs are float32 or float64 nodes; gradients flow to each, in both of
// Gorgonia's machines. It is O(size of the output) forward and backward.
func Concat(axis int, xs ...*gorgonia.Node) (*gorgonia.Node, error) {
	if len(xs) == 0 || xs[0] == nil {
		return nil, fmt.Errorf("%s: needs at least one node: %w", opConcat, gather.ErrShape)
	}
	dt, first := xs[0].Dtype(), xs[0].Shape()
	if err := operand.CheckFloat(opConcat, "xs", dt); err != nil {
		return nil, err
	}
	r := len(first)
	if r == 0 {
		return nil, fmt.Errorf("%s: xs must have rank >= 1, got a scalar: %w", opConcat, gather.ErrShape)
	}
	if axis < -r || axis >= r {
		return nil, fmt.Errorf("%s: axis %d is out of range [%d, %d] for rank %d: %w", opConcat, axis, -r, r-1, r, gather.ErrAxisOutOfRange)
	}
	if axis < 0 {
		axis += r
	}
	out := first.Clone()
	out[axis] = 0
	o := &concatOp{dtype: dt, outer: 1, inner: 1, axis: axis}
	for _, d := range first[:axis] {
		o.outer *= d
	}
	for _, d := range first[axis+1:] {
		o.inner *= d
	}
	var in []hm.Type
	for i, x := range xs {
		switch {
		case x == nil || len(x.Shape()) != r:
			return nil, fmt.Errorf("%s: xs[%d] is %v, want a node of rank %d: %w", opConcat, i, x, r, gather.ErrShape)
		case x.Dtype() != dt:
			return nil, fmt.Errorf("%s: xs[%d] is %v, xs[0] %v: all must be of one dtype: %w", opConcat, i, x.Dtype(), dt, gather.ErrDtype)
		}
		s := x.Shape()
		for k := range r {
			if k != axis && s[k] != first[k] {
				return nil, fmt.Errorf("%s: xs[%d] has shape %v, xs[0] %v: they may differ on axis %d only: %w", opConcat, i, s, first, axis, gather.ErrShape)
			}
		}
		o.shapes = append(o.shapes, s.Clone())
		o.widths = append(o.widths, s[axis]*o.inner)
		out[axis] += s[axis]
		in = append(in, operand.Type(r, dt))
	}
	o.shape = out
	if _, err := operand.Size(opConcat, "the output", out); err != nil {
		return nil, err
	}
	o.Diff = opkit.NewDiff(opkit.Sig{Name: fmt.Sprintf("Concat{axis=%d}", axis), In: in, Dtype: dt, Shape: out},
		opConcat, o.shapes, o.grad)
	return opkit.Apply(opConcat, o, xs...)
}

// concatOp is the op of Concat: each input, seen as [outer, width] (its
// size on the axis times the elements after it), is a band of columns of
// the output, seen as [outer, Σ width].
type concatOp struct {
	opkit.Diff
	dtype        tensor.Dtype
	shape        tensor.Shape   // the output's
	shapes       []tensor.Shape // the inputs'
	widths       []int
	outer, inner int
	axis         int // normalised
}

// ONNX returns the op as ONNX's Concat.
func (o *concatOp) ONNX() (string, map[string]int64) {
	return "Concat", map[string]int64{"axis": int64(o.axis)}
}

// Do concatenates the inputs into a new tensor.
func (o *concatOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	return o.UsePreallocDo(nil, in...)
}

// UsePreallocDo concatenates the inputs into prealloc when it can hold
// them (see operand.Prealloc), else into a new tensor.
func (o *concatOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity(opConcat, "", len(in), len(o.shapes)); err != nil {
		return nil, err
	}
	for i := range in {
		if _, err := readShaped(opConcat, "xs", in[i], o.dtype, o.shapes[i]); err != nil {
			// Again, naming the input: a name made only on error.
			_, err = readShaped(opConcat, fmt.Sprintf("xs[%d]", i), in[i], o.dtype, o.shapes[i])
			return nil, err
		}
	}
	out := operand.Prealloc(prealloc, o.dtype, o.shape, in)
	row, at := o.shape.TotalSize()/max(o.outer, 1), 0
	for i := range in {
		x, _ := readShaped(opConcat, "", in[i], o.dtype, o.shapes[i])
		w := o.widths[i]
		copyBand(out, x, o.outer, row, w, at, true)
		at += w
	}
	return out, nil
}

// grad returns the Run of the gradient of input i: its band of the
// upstream gradient, written or added into dst.
func (o *concatOp) grad(i int) opkit.Run {
	return func(dst *tensor.Dense, add bool, in []gorgonia.Value) error {
		if dst.Dtype() != o.dtype || !operand.SameShape(dst.Shape(), o.shapes[i]) || !operand.Writable(dst) {
			return fmt.Errorf("%s gradient: destination is %v of shape %v, want a row-major %v tensor of shape %v: %w",
				opConcat, dst.Dtype(), dst.Shape(), o.dtype, o.shapes[i], gather.ErrShape)
		}
		if err := operand.CheckArity(opConcat, " gradient", len(in), len(o.shapes)+1); err != nil {
			return err
		}
		g, err := readShaped(opConcat, "upstream gradient", in[len(o.shapes)], o.dtype, o.shape)
		if err != nil {
			return err
		}
		at := 0
		for _, w := range o.widths[:i] {
			at += w
		}
		row := o.shape.TotalSize() / max(o.outer, 1)
		if add {
			floatsFor(o.dtype).addBand(dst, g, o.outer, row, o.widths[i], at)
		} else {
			copyBand(g, dst, o.outer, row, o.widths[i], at, false)
		}
		return nil
	}
}

// copyBand copies between part, [outer, w], and the band of columns [at,
// at+w) of whole, [outer, row]: into whole with toWhole, else into part.
func copyBand(whole, part *tensor.Dense, outer, row, w, at int, toWhole bool) {
	size := int(whole.Dtype().Size())
	wb, pb := whole.Uint8s(), part.Uint8s()
	for k := range outer {
		ws, ps := wb[(k*row+at)*size:(k*row+at+w)*size], pb[k*w*size:(k+1)*w*size]
		if toWhole {
			copy(ws, ps)
		} else {
			copy(ps, ws)
		}
	}
}

var (
	_ gorgonia.SDOp = (*concatOp)(nil)
	_ gorgonia.ADOp = (*concatOp)(nil)
)
