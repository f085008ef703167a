package kernel

import (
	mathbits "math/bits"

	"github.com/gathergrad/gather/internal/parallel"
)

// Index is the set of Go types an index may have.
type Index interface{ ~int | ~int32 | ~int64 }

// Float is the set of element types that have gradients.
type Float interface{ ~float32 | ~float64 }

// The forward kernels check every index as they go and stop at the first
// bad one, returning its position in idx (or -1): callers writing into
// memory the user can see validate all indices first (FirstBad), callers
// writing into a new slice rely on these checks and drop the slice on
// error. The backward kernels run only after validation, and a negative
// index only needs its axis size added.

// Norm maps index v on an axis of size s to [0, s-1] and reports whether v
// was in [-s, s-1]. The comparison is done in int64, so an int64 index
// beyond the platform's int is rejected, not truncated.
func Norm[I Index](v I, s int) (int, bool) {
	x := int64(v)
	if x < 0 {
		x += int64(s)
	}
	return int(x), uint64(x) < uint64(s)
}

// Wrap maps a validated index in [-s, s-1] to [0, s-1] without a branch.
func Wrap[I Index](v I, s int) int {
	j := int(v)
	return j + s&(j>>(mathbits.UintSize-1))
}

// FirstBad returns the position of the first index of idx outside
// [-s, s-1], or -1 if there is none:
//
//	for p, v := range idx { if v < -s || v >= s { return p } }
//
// Long lists are split across goroutines. It is O(len(idx)).
func FirstBad[I Index](idx []I, s int) int {
	return parallel.Run(len(idx), len(idx), checkTask[I]{idx: idx, s: s})
}

// FirstOutside returns the position of the first index of idx outside
// [0, s), or -1 if there is none:
//
//	for p, v := range idx { if v < 0 || v >= s { return p } }
//
// (one unsigned comparison per index). It is O(len(idx)).
func FirstOutside[I Index](idx []I, s int) int {
	for p, v := range idx {
		if uint64(int64(v)) >= uint64(s) {
			return p
		}
	}
	return -1
}

// checkTask is FirstBad's work for parallel.Run.
type checkTask[I Index] struct {
	idx []I
	s   int
}

func (t checkTask[I]) Part(lo, hi int) int {
	if q := firstBad(t.idx[lo:hi], t.s); q >= 0 {
		return lo + q
	}
	return -1
}

// firstBad is FirstBad on the calling goroutine, with the two comparisons
// folded into one: v is in range exactly when v+s, computed in int64 and
// read as unsigned, is below 2s (an overflow lands far above it). s is the
// size of an axis of real data, far below 2^62, so 2s does not overflow.
// The leading blocks of 16 indices are checked by checkedPrefix, and the
// loop runs from the first block that holds a bad index.
func firstBad[I Index](idx []I, s int) int {
	k := checkedPrefix(idx, s)
	return firstBadFrom(idx, s, k)
}

// firstBadFrom is the loop of firstBad from position k.
func firstBadFrom[I Index](idx []I, s, k int) int {
	off, span := int64(s), uint64(2*int64(s))
	for p, v := range idx[k:] {
		if uint64(int64(v)+off) >= span {
			return k + p
		}
	}
	return -1
}

// checkedPrefix returns how many leading indices of idx, a multiple of
// 16, inRange64 or inRange32 found in [-s, s-1]: those come before the
// first block of 16 that holds a bad index. It returns 0 for s outside the
// range those handle, for fewer than 16 indices, and for int on a 32-bit
// platform.
func checkedPrefix[I Index](idx []I, s int) int {
	n := len(idx) &^ 15
	if !hasCheckAsm || n == 0 || s < 1 || int64(s) > 1<<62 {
		return 0
	}
	switch elemSize(idx) {
	case 8:
		return inRange64(as[int64](idx), n, s)
	case 4:
		return inRange32(as[int32](idx), n, s)
	}
	return 0
}
