package kernel

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// sortKeys orders keys exactly as sorting them whole does, for lists
// short and long, rows of few and many bits, and rows all equal.
func TestSortKeysMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 3, 255, 256, 1000, 4096, 20000} {
		for _, vocab := range []uint64{1, 2, 10, 5000, 100_000, 1 << 22, 1 << 33} {
			shift := bits.Len(uint(n))
			keys := make([]uint64, 2*n)
			for p := range n {
				keys[p] = r.Uint64N(vocab)<<shift | uint64(p)
			}
			want := slices.Clone(keys[:n])
			slices.Sort(want)
			got := sortKeys(keys[:n], keys[n:], shift, bits.Len64(vocab))
			require.Equal(t, want, slices.Clone(got), "n=%d vocab=%d", n, vocab)
		}
	}
}
