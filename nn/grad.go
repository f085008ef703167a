package nn

import (
	"fmt"
	"strings"

	"gorgonia.org/gorgonia"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/errs"
)

// gradHint is what Grad's errors add to Gorgonia's.
const gradHint = "a sparse nn.Embedding (WithSparse, a Collection's or Cached table) has no dense gradient and no Learnables: " +
	"differentiate with respect to its GradNodes() and step it with its Step; a frozen one has no gradient at all"

// Grad is gorgonia.Grad(cost, wrt...): it adds the gradient nodes of cost
// with respect to wrt to the graph and returns them. Its errors wrap
// gather.ErrGraph, and where Gorgonia's would mislead they say what to do
// instead: no nodes at all (the Learnables of a sparse or frozen
// Embedding are empty), or a node the cost has no gradient for
// (Gorgonia's "Non Differentiable WRTs": a sparse table's Table node),
// both name GradNodes, through which a sparse table's gradient comes:
//
//	_, err := nn.Grad(loss, append(mlp.Learnables(), emb.GradNodes()...)...)
func Grad(cost *gorgonia.Node, wrt ...*gorgonia.Node) (gorgonia.Nodes, error) {
	if cost == nil {
		return nil, fmt.Errorf("nn.Grad: the cost is nil: %w", gather.ErrGraph)
	}
	if len(wrt) == 0 {
		return nil, fmt.Errorf("nn.Grad: no nodes to differentiate with respect to; %s: %w", gradHint, gather.ErrGraph)
	}
	for k, n := range wrt {
		if n == nil {
			return nil, fmt.Errorf("nn.Grad: wrt[%d] is nil: %w", k, gather.ErrGraph)
		}
		if n.Graph() != cost.Graph() {
			return nil, fmt.Errorf("nn.Grad: wrt[%d] (%s) is of another graph than the cost: %w", k, n.Name(), gather.ErrGraph)
		}
	}
	out, err := gorgonia.Grad(cost, wrt...)
	if err != nil {
		if strings.Contains(err.Error(), "Non Differentiable") {
			return nil, fmt.Errorf("nn.Grad: %w; %s", errs.Graph(err), gradHint)
		}
		return nil, fmt.Errorf("nn.Grad: %w", errs.Graph(err))
	}
	return out, nil
}
