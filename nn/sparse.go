package nn

import (
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/optim"
)

// sparseLookup is one lookup of a sparse embedding: its ids and the zero
// "tap" added to its output, whose gradient is the output's gradient.
type sparseLookup struct {
	ids, tap *gorgonia.Node
	bag      *bagOp         // for a bag: its op, whose output the tap follows
	inputs   gorgonia.Nodes // for a bag: the op's inputs
	freq     bool           // WithScaleGradByFreq
}

// grad returns the gradient of l's rows by position, shaped ids.shape +
// [dim], from the gradient of its tap: the tap's gradient itself for a
// lookup, what each position's row received for a bag.
func (l sparseLookup) grad(tapGrad *tensor.Dense, vocab int) (*tensor.Dense, error) {
	if l.bag == nil {
		if !l.freq {
			return tapGrad, nil
		}
		ix, err := operand.ReadIndices("embedding", "ids", l.ids.Value())
		if err != nil {
			return nil, err
		}
		g := tapGrad.Clone().(*tensor.Dense)
		floatsFor(g.Dtype()).divideByFreq(g, ix, vocab)
		return g, nil
	}
	vals := make([]gorgonia.Value, len(l.inputs))
	for k, n := range l.inputs {
		vals[k] = n.Value()
	}
	a, err := l.bag.args(vals)
	if err != nil {
		return nil, err
	}
	defer a.release()
	o := l.bag
	out := tensor.New(tensor.Of(o.dtype), tensor.WithShape(append(o.idShape.Clone(), o.dim)...))
	if out.Shape().TotalSize() == 0 {
		return out, nil
	}
	floatsFor(o.dtype).positionGrad(out, tapGrad, a.table, a, o.vocab, o.dim)
	if l.freq {
		floatsFor(o.dtype).divideByFreq(out, a.ids, vocab)
		return out, nil
	}
	return out, nil
}

// GradNodes returns the nodes of a sparse embedding to differentiate with
// respect to, alongside the model's other learnables:
//
//	gorgonia.Grad(loss, append(dense, emb.GradNodes()...)...)
//
// Each is an input of zeros added to one lookup's output, so its gradient is
// that output's gradient: O(batch × dim), never the table's size. It
// returns nil for a dense or frozen embedding, whose table is in Learnables.
func (e *Embedding) GradNodes() gorgonia.Nodes {
	var ns gorgonia.Nodes
	for _, l := range e.lookups {
		ns = append(ns, l.tap)
	}
	return ns
}

// RowGrad returns the gradient of a sparse embedding's table after a run of
// the graph: the rows its lookups touched and their summed gradients (the
// padding row left out). It reads the ids and the gradients of GradNodes and
// clears the latter, so that a machine that accumulates gradients across
// runs does not add this run's into the next. On its first 8 calls (Step's
// included) and every 64th after them it also checks that GradNodes still
// hold zeros: a dense solver given them moves them, which is an error
// wrapping gather.ErrGraph.
func (e *Embedding) RowGrad() (*optim.RowGrad, error) { return e.rowGrad(nil) }

// rowGrad is RowGrad, built in buf's memory (optim.RowGrad.Set) when buf
// is not nil.
func (e *Embedding) rowGrad(buf *optim.RowGrad) (*optim.RowGrad, error) {
	if !e.cfg.sparse || e.cfg.frozen {
		return nil, fmt.Errorf("embedding %q: RowGrad needs a sparse, trainable embedding: %w", e.Table.Name(), gather.ErrOption)
	}
	if len(e.lookups) == 0 {
		return nil, fmt.Errorf("embedding %q: RowGrad before any Lookup: %w", e.Table.Name(), gather.ErrGraph)
	}
	vocab, dim := e.Table.Shape()[0], e.Table.Shape()[1]
	checkTaps := tapCheckDue(e.rowGrads)
	e.rowGrads++
	idss, grads, taps := make([]*tensor.Dense, len(e.lookups)), make([]*tensor.Dense, len(e.lookups)), make([]*tensor.Dense, len(e.lookups))
	// Whatever happens, this run's tap gradients are cleared, so that a
	// machine that accumulates gradients does not add them into the next.
	defer func() {
		for _, g := range taps {
			if g != nil {
				floatsFor(g.Dtype()).clear(g)
			}
		}
	}()
	for k, l := range e.lookups {
		gv, err := l.tap.Grad()
		if err != nil {
			return nil, fmt.Errorf("embedding %q: no gradient for %v; was it passed to gorgonia.Grad? %w", e.Table.Name(), l.tap.Name(), errs.Graph(err))
		}
		if gv == nil || l.ids.Value() == nil {
			return nil, fmt.Errorf("embedding %q: the graph has not run: run it (vm.RunAll) before Step or RowGrad, "+
				"so that the lookups' ids and gradients are there: %w", e.Table.Name(), gather.ErrGraph)
		}
		if idss[k], err = operand.Read("embedding", "ids", l.ids.Value()); err != nil {
			return nil, err
		}
		if checkTaps {
			if err := checkTap(e.Table.Name(), l.tap); err != nil {
				return nil, err
			}
		}
		if taps[k], err = operand.Read("embedding", "gradient", gv); err != nil {
			return nil, err
		}
		if grads[k], err = l.grad(taps[k], vocab); err != nil {
			return nil, err
		}
	}
	if len(e.lookups) == 1 {
		return rowGradient(buf, idss[0], grads[0], vocab, e.padding())
	}

	// Several lookups: one list of ids and one of their gradients, in
	// lookup order.
	var ids []int
	for _, t := range idss {
		ix, err := operand.ReadIndices("embedding", "ids", t)
		if err != nil {
			return nil, err
		}
		ids = operand.Pick(ix.Dtype, appendInts[int], appendInts[int32], appendInts[int64])(ids, ix)
	}
	grad := tensor.New(tensor.Of(e.Table.Dtype()), tensor.WithShape(len(ids), dim))
	off := 0
	for _, g := range grads {
		n := g.Shape().TotalSize()
		if n > 0 {
			floatsFor(grad.Dtype()).copyAt(grad, off, g)
		}
		off += n
	}
	idsT := tensor.New(tensor.Of(tensor.Int), tensor.WithShape(len(ids)))
	if len(ids) > 0 {
		idsT = tensor.New(tensor.WithShape(len(ids)), tensor.WithBacking(ids))
	}
	return rowGradient(buf, idsT, grad, vocab, e.padding())
}

