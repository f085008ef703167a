package kernel

import (
	"math/rand/v2"

	"github.com/gathergrad/gather/internal/parallel"
)

// NormalBlock is the number of rows Normal draws from one generator: block
// b of a table (rows b*NormalBlock to (b+1)*NormalBlock) has its own,
// seeded by the table's seed and b, so that blocks are drawn in parallel
// and a table drawn whole equals one drawn block by block.
const NormalBlock = 4096

// Normal fills v, the rows of a table of dim columns from row0 (a multiple
// of NormalBlock) on, with draws from N(0, 1), each block of NormalBlock
// rows from a PCG generator seeded by seed and the block's number, the
// blocks in parallel:
//
//	for each block b: r := rand.New(rand.NewPCG(seed, c+b)); v[i] = T(r.NormFloat64()) for its rows
func Normal[T Float](v []T, seed uint64, dim, row0 int) {
	if dim == 0 {
		return
	}
	rows := len(v) / dim
	blocks := (rows + NormalBlock - 1) / NormalBlock
	parallel.For(blocks, len(v), func(lo, hi int) {
		for b := lo; b < hi; b++ {
			r0, r1 := b*NormalBlock, min((b+1)*NormalBlock, rows)
			r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15+uint64((row0+r0)/NormalBlock)))
			for i := range v[r0*dim : r1*dim] {
				v[r0*dim+i] = T(r.NormFloat64())
			}
		}
	})
}
