package nn

import (
	"fmt"
	"slices"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
	"github.com/gathergrad/gather/internal/parallel"
	"github.com/gathergrad/gather/table"
)

// collectionOp is the op of Collection.Bag: values, offsets, weights (if
// weighted) and the tap in, [batch, width] out. Its gradient with respect
// to the tap is a collCaptureOp of the output's.
type collectionOp struct {
	passGrad
	c        *Collection
	batch    int
	shape    tensor.Shape
	weighted bool

	run collRun // a run's work on the features
}

// Do pools into a new tensor.
func (o *collectionOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) { return o.do(nil, in) }

// UsePreallocDo pools into prealloc when it can hold the result.
func (o *collectionOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	out, ok := prealloc.(*tensor.Dense)
	if !ok || out.Dtype() != o.c.dtype || !operand.SameShape(out.Shape(), o.shape) || !operand.Writable(out) {
		out = nil
	}
	for _, v := range in {
		if out != nil && overlapsValue(out, v) {
			out = nil
		}
	}
	return o.do(out, in)
}

// do checks the run's input, brings each table's rows where it reads
// them and pools every feature into out (new if nil).
func (o *collectionOp) do(out *tensor.Dense, in []gorgonia.Value) (gorgonia.Value, error) {
	c := o.c
	if err := operand.CheckArity("collection", "", len(in), o.Arity()); err != nil {
		return nil, err
	}
	values, offsets, wv, err := o.read(in)
	if err != nil {
		return nil, err
	}
	// Each group's ids, checked, and their rows.
	for _, g := range c.groups {
		if g.e.closed {
			return nil, fmt.Errorf("collection: table %q: the graph ran after Close: %w", g.e.Name(), table.ErrClosed)
		}
		g.ids = g.ids[:0]
		vocab := g.e.home.Vocab()
		for _, k := range g.feats {
			f := &c.feats[k]
			lo, hi := int(offsets[k*o.batch]), int(offsets[(k+1)*o.batch])
			f.lo = len(g.ids)
			for p, id := range values[lo:hi] {
				if id < 0 || id >= int64(vocab) {
					return nil, &errs.IndexError{Op: "collection", Name: g.e.Name(), Arg: fmt.Sprintf("values (feature %q)", f.key),
						Pos: []int{lo + p}, Value: id, Size: vocab, NonNegative: true}
				}
			}
			g.ids = append(g.ids, values[lo:hi]...)
		}
		if err := g.fetch(); err != nil {
			return nil, err
		}
	}
	if out == nil {
		out = operand.NewOutput(c.dtype, o.shape)
	}
	o.features(collRun{o: o, offsets: offsets, weights: wv, out: out})
	return out, nil
}

// read reads and checks the run's values, offsets and weights.
func (o *collectionOp) read(in []gorgonia.Value) (values, offsets []int64, weights *tensor.Dense, err error) {
	v, err := operand.Read("collection", "values", in[0])
	if err != nil {
		return nil, nil, nil, err
	}
	off, err := operand.Read("collection", "offsets", in[1])
	if err != nil {
		return nil, nil, nil, err
	}
	if v.Dtype() != tensor.Int64 || off.Dtype() != tensor.Int64 || off.Shape().TotalSize() != len(o.c.feats)*o.batch+1 {
		return nil, nil, nil, fmt.Errorf("collection: values (%v) and offsets (%v %v) must be Int64, offsets of %d entries: %w",
			v.Dtype(), off.Dtype(), off.Shape(), len(o.c.feats)*o.batch+1, gather.ErrShape)
	}
	values, offsets = v.Int64s(), off.Int64s()
	if offsets[0] != 0 {
		return nil, nil, nil, fmt.Errorf("collection: offsets[0] is %d, want 0: %w", offsets[0], gather.ErrShape)
	}
	for k := 1; k < len(offsets); k++ {
		if offsets[k] < offsets[k-1] || offsets[k] > int64(len(values)) {
			return nil, nil, nil, fmt.Errorf("collection: offsets[%d] = %d is below offsets[%d] = %d or past the %d values: %w",
				k, offsets[k], k-1, offsets[k-1], len(values), gather.ErrShape)
		}
	}
	if o.weighted {
		if weights, err = operand.Read("collection", "weights", in[2]); err != nil {
			return nil, nil, nil, err
		}
		if weights.Dtype() != o.c.dtype || weights.Shape().TotalSize() != len(values) {
			return nil, nil, nil, fmt.Errorf("collection: weights are %v of shape %v, want %v of %d: %w",
				weights.Dtype(), weights.Shape(), o.c.dtype, len(values), gather.ErrShape)
		}
	}
	return values, offsets, weights, nil
}