// rowGradient returns optim.RowGradient(ids, grad, vocab, pad), built in
// buf's memory when buf is not nil.
func rowGradient(buf *optim.RowGrad, ids, grad tensor.Tensor, vocab, pad int) (*optim.RowGrad, error) {
	if buf == nil {
		return optim.RowGradient(ids, grad, vocab, pad)
	}
	if err := buf.Set(ids, grad, vocab, pad); err != nil {
		return nil, err
	}
	return buf, nil
}

// Step is the sparse training step of the table: it takes RowGrad and
// hands it to opt, which updates the table in place.
//
//	vm.RunAll()
//	emb.Step(adam)  // the table, from the rows this run touched
//	solver.Step(gorgonia.NodesToValueGrads(dense))  // the rest of the model
//	vm.Reset()
//
// Step builds the row gradient (its rows, its values and the sort's
// scratch) in memory it keeps for the next step, where RowGrad allocates
// them anew; opt must not keep the gradient after its Step returns
// (optim.SparseSGD and optim.SparseAdam do not). Steps of one Embedding
// must not run concurrently. A second Step with no run of the graph since
// the first is an error wrapping gather.ErrGraph and changes nothing: the
// run's gradient was used, and stepping again would move rows by an
// optimiser's momentum alone.
func (e *Embedding) Step(opt optim.Sparse) error {
	return e.step(opt, nil)
}

// StepWith updates the table by opt from g, a row gradient that RowGrad
// returned for this run and the caller changed, such as by
// optim.ClipGradNorm: Step with the caller's gradient, under Step's rules.
func (e *Embedding) StepWith(opt optim.Sparse, g *optim.RowGrad) error {
	if g == nil {
		return fmt.Errorf("embedding %q: StepWith needs a row gradient (RowGrad): %w", e.Table.Name(), gather.ErrShape)
	}
	return e.step(opt, g)
}

// step is Step, from g, or from the row gradient it builds if g is nil.
func (e *Embedding) step(opt optim.Sparse, g *optim.RowGrad) error {
	if opt == nil {
		return fmt.Errorf("embedding %q: Step needs an optimiser, such as &optim.SparseSGD{...} or optim.NewSparseAdam: %w", e.Table.Name(), gather.ErrOption)
	}
	table, err := e.Weight()
	if err != nil {
		return err
	}
	runs := e.runs.Load()
	if runs > 0 && runs == e.stepped {
		return fmt.Errorf("embedding %q: Step again with no run of the graph since the last: the gradient was used; run the graph first: %w", e.Table.Name(), gather.ErrGraph)
	}
	if g == nil {
		if g, err = e.rowGrad(&e.grad); err != nil {
			return err
		}
	}
	if e.file != nil {
		// A table in a file: an I/O error on its mapping is an error here,
		// not the end of the process (see OpenEmbedding).
		err = e.file.Guard(func() error { return opt.Step(table, g) })
	} else {
		err = opt.Step(table, g)
	}
	if err != nil {
		return fmt.Errorf("embedding %q: %w", e.Table.Name(), err)
	}
	e.stepped = runs
	return nil
}

// tapCheckDue reports whether the row gradient built after n others checks
// the taps: the first 8 and every 64th after them. A dense solver given
// the taps moves them from its first step on, so a mistake shows within a
// few steps, while a long run pays for the pass over them rarely.
func tapCheckDue(n int) bool { return n < 8 || n%64 == 0 }

// checkTap reports an error unless the tap node holds zeros. A tap that
// moved was updated by a dense solver (GradNodes passed to it as
// learnables), which trains the tap instead of the table.
func checkTap(table string, tap *gorgonia.Node) error {
	t, ok := tap.Value().(*tensor.Dense)
	if !ok {
		return nil
	}
	if dt := t.Dtype(); dt != tensor.Float32 && dt != tensor.Float64 {
		return nil
	}
	p := floatsFor(t.Dtype()).firstNonZero(t)
	if p < 0 {
		return nil
	}
	return fmt.Errorf("embedding %q: %v is no longer zero (element %d): GradNodes were updated by a dense solver; "+
		"pass them to gorgonia.Grad only, never to a solver or BindDualValues: %w", table, tap.Name(), p, gather.ErrGraph)
}

func (e *Embedding) padding() int {
	if e.cfg.hasPad {
		return e.cfg.pad
	}
	return -1
}

// appendInts is kernel.AppendInts for ids of Go type I.
func appendInts[I kernel.Index](dst []int, ix operand.Indices) []int {
	return kernel.AppendInts(dst, operand.Slice[I](ix))
}
