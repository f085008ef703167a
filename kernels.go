package gather

import (
	mathbits "math/bits"
	"runtime"
	"unsafe"

	gonumblas "gonum.org/v1/gonum/blas/gonum"
)

// The loops below move elements of any type T and read indices of any
// integer type I. The forward loops check every index as they go and stop
// at the first bad one, returning its position in idx (or -1): callers
// writing into memory the user can see validate all indices first
// (checkIndices), callers writing into a new tensor rely on these checks
// and drop the tensor on error. The backward loops run only after
// validation, and a negative index only needs its axis size added.

// norm maps index v on an axis of size s to [0, s-1] and reports whether v
// was in [-s, s-1]. The comparison is done in int64, so an int64 index
// beyond the platform's int is rejected, not truncated.
func norm[I index](v I, s int) (int, bool) {
	x := int64(v)
	if x < 0 {
		x += int64(s)
	}
	return int(x), uint64(x) < uint64(s)
}

// wrap maps a validated index in [-s, s-1] to [0, s-1] without a branch.
func wrap[I index](v I, s int) int {
	j := int(v)
	return j + s&(j>>(mathbits.UintSize-1))
}

// rowMoves says how takeRows moves rows: ahead, it prefetches source rows
// before it copies them (see prefetches); stream, it writes them with
// streaming stores and fences them before it returns (see streams); batch,
// it moves them rowsAhead at a time with copyRows or streamRows (see
// batches).
type rowMoves struct{ ahead, stream, batch bool }

// takeRows is, for src of shape [outer, s, inner] and dst of shape
// [outer, len(idx), inner] seen as outer*len(idx) rows of inner elements,
//
//	for r := lo; r < hi; r++ { o, i := r/len(idx), r%len(idx); dst[o][i][:] = src[o][idx[i]][:] }
//
// It returns the position in idx of the first index out of range, or -1.
func takeRows[T any, I index](dst, src []T, idx []I, s, inner, lo, hi int, mv rowMoves) int {
	if mv.stream {
		defer storeFence()
	}
	n := len(idx)
	for r := lo; r < hi; {
		o, i := r/n, r%n
		m := min(hi-r, n-i) // rows left in outer block o
		d, block := dst[r*inner:(r+m)*inner], src[o*s*inner:(o+1)*s*inner]
		var k int
		if mv.batch {
			k = takeBatched(d, block, idx[i:i+m], inner, mv)
		} else {
			k = takeBlock(d, block, idx[i:i+m], inner, mv)
		}
		if k >= 0 {
			return i + k
		}
		r += m
	}
	return -1
}

// takeBlock sets row k of d to row x[k] of block for each k, for rows of
// inner elements, and returns the first k whose index is out of range, or
// -1. With mv.ahead set, every rowsAhead rows it prefetches the next
// rowsAhead rows in one call (a call to assembly makes the compiler save
// every register it uses; once a row, that cost as much as the copy).
//
//go:noinline
func takeBlock[T any, I index](d, block []T, x []I, inner int, mv rowMoves) int {
	s := len(block) / inner
	var next [rowsAhead]uintptr // addresses of rows to prefetch
	size := uintptr(inner) * unsafe.Sizeof(block[0])
	for k, v := range x {
		if mv.ahead && k%rowsAhead == 0 {
			prefetchAfter(&next, block, x, k, inner, size)
		}
		j, ok := norm(v, s)
		if !ok {
			return k
		}
		row := block[j*inner : (j+1)*inner]
		if mv.stream {
			streamRow(d[k*inner:(k+1)*inner], row)
		} else {
			copy(d[k*inner:(k+1)*inner], row)
		}
	}
	return -1
}

// takeBatched is takeBlock moving rowsAhead rows at a time with one call
// of copyRows or streamRows, whose 32-byte loads and stores also move a
// row faster than copy's 16-byte ones for rows of 256 bytes or less.
// Rows must be a whole number of 32 bytes and T hold no pointers.
//
//go:noinline
func takeBatched[T any, I index](d, block []T, x []I, inner int, mv rowMoves) int {
	var rows, next [rowsAhead]uintptr // addresses of the rows to move and of the next ones
	size := uintptr(inner) * unsafe.Sizeof(block[0])
	for k := 0; k < len(x); k += rowsAhead {
		if mv.ahead {
			prefetchAfter(&next, block, x, k, inner, size)
		}
		batch := x[k:min(k+rowsAhead, len(x))]
		if m := rowAddrs(&rows, block, batch, inner); m < len(batch) {
			return k + m // the index at batch[m] is out of range
		}
		if mv.stream {
			streamRows(unsafe.Pointer(&d[k*inner]), &rows, len(batch), size)
		} else {
			copyRows(unsafe.Pointer(&d[k*inner]), &rows, len(batch), size)
		}
		runtime.KeepAlive(block) // rows holds its addresses as integers, which keep nothing alive
	}
	return -1
}

