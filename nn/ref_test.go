package nn

import (
	"math/rand/v2"

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
	castIndices   = ref.CastIndices
	firstOf       = ref.FirstOf
	lenOf         = ref.LenOf
	floats        = ref.Floats
	floatTensor   = ref.FloatTensor
	reflectTypeOf = ref.ReflectTypeOf
	unravel       = ref.Unravel
	normIndex     = ref.NormIndex
)

// randIndices is ref.RandIndices with each negative index mapped to the
// row it names: package nn takes ids in [0, s) only.
func randIndices(r *rand.Rand, n, s int) []int64 {
	ids := ref.RandIndices(r, n, s)
	for i, v := range ids {
		ids[i] = int64(normIndex(v, s))
	}
	return ids
}