// fetch sets g.rows to the rows of its home's tensor that g.ids name: the
// ids themselves, or, in a cache, the slots the rows are brought to (one
// fetch for all the table's features, which starts the cache's batch).
func (g *collGroup) fetch() error {
	rows, err := g.e.home.rowsOf(g.ids, g.rows)
	g.rows = rows
	if err != nil {
		return fmt.Errorf("collection: table %q: %w", g.e.Name(), err)
	}
	return nil
}

// featureBags returns feature k's bags over its ids (in its bounds).
func (o *collectionOp) featureBags(k int, offsets []int64) kernel.Bags {
	f := &o.c.feats[k]
	base := offsets[k*o.batch]
	f.bounds = slices.Grow(f.bounds[:0], o.batch+1)[:o.batch+1]
	for b := range o.batch + 1 {
		f.bounds[b] = int(offsets[k*o.batch+b] - base)
	}
	return kernel.Bags{Bounds: f.bounds, Pad: f.group.pad, Mode: f.mode}
}

// collRun is a run's work on the features, split across goroutines by
// feature (parallel.Run): pooling them (grad nil) or, in the backward
// pass, the gradient each of their ids received.
type collRun struct {
	o       *collectionOp
	offsets []int64
	weights *tensor.Dense
	out     *tensor.Dense // pooling: the output
	grad    *tensor.Dense // the backward pass: the output's gradient
}

func (r *collRun) Part(lo, hi int) int {
	for k := lo; k < hi; k++ {
		if r.grad == nil {
			operand.PickFloat(r.o.c.dtype, collPool[float32], collPool[float64])(r, k)
		} else if !r.o.c.feats[k].group.e.cfg.frozen {
			operand.PickFloat(r.o.c.dtype, captureFeature[float32], captureFeature[float64])(r, k)
		}
	}
	return -1
}

// features runs r on every feature.
func (o *collectionOp) features(r collRun) {
	o.run = r
	parallel.Run(len(o.c.feats), o.batch*o.c.width, &o.run)
	o.run = collRun{}
}

// weightsOf returns feature k's weights (nil without), n of them.
func weightsOf[T kernel.Float](wt *tensor.Dense, offsets []int64, k, batch, n int) []T {
	if wt == nil {
		return nil
	}
	return operand.Floats[T](wt)[offsets[k*batch]:][:n]
}

// collPool pools feature k into its columns of the output.
func collPool[T kernel.Float](r *collRun, k int) {
	o := r.o
	c, dst := o.c, operand.Floats[T](r.out)
	f := &c.feats[k]
	g := f.group
	bg := o.featureBags(k, r.offsets)
	bg.Stride = c.width
	n := bg.Bounds[o.batch]
	kernel.BagPool(dst[f.col:], operand.Floats[T](g.e.home.rowTensor()), g.rows[f.lo:f.lo+n], weightsOf[T](r.weights, r.offsets, k, o.batch, n), f.dim, &bg)
}

// SymDiff gives the tap a collCaptureOp of the output's gradient.
func (o *collectionOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if err := errs.CheckGradSize(o.what, grad); err != nil {
		return nil, err
	}
	inputs = append(gorgonia.Nodes{grad}, inputs[:len(inputs)-1]...)
	types := make([]hm.Type, len(inputs))
	for k, n := range inputs {
		types[k] = n.Type()
	}
	op := &collCaptureOp{o: o, Op: opkit.New(opkit.Sig{Name: "CollectionCapture", PassThrough: true, In: types, Dtype: o.c.dtype, Shape: o.shape}, fmt.Sprintf("%p", o))}
	n, err := gorgonia.ApplyOp(op, inputs...)
	if err != nil {
		return nil, fmt.Errorf("collection: %w", errs.Graph(err))
	}
	out := make(gorgonia.Nodes, len(inputs))
	out[len(out)-1] = n
	return out, nil
}

// DoDiff captures the gradient, for Gorgonia's LispMachine.
func (o *collectionOp) DoDiff(ctx gorgonia.ExecutionContext, inputs gorgonia.Nodes, output *gorgonia.Node) error {
	if err := o.passGrad.DoDiff(ctx, inputs, output); err != nil {
		return err
	}
	up, err := output.Grad()
	if err != nil {
		return fmt.Errorf("collection: %w", errs.Graph(err))
	}
	vals := make([]gorgonia.Value, len(inputs)-1)
	for k, n := range inputs[:len(inputs)-1] {
		vals[k] = n.Value()
	}
	return o.capture(up, vals)
}