// prefetchAfter prefetches the rows of block (of size bytes) named by
// x[k+rowsAhead], ..., x[k+2*rowsAhead-1], up to the end of x or the
// first index out of range, using addrs for their addresses.
func prefetchAfter[T any, I index](addrs *[rowsAhead]uintptr, block []T, x []I, k, inner int, size uintptr) {
	prefetchLines(addrs, rowAddrs(addrs, block, x[min(k+rowsAhead, len(x)):min(k+2*rowsAhead, len(x))], inner), size)
}

// rowAddrs stores in addrs the address of row x[i] of block, for rows of
// inner elements, for each i until the first index out of range, and
// returns how many it stored.
func rowAddrs[T any, I index](addrs *[rowsAhead]uintptr, block []T, x []I, inner int) int {
	s := len(block) / inner
	for i, v := range x[:min(len(x), rowsAhead)] {
		j, ok := norm(v, s)
		if !ok {
			return i
		}
		addrs[i] = uintptr(unsafe.Pointer(&block[j*inner]))
	}
	return min(len(x), rowsAhead)
}

// rowsAhead is how many rows the row kernels prefetch at a time, and how
// far ahead of the row they move: enough to keep several rows' loads in
// flight.
const rowsAhead = 8

// minPrefetchRow and minPrefetchSpan are the smallest row and span, in
// bytes, for which the row kernels prefetch: below a cache line a row costs
// less to move than to ask for, and rows within a span that fits in a
// core's cache are mostly there already.
const (
	minPrefetchRow  = 64
	minPrefetchSpan = 1 << 20
)

// prefetches reports whether a row kernel reading rows of inner elements at
// random places in span should prefetch them: such reads are loads the
// processor cannot predict, and each waits on memory unless it was asked
// for in advance.
func prefetches[T any](span []T, inner int) bool {
	if len(span) == 0 {
		return false
	}
	size := unsafe.Sizeof(span[0])
	return uintptr(inner)*size >= minPrefetchRow && uintptr(len(span))*size >= minPrefetchSpan
}

// prefetchRow prefetches the elements of row.
func prefetchRow[T any](row []T) {
	if len(row) > 0 {
		prefetch(unsafe.Pointer(&row[0]), uintptr(len(row))*unsafe.Sizeof(row[0]))
	}
}

// takeElems is takeRows for inner == 1, element by element.
func takeElems[T any, I index](dst, src []T, idx []I, s, lo, hi int) int {
	n := len(idx)
	o, i := lo/n, lo%n
	dst = dst[:hi]
	for r := lo; r < hi; r++ {
		j, ok := norm(idx[i], s)
		if !ok {
			return i
		}
		dst[r] = src[o*s+j]
		if i++; i == n {
			i, o = 0, o+1
		}
	}
	return -1
}

// alongGeom describes a GatherElements call: indices (and output) of shape
// ishape, row-major data with the strides given by stride, along axis. Both
// are walked as rows of their last dimension.
type alongGeom struct {
	ishape []int
	small  [8]int // data strides for rank <= 8, held inline so that a geom needs no allocation
	big    []int  // data strides for higher ranks
	axis   int
	s      int // data.shape[axis]
	n      int // ishape[last]: the length of a row
}

// stride returns the row-major stride of data dimension d.
func (g *alongGeom) stride(d int) int {
	if g.big != nil {
		return g.big[d]
	}
	return g.small[d]
}

func (g *alongGeom) setStride(d, v int) {
	if g.big != nil {
		g.big[d] = v
	} else {
		g.small[d] = v
	}
}

// rowBase returns the data offset of the first element of indices row r,
// with the axis coordinate taken as 0, and the coordinates of that row.
func (g *alongGeom) rowBase(r int, coord []int) int {
	base := 0
	for d := len(g.ishape) - 2; d >= 0; d-- {
		coord[d] = r % g.ishape[d]
		r /= g.ishape[d]
		if d != g.axis {
			base += coord[d] * g.stride(d)
		}
	}
	return base
}

