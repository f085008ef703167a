package kernel

import (
	mathbits "math/bits"

	"github.com/gathergrad/gather/internal/parallel"
	gonumblas "gonum.org/v1/gonum/blas/gonum"
)

// addRows is the backward of takeRows restricted to destination rows
// jlo..jhi-1 of every outer block:
//
//	for o, i: if j := idx[i]; jlo <= j < jhi { dst[o][j][:] += c * src[o][i][:] }
//
// for outer blocks olo..ohi-1. Each destination row sums its sources in
// index order, whatever the split.
// With ahead set (see prefetches), it prefetches the destination row of
// the index rowsAhead on.
func addRows[T Float, I Index](dst, src []T, idx []I, c T, s, inner, olo, ohi, jlo, jhi int, ahead bool) {
	n := len(idx)
	for o := olo; o < ohi; o++ {
		for i, v := range idx {
			if ahead && i+rowsAhead < n {
				if j := Wrap(idx[i+rowsAhead], s); j >= jlo && j < jhi {
					prefetchRow(dst[(o*s+j)*inner : (o*s+j+1)*inner])
				}
			}
			j := Wrap(v, s)
			if j < jlo || j >= jhi {
				continue
			}
			AddRow(dst[(o*s+j)*inner:(o*s+j+1)*inner], src[(o*n+i)*inner:(o*n+i+1)*inner], c)
		}
	}
}

// addFirstTouch is, for destination rows jlo..jhi-1 of block (rows of
// inner elements) other than row pad, clearing them and then
//
//	for i, v := range x { if j := Wrap(v, s); jlo <= j < jhi && j != pad { block[j][:] += c * g[i][:] } }
//
// with the same result, bit for bit, without reading any of the rows from
// memory first: the first index of each row writes 0 + c*g[i] into it with
// streaming stores, later ones add to it, and the rows no index names are
// then cleared with streaming stores. Ordinary stores would read every
// line of a row before writing it; in a destination this large (see
// writesFirst) those reads come from memory. A later add reads a row the
// same goroutine wrote with streaming stores, which the processor orders
// for it; the fence at the end makes the rows visible to the others. The
// rows must satisfy writesFirst.
func addFirstTouch[T Float, I Index](block, g []T, x []I, c T, inner, jlo, jhi, pad int) {
	s := len(block) / inner
	bp := getBits(jhi - jlo)
	defer bitLists.Put(bp)
	seen := *bp // rows written so far, from jlo
	ahead := prefetchesRepeats(block, inner, len(x))
	for i, v := range x {
		if ahead && i+rowsAhead < len(x) {
			if j := Wrap(x[i+rowsAhead], s); j >= jlo && j < jhi && j != pad {
				if isSet(seen, j-jlo) {
					prefetchRow(block[j*inner : (j+1)*inner])
				}
			}
		}
		j := Wrap(v, s)
		if j < jlo || j >= jhi || j == pad {
			continue
		}
		d, y := block[j*inner:(j+1)*inner], g[i*inner:(i+1)*inner]
		if b := j - jlo; !isSet(seen, b) {
			seen[b>>6] |= 1 << (b & 63)
			streamScaledRow(d, y, c)
		} else {
			AddRow(d, y, c)
		}
	}
	for b := 0; b < jhi-jlo; {
		if isSet(seen, b) {
			b++
			continue
		}
		e := nextSet(seen, b, jhi-jlo)
		clearRows := block[(jlo+b)*inner : (jlo+e)*inner]
		streamClear(ptr(clearRows), uintptr(len(clearRows))*sizeOf[T]())
		b = e
	}
	storeFence()
}

// prefetchesRepeats reports whether addFirstTouch, adding n rows into
// block (rows of inner elements), should prefetch the rows that indices
// rowsAhead on name again. A row already written was written past the
// caches, so an index that adds into it again waits on memory unless the
// row is asked for in advance. Looking ahead costs a little on every
// index; it pays when repeats are common, about one index in 16 or more,
// which n random indices into s rows give from n >= s/8 (bench/README.md's
// decision log holds the A/B).
func prefetchesRepeats[T any](block []T, inner, n int) bool {
	return prefetches(block, inner) && 8*n >= len(block)/inner
}

// isSet reports whether bit b of bits is set.
func isSet(bits []uint64, b int) bool { return bits[b>>6]&(1<<(b&63)) != 0 }

