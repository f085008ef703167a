package gather_test

import (
	"gorgonia.org/gorgonia"

	"github.com/gathergrad/gather"
)

// The two operations' names, as in error messages.
const (
	opGather         = "gather"
	opGatherElements = "gather_elements"
)

// applyKind adds Gather (kind opGather) or GatherElements to the graph.
func applyKind(kind string, data, indices *gorgonia.Node, axis int, opts []gather.Option) (*gorgonia.Node, error) {
	if kind == opGather {
		g := make([]gather.GatherOption, len(opts))
		for k, o := range opts {
			g[k] = o
		}
		return gather.Gather(data, indices, axis, g...)
	}
	return gather.GatherElements(data, indices, axis, opts...)
}
