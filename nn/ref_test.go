package nn

import (
	"math/rand/v2"

	"github.com/gathergrad/gather/internal/ref"
)

// randIndices is ref.RandIndices with each negative index mapped to the
// row it names: package nn takes ids in [0, s) only.
func randIndices(r *rand.Rand, n, s int) []int64 {
	ids := ref.RandIndices(r, n, s)
	for i, v := range ids {
		ids[i] = int64(ref.NormIndex(v, s))
	}
	return ids
}