// nextSet returns the position of the first bit set in bits at or after
// from, or n if there is none before n.
func nextSet(bits []uint64, from, n int) int {
	for w := from >> 6; w < len(bits); w++ {
		v := bits[w]
		if w == from>>6 {
			v &^= 1<<(from&63) - 1 // bits below from
		}
		if v != 0 {
			return min(w<<6+mathbits.TrailingZeros64(v), n)
		}
	}
	return n
}

// bitLists holds the row bitmaps of addFirstTouch for reuse, so that a
// gradient call in a training loop allocates none. It is a free list, as
// for the parallel calls' jobs (see parallel.List), not a sync.Pool, which a
// collection empties. It holds at most 16 bitmaps of a bit per row each.
var bitLists = parallel.NewList[[]uint64](16)

// getBits returns n cleared bits from bitLists, or new ones; put them back
// with bitLists.Put when done.
func getBits(n int) *[]uint64 {
	w := (n + 63) / 64
	p := bitLists.Get()
	if cap(*p) >= w {
		*p = (*p)[:w]
		clear(*p)
		return p
	}
	*p = make([]uint64, w)
	return p
}

// addAlong is the backward of takeAlong for rows lo..hi-1 and, within
// each row, columns klo..khi-1:
//
//	dst[c with c[axis] = idx[c]] += k * src[c]
//
// Each row is added by addRowAt or addStrided (see the note above pickRow).
func addAlong[T Float, I Index](dst, src []T, idx []I, c T, g *Along, lo, hi, klo, khi int) {
	var buf [8]int
	w := g.walk(lo, &buf)
	n, s := g.n, g.s
	for r := lo; r < hi; r++ {
		x, y := idx[r*n+klo:r*n+khi], src[r*n+klo:r*n+khi]
		if w.last {
			addRowAt(dst[w.base:w.base+s], y, x, c)
		} else {
			addStrided(dst[w.base+klo:], y, x, c, s, w.stride)
		}
		w.base = g.nextRow(w.base, w.coord)
	}
}

// addRowAt adds c*y[k] into row[x[k]] for each k; the indices are valid.
//
//go:noinline
func addRowAt[T Float, I Index](row, y []T, x []I, c T) {
	y = y[:len(x)]
	s := len(row)
	k := 0
	for ; k+4 <= len(x); k += 4 { // four at a time: one taken branch per four
		g, v := x[k:k+4:k+4], y[k:k+4:k+4]
		row[Wrap(g[0], s)] += c * v[0]
		row[Wrap(g[1], s)] += c * v[1]
		row[Wrap(g[2], s)] += c * v[2]
		row[Wrap(g[3], s)] += c * v[3]
	}
	for ; k < len(x); k++ {
		row[Wrap(x[k], s)] += c * y[k]
	}
}

// addStrided adds c*y[k] into d[x[k]*stride+k] for each k, for an axis of
// size s; the indices are valid.
//
//go:noinline
func addStrided[T Float, I Index](d, y []T, x []I, c T, s, stride int) {
	y = y[:len(x)]
	for k, v := range x {
		d[Wrap(v, s)*stride+k] += c * y[k]
	}
}

// AddRow adds c*g[k] into d[k] for each k. For float32 and float64 rows
// it is gonum's axpy, which works on several elements per instruction on
// amd64 and gives each element the bits of d[k] + c*g[k] (a multiply, then
// an add, as the loop below does). With c == 0 it runs the loop, which,
// unlike axpy, still adds 0*Inf = NaN.
func AddRow[T Float](d, g []T, c T) {
	if c != 0 {
		switch d := any(d).(type) {
		case []float32:
			blas.Saxpy(len(d), float32(c), any(g).([]float32), 1, d, 1)
			return
		case []float64:
			blas.Daxpy(len(d), float64(c), any(g).([]float64), 1, d, 1)
			return
		}
	}
	g = g[:len(d)]
	for k := range d {
		d[k] += c * g[k]
	}
}

// blas is gonum's pure Go and assembly BLAS.
var blas gonumblas.Implementation

// addWork returns the work, in elements, of adding n elements into a
// destination of size m, cleared first with zero: clearing an element costs
// about a quarter of adding one.
func addWork(n, m int, zero bool) int {
	if zero {
		return n + m/4
	}
	return n
}