// nextRow moves coord to the next row and returns the updated base offset.
func (g *alongGeom) nextRow(base int, coord []int) int {
	for d := len(g.ishape) - 2; d >= 0; d-- {
		coord[d]++
		if d != g.axis {
			base += g.stride(d)
		}
		if coord[d] < g.ishape[d] {
			return base
		}
		if d != g.axis {
			base -= coord[d] * g.stride(d)
		}
		coord[d] = 0
	}
	return base
}

// coords returns scratch space for the row coordinates of g.
func (g *alongGeom) coords(buf *[8]int) []int {
	if k := len(g.ishape) - 1; k <= len(buf) {
		return buf[:k]
	}
	return make([]int, len(g.ishape)-1)
}

// takeAlong is, for rows lo..hi-1 of indices (each g.n long),
//
//	out[c] = data[c with c[axis] = idx[c]]
//
// It returns the flat position of the first index out of range, or -1.
// Each row is moved by pickRow or pickStrided (see the note above them).
func takeAlong[T any, I index](dst, src []T, idx []I, g *alongGeom, lo, hi int) int {
	var buf [8]int
	coord := g.coords(&buf)
	base := g.rowBase(lo, coord)
	n, s := g.n, g.s
	lastAxis := g.axis == len(g.ishape)-1
	stride := g.stride(g.axis)
	for r := lo; r < hi; r++ {
		d, x := dst[r*n:(r+1)*n], idx[r*n:(r+1)*n]
		var k int
		if lastAxis {
			k = pickRow(d, src[base:base+s], x)
		} else {
			k = pickStrided(d, src[base:], x, s, stride)
		}
		if k >= 0 {
			return r*n + k
		}
		base = g.nextRow(base, coord)
	}
	return -1
}

// The loops over the elements of a row live in functions of their own,
// kept out of line, so that the compiler has only the row's few values to
// keep in registers. Inlined into the loop over rows, which has many more,
// the element loop kept its counter in memory: every element then waited
// on a store and a load of it, and the backward took 1.6 times as long.

// pickRow sets d[k] = row[x[k]] for each k, and returns the first k whose
// index is outside [-len(row), len(row)-1], or -1.
//
//go:noinline
func pickRow[T any, I index](d, row []T, x []I) int {
	d = d[:len(x)]
	for k, v := range x {
		// norm, written out so that the range check is the bounds check
		// of row and the compiler drops the latter.
		j := int64(v)
		if j < 0 {
			j += int64(len(row))
		}
		if uint64(j) >= uint64(len(row)) {
			return k
		}
		d[k] = row[j]
	}
	return -1
}

// pickStrided sets d[k] = src[x[k]*stride+k] for each k, for an axis of
// size s, and returns the first k whose index is out of range, or -1.
//
//go:noinline
func pickStrided[T any, I index](d, src []T, x []I, s, stride int) int {
	d = d[:len(x)]
	for k, v := range x {
		j, ok := norm(v, s)
		if !ok {
			return k
		}
		d[k] = src[j*stride+k]
	}
	return -1
}

// float is the set of element types that have gradients.
type float interface{ ~float32 | ~float64 }

// addRows is the backward of takeRows restricted to destination rows
// jlo..jhi-1 of every outer block:
//
//	for o, i: if j := idx[i]; jlo <= j < jhi { dst[o][j][:] += c * src[o][i][:] }
//
// for outer blocks olo..ohi-1. Each destination row sums its sources in
// index order, whatever the split.
// With ahead set (see prefetches), it prefetches the destination row of
// the index rowsAhead on.
func addRows[T float, I index](dst, src []T, idx []I, c T, s, inner, olo, ohi, jlo, jhi int, ahead bool) {
	n := len(idx)
	for o := olo; o < ohi; o++ {
		for i, v := range idx {
			if ahead && i+rowsAhead < n {
				if j := wrap(idx[i+rowsAhead], s); j >= jlo && j < jhi {
					prefetchRow(dst[(o*s+j)*inner : (o*s+j+1)*inner])
				}
			}
			j := wrap(v, s)
			if j < jlo || j >= jhi {
				continue
			}
			addRow(dst[(o*s+j)*inner:(o*s+j+1)*inner], src[(o*n+i)*inner:(o*n+i+1)*inner], c)
		}
	}
}

