package nn

import (
	"context"
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/rowgrad"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// sparseLookup is one lookup of a sparse embedding: the zero "tap"
// added to its output, and the capture its gradient fills.
type sparseLookup struct {
	tap *gorgonia.Node
	cap *capture
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
// padding row left out). It is built from what the backward pass of the
// last run that computed the gradient captured: that run's ids and
// gradients, whatever was bound or run since (an evaluation machine, the
// next batch's ids). Before such a run it is an error wrapping
// gather.ErrGraph. On its first 8 calls (Step's included)
// and every 64th after them it also checks that GradNodes still hold
// zeros: a dense solver given them moves them, which is an error wrapping
// gather.ErrGraph.
func (e *Embedding) RowGrad() (*optim.RowGrad, error) { return e.rowGrad(nil) }

// rowGrad is RowGrad, built in buf's memory when buf is not nil.
func (e *Embedding) rowGrad(buf *rowgrad.Buffer) (*optim.RowGrad, error) {
	if err := e.checkCaptured("RowGrad", false); err != nil {
		return nil, err
	}
	vocab, dim := e.home.Vocab(), e.home.rowTensor().Shape()[1] // a Dense's Shape is not a copy, a Node's is
	checkTaps := tapCheckDue(e.rowGrads)
	e.rowGrads++
	idss, grads := make([]*tensor.Dense, len(e.lookups)), make([]*tensor.Dense, len(e.lookups))
	for k, l := range e.lookups {
		if checkTaps {
			if err := checkTap(e.Table.Name(), l.tap); err != nil {
				return nil, err
			}
		}
		idss[k], grads[k] = l.cap.idv, l.cap.grad
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
func rowGradient(buf *rowgrad.Buffer, ids, grad tensor.Tensor, vocab, pad int) (*optim.RowGrad, error) {
	return rowgrad.Build(ids, grad, vocab, pad, buf)
}

// Step is the sparse training step of the table: it takes RowGrad and
// hands it to opt, which updates the table in place.
//
//	vm.RunAll()
//	emb.Step(adam)  // the table, from the rows this run touched
//	solver.Step(gorgonia.NodesToValueGrads(dense))  // the rest of the model
//	vm.Reset()
//
// The rows and gradients are those the backward pass of the last run that
// computed the gradient captured (see RowGrad): binding the next batch's
// ids, or running an evaluation machine on other ids, between RunAll and
// Step changes nothing trained. A run that computes the gradient again
// (a second training machine on the same graph) replaces it.
//
// Step builds the row gradient (its rows, its values and the sort's
// scratch) in memory it keeps for the next step, where RowGrad allocates
// them anew; opt must not keep the gradient after its Step returns
// (optim.SparseSGD and optim.SparseAdam do not). Steps of one Embedding
// must not run concurrently. A Step with no run that computed the
// gradient since the last Step is an error wrapping gather.ErrGraph and
// changes nothing: the run's gradient was used, and stepping again would
// move rows by an optimiser's momentum alone.
func (e *Embedding) Step(ctx context.Context, opt optim.Sparse) error {
	return e.step(ctx, opt, nil)
}

// StepWith updates the table by opt from g, a row gradient that RowGrad
// returned for this run and the caller changed, such as by
// optim.ClipGradNorm: Step with the caller's gradient, under Step's rules.
func (e *Embedding) StepWith(ctx context.Context, opt optim.Sparse, g *optim.RowGrad) error {
	if g == nil {
		return fmt.Errorf("embedding %q: StepWith needs a row gradient (RowGrad): %w", e.Table.Name(), gather.ErrShape)
	}
	return e.step(ctx, opt, g)
}

// step is Step, from g, or from the row gradient it builds if g is nil.
func (e *Embedding) step(ctx context.Context, opt optim.Sparse, g *optim.RowGrad) error {
	if opt == nil {
		return fmt.Errorf("embedding %q: Step needs an optimiser, such as &optim.SparseSGD{...} or optim.NewSparseAdam: %w", e.Table.Name(), gather.ErrOption)
	}
	if e.closed {
		return fmt.Errorf("embedding %q: %w", e.Table.Name(), table.ErrClosed)
	}
	if err := e.checkCaptured("Step", true); err != nil {
		return err
	}
	var err error
	if g == nil {
		if g, err = e.rowGrad(&e.grad); err != nil {
			return err
		}
	}
	if err := e.home.step(ctx, opt, g); err != nil {
		return fmt.Errorf("embedding %q: %w", e.Table.Name(), err)
	}
	e.markChanged(g.Rows)
	for _, l := range e.lookups {
		l.cap.fresh = false
	}
	return nil
}

// checkCaptured reports an error unless e is a sparse, trainable
// embedding whose every lookup captured a gradient, since the last Step
// if fresh is set. method names the caller in the error.
func (e *Embedding) checkCaptured(method string, fresh bool) error {
	if !e.cfg.sparse || e.cfg.frozen {
		return fmt.Errorf("embedding %q: %s needs a sparse, trainable embedding: %w", e.Table.Name(), method, gather.ErrOption)
	}
	if len(e.lookups) == 0 {
		return fmt.Errorf("embedding %q: %s before any Lookup: %w", e.Table.Name(), method, gather.ErrGraph)
	}
	for _, l := range e.lookups {
		if err := l.cap.check(fresh); err != nil {
			return fmt.Errorf("%w (lookup %s)", err, l.tap.Name())
		}
	}
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
