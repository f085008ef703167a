package kernel

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
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

// SumRows gives each wanted row the sum, in order of position, of the
// source rows that name it, the padding row left out, with the same bits
// on one goroutine and several (the rows split between them).
func TestSumRows(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct{ n, vocab, dim, pad int }{
		{1, 1, 3, -1}, {50, 7, 5, 2}, {3000, 400, 32, 0}, {3000, 400, 32, 399}, {4096, 100_000, 64, -1}, {5000, 3, 16, 1},
	} {
		idx := make([]int, c.n)
		for p := range idx {
			idx[p] = r.IntN(c.vocab)
		}
		src := make([]float32, c.n*c.dim)
		for i := range src {
			src[i] = float32(r.NormFloat64())
		}
		var buf RowSort
		order := SortRows(idx, c.vocab, &buf)
		want := DistinctRows(nil, order, c.pad)
		// The reference: each row's positions in ascending order, the
		// first copied and the rest added.
		ref := make([]float32, len(want)*c.dim)
		for s, row := range want {
			first := true
			for p, id := range idx {
				if int64(id) != row {
					continue
				}
				for j := range c.dim {
					if first {
						ref[s*c.dim+j] = src[p*c.dim+j]
					} else {
						ref[s*c.dim+j] += src[p*c.dim+j]
					}
				}
				first = false
			}
		}
		for _, procs := range []int{1, 4} {
			prev := runtime.GOMAXPROCS(procs)
			dst := make([]float32, len(want)*c.dim)
			for i := range dst {
				dst[i] = float32(math.NaN()) // SumRows writes every row
			}
			SumRows(dst, src, order, want, c.dim)
			runtime.GOMAXPROCS(prev)
			if !slices.Equal(dst, ref) {
				t.Fatalf("%+v on %d goroutines: the sums differ from the reference", c, procs)
			}
		}
	}
}
