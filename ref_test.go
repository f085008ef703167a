package gather

import (
	"gorgonia.org/gorgonia"
)

// applyKind adds Gather (kind opGather) or GatherElements to the graph.
func applyKind(kind operator, data, indices *gorgonia.Node, axis int, opts []Option) (*gorgonia.Node, error) {
	if kind == opGather {
		g := make([]GatherOption, len(opts))
		for k, o := range opts {
			g[k] = o
		}
		return Gather(data, indices, axis, g...)
	}
	return GatherElements(data, indices, axis, opts...)
}
