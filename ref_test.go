package gather

import (
	"gorgonia.org/gorgonia"

	"github.com/gathergrad/gather/internal/ref"
)

// Short names for the shared references and helpers of internal/ref.
var (
	offset        = ref.Offset
	steady        = ref.Steady
	benchRuns     = ref.BenchRuns
	forEachCoord  = ref.ForEachCoord
	refTake       = ref.Take
	refTakeAlong  = ref.TakeAlong
	refIndexAdd   = ref.IndexAdd
	refScatterAdd = ref.ScatterAdd
	randFloats    = ref.RandFloats
	randIndices   = ref.RandIndices
	castIndices   = ref.CastIndices
	firstOf       = ref.FirstOf
	lenOf         = ref.LenOf
	floats        = ref.Floats
	floatTensor   = ref.FloatTensor
	reflectTypeOf = ref.ReflectTypeOf
	unravel       = ref.Unravel
)

// applyKind adds Gather (kind opGather) or GatherElements to the graph.
func applyKind(kind operator, data, indices *gorgonia.Node, axis int, opts []Option) (*gorgonia.Node, error) {
	if kind == opGather {
		return Gather(data, indices, axis, opts...)
	}
	return GatherElements(data, indices, axis, opts...)
}