// IndexAdd is the backward of Take: for dst of shape [outer, s, inner]
// and src of shape [outer, len(idx), inner] in row-major order,
//
//	for o, i: if j := idx[i]; j != pad { dst[o][j][:] += c * src[o][i][:] }
//
// with every index already checked to lie in [-s, s-1] and pad in
// [0, s-1], or negative for none. With zero, dst is first set to zero
// (each worker clearing what it then adds into, while that is in its
// cache), so whatever dst held is overwritten. Each destination row sums
// its sources in index order for any number of goroutines, so the result
// does not depend on GOMAXPROCS. It is O(len(src)), plus O(len(dst)) with
// zero.
func IndexAdd[T Float, I Index](dst, src []T, idx []I, outer, s, inner int, c T, pad int, zero bool) {
	if len(src) == 0 {
		if zero {
			Clear(dst)
		}
		return
	}
	indexAdd(dst, src, idx, outer, s, inner, c, pad, zero)
}

// indexAdd runs addRows in parallel: over outer blocks when there are
// enough of them, else over ranges of destination rows. Row pad (if >= 0)
// is left out. With zero, each worker clears the blocks or rows it owns:
// block by block as it adds into them when it owns whole blocks, as the
// calling goroutine does when it works alone; ranges of minStream bytes or
// more as addBlocks does blocks that large.
func indexAdd[T Float, I Index](dst, src []T, idx []I, outer, s, inner int, c T, pad int, zero bool) {
	work := addWork(len(src), len(dst), zero)
	w := indexAddTask[T, I]{dst: dst, src: src, idx: idx, c: c, outer: outer, s: s, inner: inner, pad: pad, zero: zero}
	if outer >= parallel.Workers(work, max(outer, s)) { // one goroutine included
		w.blocks = true
		parallel.Run(outer, work, w)
		return
	}
	parallel.RunRanges(s, work, w)
}

// indexAddTask is indexAdd's work for parallel.Run: whole outer blocks
// (blocks set), or a range of destination rows in every block.
type indexAddTask[T Float, I Index] struct {
	dst, src             []T
	idx                  []I
	c                    T
	outer, s, inner, pad int
	zero, blocks         bool
}

func (t indexAddTask[T, I]) Part(lo, hi int) int {
	switch {
	case t.blocks:
		addBlocks(t.dst, t.src, t.idx, t.c, t.s, t.inner, lo, hi, t.pad, t.zero)
	case !t.zero:
		addRowsExcept(t.dst, t.src, t.idx, t.c, t.s, t.inner, 0, t.outer, lo, hi, t.pad)
	default:
		for o := range t.outer {
			setRows(t.dst, t.src, t.idx, t.c, t.s, t.inner, o, lo, hi, t.pad)
		}
	}
	return -1
}

// addBlocks is addRowsExcept over outer blocks lo..hi-1 and every
// destination row. With zero, it clears each block just before adding into
// it: a block under minStream bytes is then still in cache when it is added
// into; a larger one is written with streaming stores, which do not read it
// from memory first, by addFirstTouch (or, for rows it cannot take, cleared
// by clearStreamed).
func addBlocks[T Float, I Index](dst, src []T, idx []I, c T, s, inner, lo, hi, pad int, zero bool) {
	if !zero {
		addRowsExcept(dst, src, idx, c, s, inner, lo, hi, 0, s, pad)
		return
	}
	for o := lo; o < hi; o++ {
		setRows(dst, src, idx, c, s, inner, o, 0, s, pad)
	}
}

// setRows sets destination rows jlo..jhi-1 of outer block o to zero and
// then adds into them as addRowsExcept does: with addFirstTouch when they
// are large enough for it, else by clearing them (clearStreamed) and
// adding.
func setRows[T Float, I Index](dst, src []T, idx []I, c T, s, inner, o, jlo, jhi, pad int) {
	rows := dst[(o*s+jlo)*inner : (o*s+jhi)*inner]
	if writesFirst(rows, inner) {
		n := len(idx)
		addFirstTouch(dst[o*s*inner:(o+1)*s*inner], src[o*n*inner:(o+1)*n*inner], idx, c, inner, jlo, jhi, pad)
		return
	}
	clearStreamed(rows)
	addRowsExcept(dst, src, idx, c, s, inner, o, o+1, jlo, jhi, pad)
}

// addRowsExcept is addRows leaving out destination row pad.
func addRowsExcept[T Float, I Index](dst, src []T, idx []I, c T, s, inner, olo, ohi, jlo, jhi, pad int) {
	// Rows are added into one block of s rows at a time, which the
	// callers have usually just cleared, so the block's size decides.
	ahead := prefetches(dst[:s*inner], inner)
	if pad >= jlo && pad < jhi {
		addRows(dst, src, idx, c, s, inner, olo, ohi, jlo, pad, ahead)
		jlo = pad + 1
	}
	addRows(dst, src, idx, c, s, inner, olo, ohi, jlo, jhi, ahead)
}

