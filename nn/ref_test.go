package nn

import "github.com/gathergrad/gather/internal/ref"

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
	normIndex     = ref.NormIndex
)
