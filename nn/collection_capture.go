package nn

import (
	"fmt"
	"slices"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
	"github.com/gathergrad/gather/optim"
)

// collCaptureOp is the gradient of the collection's tap: it records the
// run's ids and gradient (collectionOp.capture) and returns the gradient.
type collCaptureOp struct {
	opkit.Op
	o *collectionOp
}

func (op *collCaptureOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity("collection", " capture", len(in), op.Arity()); err != nil {
		return nil, err
	}
	if err := op.o.capture(in[0], in[1:]); err != nil {
		return nil, err
	}
	return in[0], nil
}

// capture records, for each table, the ids of the run and the gradient
// each received (unfused), or the ids, the output gradient and what each
// id's gradient is of it (fused), from the upstream gradient up and the
// op's inputs (values, offsets, weights). On error the tables' captures
// are not fresh.
func (o *collectionOp) capture(up gorgonia.Value, in []gorgonia.Value) error {
	c := o.c
	for _, g := range c.groups {
		g.fresh = false
	}
	gt, err := operand.Read("collection", "gradient", up)
	if err != nil {
		return err
	}
	if gt.Dtype() != c.dtype || !operand.SameShape(gt.Shape(), o.shape) {
		return fmt.Errorf("collection gradient: %v of shape %v, want %v of shape %v: %w", gt.Dtype(), gt.Shape(), c.dtype, o.shape, gather.ErrShape)
	}
	_, offsets, wt, err := o.read(in)
	if err != nil {
		return err
	}
	for _, g := range c.groups {
		if g.e.cfg.frozen {
			continue
		}
		g.cids = append(g.cids[:0], g.ids...)
		n, m := len(g.ids)*g.dim, len(g.feats)*o.batch*g.dim
		if c.dtype == tensor.Float32 {
			grow[float32](&g.grad, m)
		} else {
			grow[float64](&g.grad, m)
		}
		if c.opts.Fused {
			g.gOff, g.coef = slices.Grow(g.gOff[:0], len(g.ids))[:len(g.ids)], slices.Grow(g.coef[:0], len(g.ids))[:len(g.ids)]
		} else if c.dtype == tensor.Float32 {
			grow[float32](&g.pos, n)
		} else {
			grow[float64](&g.pos, n)
		}
	}
	o.features(collRun{o: o, offsets: offsets, weights: wt, grad: gt})
	for _, g := range c.groups {
		g.fresh = !g.e.cfg.frozen
	}
	return nil
}

// captureFeature copies feature k's columns of the output's gradient into
// its block of its table's gradient; then, fused, it finds the block's
// first value that is not finite and sets, for each of its ids, where its
// bag's gradient is and the coefficient of it that is the id's gradient
// (its weight, over the bag's count for a mean); unfused, it sets its part
// of the table's pos to the gradient each id received. Both are as
// EmbeddingBag's backward computes them (kernel.BagPositionGrad).
func captureFeature[T kernel.Float](r *collRun, k int) {
	o := r.o
	c, f := o.c, &o.c.feats[k]
	g, dim := f.group, f.dim
	up := operand.Floats[T](r.grad)
	block := (*slot[T](&g.grad))[f.gi*o.batch*dim:][:o.batch*dim]
	for b := range o.batch {
		copy(block[b*dim:(b+1)*dim], up[b*c.width+f.col:][:dim])
	}
	bg := o.featureBags(k, r.offsets)
	n := bg.Bounds[o.batch]
	fw := weightsOf[T](r.weights, r.offsets, k, o.batch, n)
	rows := g.rows[f.lo : f.lo+n]
	if c.opts.Fused {
		f.bad = kernel.FirstNonFinite(block)
		for b := range o.batch {
			lo, hi := bg.Bounds[b], bg.Bounds[b+1]
			inv := T(1)
			if f.mode == kernel.BagMean {
				m := 0
				for _, r := range rows[lo:hi] {
					if int(r) != g.pad {
						m++
					}
				}
				if m > 0 {
					inv = 1 / T(m)
				}
			}
			for i := lo; i < hi; i++ {
				p := f.lo + i
				if int(rows[i]) == g.pad {
					g.gOff[p] = -1
					continue
				}
				cf := inv
				if fw != nil {
					cf = fw[i] * inv
				}
				g.gOff[p], g.coef[p] = (f.gi*o.batch+b)*dim, float64(cf)
			}
		}
		return
	}
	table := operand.Floats[T](g.e.home.rowTensor())
	var arg []int32
	if f.mode == kernel.BagMax {
		m := o.batch * dim
		f.arg, f.best = slices.Grow(f.arg[:0], m)[:m], slices.Grow(f.best[:0], m)[:m]
		kernel.BagArgmaxInto(f.arg, f.best, table, rows, fw, dim, &bg)
		arg = f.arg
	}
	pos := *slot[T](&g.pos)
	kernel.BagPositionGrad(pos[f.lo*dim:(f.lo+n)*dim], block, rows, fw, len(table)/dim, dim, &bg, arg)
}

// checkFinite reports an error wrapping optim.ErrNotFinite if the captured
// gradient of a trainable table holds a NaN or an infinity: the fused step
// refuses it before any row moves, whatever the rule.
func (c *Collection) checkFinite() error {
	for _, f := range c.feats {
		if !f.group.e.cfg.frozen && f.bad >= 0 {
			b, d := f.bad/f.dim, f.bad%f.dim
			return fmt.Errorf("collection: the gradient of feature %q, sample %d, column %d, is not finite; the fused step moves no row: %w",
				f.key, b, d, optim.ErrNotFinite)
		}
	}
	return nil
}

var (
	_ gorgonia.SDOp            = (*collectionOp)(nil)
	_ gorgonia.ADOp            = (*collectionOp)(nil)
	_ gorgonia.UsePreallocDoer = (*collectionOp)(nil)
)