// ScatterAdd is the backward of TakeAlong: for data dst and indices idx
// of g's shapes, and src of the shape of idx,
//
//	dst[c with c[axis] = idx[c]] += k * src[c]   for every coordinate c of idx
//
// with every index already checked. With zero, dst is first set to zero,
// as for IndexAdd. The result does not depend on GOMAXPROCS. It is
// O(len(src)), plus O(len(dst)) with zero.
func ScatterAdd[T Float, I Index](dst, src []T, idx []I, g *Along, c T, zero bool) {
	if len(src) == 0 {
		if zero {
			Clear(dst)
		}
		return
	}
	scatterAdd(dst, src, idx, g, c, g.dshape, zero)
}

// scatterAdd runs addAlong in parallel over a dimension other than axis, so
// that workers write disjoint parts of dst: the first dimension, or the last
// when axis is the first. With zero, each worker clears the part of dst (of
// shape dshape) it owns, a few blocks at a time as it adds into them when it
// owns a range of the first dimension (as the calling goroutine does when
// it works alone); the last one also clears what lies beyond the indices'
// extent on the split dimension.
func scatterAdd[T Float, I Index](dst, src []T, idx []I, g *Along, c T, dshape []int, zero bool) {
	work := addWork(len(idx), len(dst), zero)
	if len(g.ishape) == 1 {
		work = 0 // a single row, added on the calling goroutine
	}
	// g is copied, so that g itself stays on the caller's stack.
	w := scatterAddTask[T, I]{dst: dst, src: src, idx: idx, c: c, g: *g, d0: dshape[0], width: dshape[len(dshape)-1], zero: zero}
	if g.axis != 0 {
		parallel.Run(g.ishape[0], work, w)
		return
	}
	parallel.RunRanges(g.n, work, w)
}

// scatterAddTask is scatterAdd's work for parallel.Run: a range of the
// first dimension when axis is not the first, else a range of columns of
// every row.
type scatterAddTask[T Float, I Index] struct {
	dst, src  []T
	idx       []I
	c         T
	g         Along
	d0, width int // data's first and last dimensions
	zero      bool
}

func (t scatterAddTask[T, I]) Part(lo, hi int) int {
	if t.g.axis != 0 {
		addFirst(t.dst, t.src, t.idx, t.c, &t.g, lo, hi, t.d0, t.zero)
		return -1
	}
	if t.zero {
		end := hi
		if hi == t.g.n {
			end = t.width
		}
		for b := 0; b < len(t.dst); b += t.width {
			clear(t.dst[b+lo : b+end])
		}
	}
	addAlong(t.dst, t.src, t.idx, t.c, &t.g, 0, len(t.idx)/t.g.n, lo, hi)
	return -1
}

// addFirst is addAlong for the indices' rows whose first coordinate is in
// lo..hi-1, when axis is not the first: they add only into the blocks of
// dst with the same first coordinate. With zero, it clears those blocks a
// few at a time just before adding into them, so that they are still in
// cache when they are added into; the part ending at the indices' extent
// on the first dimension also clears the d0-hi blocks beyond it.
func addFirst[T Float, I Index](dst, src []T, idx []I, c T, g *Along, lo, hi, d0 int, zero bool) {
	first := g.ishape[0]
	perFirst, block := len(idx)/g.n/first, len(dst)/d0
	if !zero {
		addAlong(dst, src, idx, c, g, lo*perFirst, hi*perFirst, 0, g.n)
		return
	}
	step := max(1, clearStep/block)
	for a := lo; a < hi; a += step {
		b := min(a+step, hi)
		clear(dst[a*block : b*block])
		addAlong(dst, src, idx, c, g, a*perFirst, b*perFirst, 0, g.n)
	}
	if hi == first {
		clear(dst[first*block:])
	}
}

// clearStep is how many destination elements a backward worker clears at a
// time before adding into them: few enough (16 KB of float32, 32 KB of
// float64) to stay in a core's first-level data cache while it adds; with
// more, the adds wait on the second-level cache.
const clearStep = 1 << 12

// Clear sets s to zero, split across goroutines when s is large. It is O(len(s)).
func Clear[T Float](s []T) {
	parallel.Run(len(s), len(s)/4, clearTask[T]{s: s})
}

// clearTask is Clear's work for parallel.Run.
type clearTask[T Float] struct{ s []T }

func (t clearTask[T]) Part(lo, hi int) int {
	clear(t.s[lo:hi])
	return -1
}