// addFirstTouch is, for destination rows jlo..jhi-1 of block (rows of
// inner elements) other than row pad, clearing them and then
//
//	for i, v := range x { if j := wrap(v, s); jlo <= j < jhi && j != pad { block[j][:] += c * g[i][:] } }
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
func addFirstTouch[T float, I index](block, g []T, x []I, c T, inner, jlo, jhi, pad int) {
	s := len(block) / inner
	bp := getBits(jhi - jlo)
	defer toList(bitLists, bp)
	seen := *bp // rows written so far, from jlo
	ahead := prefetchesRepeats(block, inner, len(x))
	for i, v := range x {
		if ahead && i+rowsAhead < len(x) {
			if j := wrap(x[i+rowsAhead], s); j >= jlo && j < jhi && j != pad {
				if isSet(seen, j-jlo) {
					prefetchRow(block[j*inner : (j+1)*inner])
				}
			}
		}
		j := wrap(v, s)
		if j < jlo || j >= jhi || j == pad {
			continue
		}
		d, y := block[j*inner:(j+1)*inner], g[i*inner:(i+1)*inner]
		if b := j - jlo; !isSet(seen, b) {
			seen[b>>6] |= 1 << (b & 63)
			streamScaledRow(d, y, c)
		} else {
			addRow(d, y, c)
		}
	}
	for b := 0; b < jhi-jlo; {
		if isSet(seen, b) {
			b++
			continue
		}
		e := nextSet(seen, b, jhi-jlo)
		clearRows := block[(jlo+b)*inner : (jlo+e)*inner]
		streamClear(unsafe.Pointer(&clearRows[0]), uintptr(len(clearRows))*unsafe.Sizeof(T(0)))
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
// which n random indices into s rows give from n >= s/8. With fewer
// (emb_1m_64: 65,536 indices, 1,000,000 rows, 3% repeats) the look-ahead
// made the gradient 5-9% slower; with more (emb_50k_128: 16,384 indices,
// 50,000 rows, 15% repeats) 13-14% faster at 1 thread.
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
// for the parallel calls' jobs (see fromList), not a sync.Pool, which a
// collection empties. It holds at most 16 bitmaps of a bit per row each.
var bitLists = make(chan *[]uint64, 16)

// getBits returns n cleared bits from bitLists, or new ones; put them back
// with toList when done.
func getBits(n int) *[]uint64 {
	w := (n + 63) / 64
	p := fromList(bitLists)
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
func addAlong[T float, I index](dst, src []T, idx []I, c T, g *alongGeom, lo, hi, klo, khi int) {
	var buf [8]int
	coord := g.coords(&buf)
	base := g.rowBase(lo, coord)
	n, s := g.n, g.s
	lastAxis := g.axis == len(g.ishape)-1
	stride := g.stride(g.axis)
	for r := lo; r < hi; r++ {
		x, y := idx[r*n+klo:r*n+khi], src[r*n+klo:r*n+khi]
		if lastAxis {
			addRowAt(dst[base:base+s], y, x, c)
		} else {
			addStrided(dst[base+klo:], y, x, c, s, stride)
		}
		base = g.nextRow(base, coord)
	}
}

// addRowAt adds c*y[k] into row[x[k]] for each k; the indices are valid.
//
//go:noinline
func addRowAt[T float, I index](row, y []T, x []I, c T) {
	y = y[:len(x)]
	s := len(row)
	for k, v := range x {
		row[wrap(v, s)] += c * y[k]
	}
}

// addStrided adds c*y[k] into d[x[k]*stride+k] for each k, for an axis of
// size s; the indices are valid.
//
//go:noinline
func addStrided[T float, I index](d, y []T, x []I, c T, s, stride int) {
	y = y[:len(x)]
	for k, v := range x {
		d[wrap(v, s)*stride+k] += c * y[k]
	}
}

// addRow adds c*g[k] into d[k] for each k. For float32 and float64 rows
// it is gonum's axpy, which works on several elements per instruction on
// amd64 and gives each element the bits of d[k] + c*g[k] (a multiply, then
// an add, as the loop below does). With c == 0 it runs the loop, which,
// unlike axpy, still adds 0*Inf = NaN.
func addRow[T float](d, g []T, c T) {
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
