package kernel

import (
	"runtime"

	"github.com/gathergrad/gather/internal/parallel"
)

// rowMoves says how takeRows moves rows: ahead, it prefetches source rows
// before it copies them (see prefetches); stream, it writes them with
// streaming stores and fences them before it returns (see streams); batch,
// it moves them takeChunk at a time with copyRows or streamRows (see
// batches).
type rowMoves struct{ ahead, stream, batch bool }

// takeRows is, for src of shape [outer, s, inner] and dst of shape
// [outer, len(idx), inner] seen as outer*len(idx) rows of inner elements,
//
//	for r := lo; r < hi; r++ { o, i := r/len(idx), r%len(idx); dst[o][i][:] = src[o][idx[i]][:] }
//
// It returns the position in idx of the first index out of range, or -1.
func takeRows[T any, I Index](dst, src []T, idx []I, s, inner, lo, hi int, mv rowMoves) int {
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
func takeBlock[T any, I Index](d, block []T, x []I, inner int, mv rowMoves) int {
	s := len(block) / inner
	var next [rowsAhead]uintptr // addresses of rows to prefetch
	size := uintptr(inner) * elemSize(block)
	for k, v := range x {
		if mv.ahead && k%rowsAhead == 0 {
			prefetchAfter(&next, block, x, k, inner, size)
		}
		j, ok := Norm(v, s)
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

// takeBatched is takeBlock moving up to takeChunk rows at a time with one
// call of copyRows or streamRows, whose 32-byte loads and stores also move a
// row faster than copy's 16-byte ones for rows of 256 bytes or less. With
// mv.ahead set, the assembly prefetches the row rowsAhead after the one it
// moves, so the loads of the next rows are in flight while it copies.
// Rows must be a whole number of 32 bytes and T hold no pointers.
//
//go:noinline
func takeBatched[T any, I Index](d, block []T, x []I, inner int, mv rowMoves) int {
	var rows [takeChunk]uintptr // addresses of the rows to move
	size := uintptr(inner) * elemSize(block)
	for k := 0; k < len(x); k += takeChunk {
		batch := x[k:min(k+takeChunk, len(x))]
		if m := rowAddrs(rows[:], block, batch, inner); m < len(batch) {
			return k + m // the index at batch[m] is out of range
		}
		var ahead []uintptr
		if mv.ahead {
			ahead = rows[min(rowsAhead, len(batch)):len(batch)]
		}
		if mv.stream {
			streamRows(ptr(d[k*inner:]), rows[:len(batch)], size, ahead)
		} else {
			copyRows(ptr(d[k*inner:]), rows[:len(batch)], size, ahead)
		}
		runtime.KeepAlive(block) // rows holds its addresses as integers, which keep nothing alive
	}
	return -1
}

// takeChunk is how many rows takeBatched moves per call.
const takeChunk = 256

// prefetchAfter prefetches the rows of block (of size bytes) named by
// x[k+rowsAhead], ..., x[k+2*rowsAhead-1], up to the end of x or the
// first index out of range, using addrs for their addresses.
func prefetchAfter[T any, I Index](addrs *[rowsAhead]uintptr, block []T, x []I, k, inner int, size uintptr) {
	prefetchLines(addrs, rowAddrs(addrs[:], block, x[min(k+rowsAhead, len(x)):min(k+2*rowsAhead, len(x))], inner), size)
}

// rowAddrs stores in addrs the address of row x[i] of block, for rows of
// inner elements, for each i < len(addrs) until the first index out of
// range, and returns how many it stored.
func rowAddrs[T any, I Index](addrs []uintptr, block []T, x []I, inner int) int {
	heapOnly(block)
	s := len(block) / inner
	x = x[:min(len(x), len(addrs))]
	for i, v := range x {
		j, ok := Norm(v, s)
		if !ok {
			return i
		}
		addrs[i] = addr(block[j*inner:])
	}
	return len(x)
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
	size := elemSize(span)
	return uintptr(inner)*size >= minPrefetchRow && uintptr(len(span))*size >= minPrefetchSpan
}

// prefetchRow prefetches the elements of row.
func prefetchRow[T any](row []T) {
	if len(row) > 0 {
		prefetch(ptr(row), uintptr(len(row))*elemSize(row))
	}
}

// takeElems is takeRows for inner == 1, element by element.
func takeElems[T any, I Index](dst, src []T, idx []I, s, lo, hi int) int {
	n := len(idx)
	o, i := lo/n, lo%n
	dst = dst[:hi]
	for r := lo; r < hi; r++ {
		j, ok := Norm(idx[i], s)
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

// An Along describes a TakeAlong or ScatterAdd call: indices (and the
// output) of shape ishape, row-major data of shape dshape, along axis.
// Both are walked as rows of their last dimension.
type Along struct {
	ishape []int
	dshape []int
	small  [8]int // data strides for rank <= 8, held inline so that a geom needs no allocation
	big    []int  // data strides for higher ranks
	axis   int
	s      int // data.shape[axis]
	n      int // ishape[last]: the length of a row
}

// stride returns the row-major stride of data dimension d.
func (g *Along) stride(d int) int {
	if g.big != nil {
		return g.big[d]
	}
	return g.small[d]
}

func (g *Along) setStride(d, v int) {
	if g.big != nil {
		g.big[d] = v
	} else {
		g.small[d] = v
	}
}

// rowBase returns the data offset of the first element of indices row r,
// with the axis coordinate taken as 0, and the coordinates of that row.
func (g *Along) rowBase(r int, coord []int) int {
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
func (g *Along) nextRow(base int, coord []int) int {
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
func (g *Along) coords(buf *[8]int) []int {
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
func takeAlong[T any, I Index](dst, src []T, idx []I, g *Along, lo, hi int) int {
	var buf [8]int
	w := g.walk(lo, &buf)
	n, s := g.n, g.s
	for r := lo; r < hi; r++ {
		d, x := dst[r*n:(r+1)*n], idx[r*n:(r+1)*n]
		var k int
		if w.last {
			k = pickRow(d, src[w.base:w.base+s], x)
		} else {
			k = pickStrided(d, src[w.base:], x, s, w.stride)
		}
		if k >= 0 {
			return r*n + k
		}
		w.base = g.nextRow(w.base, w.coord)
	}
	return -1
}

// rowWalk follows the rows of an Along: base is the offset in data of the
// current row's first element, coord its coordinates (see nextRow).
type rowWalk struct {
	coord  []int
	base   int
	stride int  // the stride of data along the axis
	last   bool // the axis is the last: a row's elements are contiguous
}

// walk returns the rowWalk at row lo, its coordinates held in buf when
// they fit.
func (g *Along) walk(lo int, buf *[8]int) rowWalk {
	coord := g.coords(buf)
	return rowWalk{coord: coord, base: g.rowBase(lo, coord), stride: g.stride(g.axis), last: g.axis == len(g.ishape)-1}
}

// The loops over the elements of a row live in functions of their own,
// kept out of line, so that the compiler has only the row's few values to
// keep in registers. Inlined into the loop over rows, which has many more,
// the element loop keeps its counter in memory, and every element waits on
// a store and a load of it.

// pickRow sets d[k] = row[x[k]] for each k, and returns the first k whose
// index is outside [-len(row), len(row)-1], or -1.
//
//go:noinline
func pickRow[T any, I Index](d, row []T, x []I) int {
	d = d[:len(x)]
	n := int64(len(row))
	k := 0
	// Four at a time: each index wrapped without a branch (j>>63 is -1 for
	// a negative j, else 0), one taken branch per four elements. A group
	// with an index out of range is left to the loop below, which stops
	// at it.
	for ; k+4 <= len(x); k += 4 {
		g, o := x[k:k+4:k+4], d[k:k+4:k+4]
		j0, j1, j2, j3 := int64(g[0]), int64(g[1]), int64(g[2]), int64(g[3])
		j0 += j0 >> 63 & n
		j1 += j1 >> 63 & n
		j2 += j2 >> 63 & n
		j3 += j3 >> 63 & n
		if uint64(j0) >= uint64(len(row)) || uint64(j1) >= uint64(len(row)) ||
			uint64(j2) >= uint64(len(row)) || uint64(j3) >= uint64(len(row)) {
			break
		}
		o[0], o[1], o[2], o[3] = row[j0], row[j1], row[j2], row[j3]
	}
	for ; k < len(x); k++ {
		// norm, written out so that the range check is the bounds check
		// of row and the compiler drops the latter.
		j := int64(x[k])
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
func pickStrided[T any, I Index](d, src []T, x []I, s, stride int) int {
	d = d[:len(x)]
	for k, v := range x {
		j, ok := Norm(v, s)
		if !ok {
			return k
		}
		d[k] = src[j*stride+k]
	}
	return -1
}

// Take is, for src of shape [outer, s, inner] and dst of shape
// [outer, len(idx), inner] in row-major order,
//
//	for o, i: dst[o][i][:] = src[o][idx[i]][:]
//
// with negative indices counting from the end of the axis. It returns the
// position in idx of the first index outside [-s, s-1], or -1; on error,
// what it wrote into dst is unspecified, so a caller writing into memory
// its user can see checks the indices first (FirstBad). fresh says that
// dst is new memory, unlikely to be in any cache: rows then go into it
// with streaming stores where that pays (see streams). Large calls are
// split across goroutines. It is O(len(dst) + len(idx)).
func Take[T any, I Index](dst, src []T, idx []I, outer, s, inner int, fresh bool) int {
	rows := outer * len(idx)
	if rows == 0 || inner == 0 {
		// Nothing to move, but the indices must still be valid.
		return firstBad(idx, s)
	}
	dst = dst[:rows*inner]
	stream := fresh && streams(dst, src, inner)
	mv := rowMoves{ahead: prefetches(src, inner), stream: stream, batch: batches(dst, inner, stream)}
	return parallel.Run(rows, rows*inner, takeTask[T, I]{dst: dst, src: src, idx: idx, s: s, inner: inner, mv: mv})
}

// takeTask is Take's work for parallel.Run.
type takeTask[T any, I Index] struct {
	dst, src []T
	idx      []I
	s, inner int
	mv       rowMoves
}

func (t takeTask[T, I]) Part(lo, hi int) int {
	if t.inner == 1 {
		return takeElems(t.dst, t.src, t.idx, t.s, lo, hi)
	}
	return takeRows(t.dst, t.src, t.idx, t.s, t.inner, lo, hi, t.mv)
}

// NewAlong describes TakeAlong and ScatterAdd of row-major data of shape
// dshape with indices of shape ishape (the same rank, at least 1) along
// axis. The Along keeps both shapes.
func NewAlong(dshape, ishape []int, axis int) Along {
	g := Along{ishape: ishape, dshape: dshape, axis: axis, s: dshape[axis], n: ishape[len(ishape)-1]}
	if len(dshape) > len(g.small) {
		g.big = make([]int, len(dshape))
	}
	st := 1
	for d := len(dshape) - 1; d >= 0; d-- {
		g.setStride(d, st)
		st *= dshape[d]
	}
	return g
}

// TakeAlong is, for data src and indices idx of g's shapes, and dst of the
// shape of idx,
//
//	dst[c] = src[c with c[axis] = idx[c]]   for every coordinate c of idx
//
// with negative indices counting from the end of the axis. It returns the
// flat position in idx of the first index out of range, or -1, and leaves
// dst as Take does on error. Large calls are split across goroutines. It
// is O(len(idx)).
func TakeAlong[T any, I Index](dst, src []T, idx []I, g *Along) int {
	if len(idx) == 0 {
		return -1
	}
	rows := len(idx) / g.n
	return parallel.Run(rows, len(idx), alongTask[T, I]{dst: dst, src: src, idx: idx, g: *g}) // a copy, so that g itself stays on the caller's stack
}

// alongTask is TakeAlong's work for parallel.Run.
type alongTask[T any, I Index] struct {
	dst, src []T
	idx      []I
	g        Along
}

func (t alongTask[T, I]) Part(lo, hi int) int { return takeAlong(t.dst, t.src, t.idx, &t.g, lo, hi) }

// Number is the set of element types TakeAdd and TakeAlongAdd add.
type Number interface {
	~float32 | ~float64 | ~int | ~int32 | ~int64
}

// TakeAdd is Take adding into dst instead of writing it:
//
//	for o, i: dst[o][i][:] += src[o][idx[i]][:]
//
// Every index must already be checked. Each element of dst is written by
// one goroutine, so the result does not depend on GOMAXPROCS. It is
// O(len(dst)).
func TakeAdd[T Number, I Index](dst, src []T, idx []I, outer, s, inner int) {
	rows := outer * len(idx)
	if rows == 0 || inner == 0 {
		return
	}
	parallel.Run(rows, rows*inner, takeAddTask[T, I]{dst: dst[:rows*inner], src: src, idx: idx, s: s, inner: inner})
}

// takeAddTask is TakeAdd's work for parallel.Run: rows lo..hi-1 of dst.
type takeAddTask[T Number, I Index] struct {
	dst, src []T
	idx      []I
	s, inner int
}

func (t takeAddTask[T, I]) Part(lo, hi int) int {
	n, inner := len(t.idx), t.inner
	for r := lo; r < hi; r++ {
		o, i := r/n, r%n
		j := o*t.s + Wrap(t.idx[i], t.s)
		AddInto(t.dst[r*inner:(r+1)*inner], t.src[j*inner:(j+1)*inner])
	}
	return -1
}

// AddInto is d[k] += x[k] for each k; float32 and float64 rows go through
// AddRow's axpy (1*x[k] is x[k], so the bits are the same).
func AddInto[T Number](d, x []T) {
	switch d := any(d).(type) {
	case []float32:
		AddRow(d, any(x).([]float32), 1)
		return
	case []float64:
		AddRow(d, any(x).([]float64), 1)
		return
	}
	x = x[:len(d)]
	for k := range d {
		d[k] += x[k]
	}
}

// TakeAlongAdd is TakeAlong adding into dst instead of writing it:
//
//	dst[c] += src[c with c[axis] = idx[c]]   for every coordinate c of idx
//
// Every index must already be checked. The result does not depend on
// GOMAXPROCS. It is O(len(idx)).
func TakeAlongAdd[T Number, I Index](dst, src []T, idx []I, g *Along) {
	if len(idx) == 0 {
		return
	}
	rows := len(idx) / g.n
	parallel.Run(rows, len(idx), alongAddTask[T, I]{dst: dst, src: src, idx: idx, g: *g})
}

// alongAddTask is TakeAlongAdd's work for parallel.Run.
type alongAddTask[T Number, I Index] struct {
	dst, src []T
	idx      []I
	g        Along
}

func (t alongAddTask[T, I]) Part(lo, hi int) int {
	takeAlongAdd(t.dst, t.src, t.idx, &t.g, lo, hi)
	return -1
}

// takeAlongAdd is TakeAlongAdd for rows lo..hi-1 of idx.
func takeAlongAdd[T Number, I Index](dst, src []T, idx []I, g *Along, lo, hi int) {
	var buf [8]int
	w := g.walk(lo, &buf)
	n, s := g.n, g.s
	step := 1 // how far the data element moves per step along a row
	if w.last {
		step = 0 // along the axis itself the index alone says where
	}
	for r := lo; r < hi; r++ {
		d, x := dst[r*n:(r+1)*n], idx[r*n:(r+1)*n]
		for k, v := range x {
			d[k] += src[w.base+Wrap(v, s)*w.stride+k*step]
		}
		w.base = g.nextRow(w.base, w.coord)
	}
}
