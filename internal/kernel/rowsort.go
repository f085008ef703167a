package kernel

import (
	"cmp"
	"math"
	"math/bits"
	"slices"

	"github.com/gathergrad/gather/internal/parallel"
)

// A RowPos is a position in a list of ids and the row it names.
type RowPos struct{ Row, Pos int }

// A RowSort is the memory SortRows works in, kept from one call to the
// next: each slice grows as needed and is never shrunk.
type RowSort struct {
	order []RowPos
	keys  []uint64
}

// SortRows returns the (row, position) pairs of idx, ids of rows of a
// table of vocab rows (each in [0, vocab), checked already), sorted by
// row, ties by position: the order in which a dense IndexAdd adds them.
// The pairs are packed into one integer key, row above position, where
// they fit (rows below 2^(64 - bits of n)), and radix-sorted on the row's
// bits (see sortKeys); otherwise they are sorted as pairs. The result
// lives in buf's memory. It is O(n), or O(n log n) for fewer than 256 ids
// or a vocabulary of 2^33 rows or more.
func SortRows[I Index](idx []I, vocab int, buf *RowSort) []RowPos {
	n := len(idx)
	order := slices.Grow(buf.order[:0], n)[:n]
	buf.order = order
	for p, v := range idx {
		order[p] = RowPos{int(v), p}
	}
	shift := bits.Len(uint(n))
	if shift < 64 && uint64(vocab) <= math.MaxUint64>>shift {
		keys := slices.Grow(buf.keys[:0], 2*n)[:2*n]
		buf.keys = keys
		for p, o := range order {
			keys[p] = uint64(o.Row)<<shift | uint64(o.Pos)
		}
		keys = sortKeys(keys[:n], keys[n:], shift, bits.Len(uint(vocab)))
		mask := uint64(1)<<shift - 1
		for k, key := range keys {
			order[k] = RowPos{int(key >> shift), int(key & mask)}
		}
		return order
	}
	slices.SortFunc(order, func(a, b RowPos) int {
		if c := cmp.Compare(a.Row, b.Row); c != 0 {
			return c
		}
		return cmp.Compare(a.Pos, b.Pos)
	})
	return order
}

// sortKeys sorts keys, whose positions (bits below shift) ascend, by their
// rows (the next rowBits bits), keeping equal rows in position order: the
// same order as sorting the keys whole. It returns keys or tmp, a slice of
// the same length, whichever holds the result. Short lists are sorted by
// comparison; longer ones by a stable least-significant-digit radix sort,
// a pass per digit of at most 11 bits, in which each key moves once.
func sortKeys(keys, tmp []uint64, shift, rowBits int) []uint64 {
	if len(keys) < 256 || rowBits > 33 {
		slices.Sort(keys)
		return keys
	}
	passes := (rowBits + 10) / 11
	width := (rowBits + passes - 1) / passes
	var count [1 << 11]int
	mask := uint64(1)<<width - 1
	for lo := shift; lo < shift+rowBits; lo += width {
		clear(count[:])
		for _, k := range keys {
			count[k>>lo&mask]++
		}
		if count[keys[0]>>lo&mask] == len(keys) {
			continue // one digit for all: the pass would change nothing
		}
		sum := 0
		for d, c := range count[:mask+1] {
			count[d] = sum
			sum += c
		}
		for _, k := range keys {
			d := k >> lo & mask
			tmp[count[d]] = k
			count[d]++
		}
		keys, tmp = tmp, keys
	}
	return keys
}

// DistinctRows appends to rows the distinct rows of order (sorted by row)
// but pad, in order, and returns it.
func DistinctRows(rows []int64, order []RowPos, pad int) []int64 {
	for k, o := range order {
		if o.Row != pad && (k == 0 || o.Row != order[k-1].Row) {
			rows = append(rows, int64(o.Row))
		}
	}
	return rows
}

// SumRows is, with order sorted by row and then position, and want the
// distinct rows of order but for padding,
//
//	for each (r, p) in order, if r is in want: dst[slot of r] = sum of src[p]
//
// The first position of a row is copied, the others added in order, so dst
// need not be cleared first. The rows of want are split across goroutines,
// each summed by one, so the result does not depend on GOMAXPROCS.
func SumRows[T Float](dst, src []T, order []RowPos, want []int64, dim int) {
	parallel.Run(len(want), len(order)*dim, sumRowsTask[T]{dst, src, order, want, dim})
}

type sumRowsTask[T Float] struct {
	dst, src []T
	order    []RowPos
	want     []int64
	dim      int
}

// Part sums the rows want[lo:hi], from the positions of order that name
// them.
func (t sumRowsTask[T]) Part(lo, hi int) int {
	dst, src, order, want, dim := t.dst, t.src, t.order, t.want, t.dim
	first := func(r int) int { // the first k with order[k].Row >= r
		k, _ := slices.BinarySearchFunc(order, r, func(o RowPos, r int) int { return cmp.Compare(o.Row, r) })
		return k
	}
	k0, k1 := 0, len(order)
	if lo > 0 {
		k0 = first(int(want[lo]))
	}
	if hi < len(want) {
		k1 = first(int(want[hi]))
	}
	slot := lo
	for k := k0; k < k1; k++ {
		if k+rowsAhead < k1 { // the positions are in no order: fetch a source row ahead
			q := order[k+rowsAhead].Pos
			PrefetchRow(src[q*dim : (q+1)*dim])
		}
		r, p := order[k].Row, order[k].Pos
		for slot < hi && want[slot] < int64(r) {
			slot++
		}
		if slot == hi || want[slot] != int64(r) {
			continue // the padding row
		}
		d, s := dst[slot*dim:(slot+1)*dim], src[p*dim:(p+1)*dim]
		if k == 0 || order[k-1].Row != r {
			copy(d, s)
			continue
		}
		AddInto(d, s)
	}
	return -1
}
