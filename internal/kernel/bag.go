package kernel

import (
	"runtime"
	"slices"

	"github.com/gathergrad/gather/internal/parallel"
)

// A BagMode is how the bag kernels pool a bag (nn.BagMode maps its
// modes to these with its kernel method).
type BagMode int

// The pooling modes of the bag kernels.
const (
	BagSum BagMode = iota
	BagMean
	BagMax
)

// A Bags describes the bags of a pooled lookup: bag b is the ids at
// positions Bounds[b] to Bounds[b+1]-1; ids equal to Pad (if Pad >= 0)
// are skipped; Mode is BagSum, BagMean or BagMax. BagPool writes bag b's
// row at out[b*Stride:], or at out[b*dim:] when Stride is 0.
type Bags struct {
	Bounds []int
	Pad    int
	Mode   BagMode
	Stride int
}

// stride returns the distance between two output rows of bg's bags.
func (bg *Bags) stride(dim int) int {
	if bg.Stride > 0 {
		return bg.Stride
	}
	return dim
}

// N returns the number of bags.
func (bg *Bags) N() int { return len(bg.Bounds) - 1 }

// boundsLists holds the memory of bag bounds for reuse, a free list as
// bitLists is: a bag run in a training loop allocates none, and memory the
// process has not touched yet (a page fault per 4 KiB) is not written every
// run until the collector frees some.
var boundsLists = parallel.NewList[[]int](16)

// NewBounds returns memory for n bag bounds (of unspecified values) from
// boundsLists, or new; FreeBounds gives it back.
func NewBounds(n int) *[]int {
	p := boundsLists.Get()
	*p = slices.Grow((*p)[:0], n)[:n]
	return p
}

// FreeBounds gives p, from NewBounds, back to boundsLists.
func FreeBounds(p *[]int) { boundsLists.Put(p) }

// count returns how many ids of bag b are not padding.
func count[I Index](bg *Bags, ids []I, vocab, b int) int {
	if bg.Pad < 0 {
		return bg.Bounds[b+1] - bg.Bounds[b]
	}
	m := 0
	for _, v := range ids[bg.Bounds[b]:bg.Bounds[b+1]] {
		if Wrap(v, vocab) != bg.Pad {
			m++
		}
	}
	return m
}

// weight returns the weight of position i: w[i], or 1 without weights.
func weight[T Float](w []T, i int) T {
	if w == nil {
		return 1
	}
	return w[i]
}

// BagPool is, for table [vocab, dim] and out [bags, dim] (rows
// bg.Stride apart if it is set), with every id
// already checked and r(i) = table[ids[i]] scaled by w[i] (or 1 if w is
// nil), for each bag b over its non-padding positions i:
//
//	sum:  out[b] = Σ r(i)
//	mean: out[b] = Σ r(i) / m, m the number of non-padding ids in the bag
//	max:  out[b][d] = max over i of r(i)[d]
//
// A bag with no non-padding id pools to zeros. Each output row is written
// once, in one pass over its bag; no [n, dim] array is made. Bags are
// split across goroutines. It is O(n × dim).
func BagPool[T Float, I Index](out, table []T, ids []I, w []T, dim int, bg *Bags) {
	parallel.Run(bg.N(), len(ids)*dim+bg.N()*dim, bagTask[T, I]{out: out, table: table, ids: ids, w: w, dim: dim, bg: *bg,
		ahead: prefetches(table, dim), size: uintptr(dim) * sizeOf[T]()})
}

// bagTask is BagPool's work for parallel.Run: the bags lo..hi-1.
type bagTask[T Float, I Index] struct {
	out, table []T
	ids        []I
	w          []T
	dim        int
	bg         Bags
	ahead      bool
	size       uintptr
}

func (t bagTask[T, I]) Part(lo, hi int) int {
	out, table, ids, w, dim, bg := t.out, t.table, t.ids, t.w, t.dim, &t.bg
	if o32, ok := any(out).([]float32); ok && bg.Mode != BagMax && sumsRows(t.size) {
		bagSum32(o32, any(table).([]float32), ids, any(w).([]float32), dim, bg, lo, hi)
		return -1
	}
	vocab, stride := len(table)/max(dim, 1), bg.stride(dim)
	var next [rowsAhead]uintptr
	for b := lo; b < hi; b++ {
		o := out[b*stride : b*stride+dim]
		clear(o)
		first := true
		for i := bg.Bounds[b]; i < bg.Bounds[b+1]; i++ {
			// A row is a long run of loads and adds, which keeps the
			// processor from reaching the next rows' loads by itself:
			// every rowsAhead ids, ask for the rows of the next
			// rowsAhead in one call (see prefetches and takeBlock).
			if t.ahead && i%rowsAhead == 0 {
				prefetchAfter(&next, table, ids, i, dim, t.size)
			}
			j := Wrap(ids[i], vocab)
			if j == bg.Pad {
				continue
			}
			row, c := table[j*dim:(j+1)*dim], weight(w, i)
			row = row[:len(o)]
			switch {
			case bg.Mode != BagMax:
				AddRow(o, row, c)
			case first:
				for d := range o {
					o[d] = c * row[d]
				}
			default:
				for d := range o {
					if v := c * row[d]; v > o[d] {
						o[d] = v
					}
				}
			}
			first = false
		}
		meanOf(o, bg, ids, vocab, b)
	}
	return -1
}

// meanOf divides o, the sum of bag b, by the bag's count of non-padding
// ids when the mode is BagMean (and the count is not 0).
func meanOf[T Float, I Index](o []T, bg *Bags, ids []I, vocab, b int) {
	if bg.Mode != BagMean {
		return
	}
	if m := count(bg, ids, vocab, b); m > 0 {
		inv := 1 / T(m)
		for d := range o {
			o[d] *= inv
		}
	}
}

// sumsRows reports whether bagSum32 pools rows of size bytes: sumRows in
// assembly needs a multiple of 32 bytes.
func sumsRows(size uintptr) bool { return hasRowAsm && size > 0 && size%32 == 0 }

// bagChunk is how many rows bagSum32 collects before it adds them; while
// sumRows adds a row it prefetches the one bagAhead rows later.
const (
	bagChunk = 256
	bagAhead = 16
)

// bagSum32 is BagPool for float32, BagSum and BagMean, and bags lo..hi-1.
// It collects the addresses (and weights) of the non-padding rows of as
// many whole bags as fit in bagChunk, then adds each bag's rows into its
// output row with one call of sumRows, which meanwhile prefetches the rows
// that follow, across the end of the bag: the loads of the next bag are in
// flight before its turn comes. A bag longer than bagChunk is added in
// pieces of bagChunk rows.
func bagSum32[I Index](out, table []float32, ids []I, w []float32, dim int, bg *Bags, lo, hi int) {
	heapOnly(table)
	vocab, stride := len(table)/dim, bg.stride(dim)
	size := uintptr(dim) * 4
	var rows [bagChunk]uintptr
	var coef [bagChunk]float32 // with weights; sumRows gets coef[:0] without
	var ends [bagChunk]int     // ends[g-b]: where bag g's rows end in rows
	scaled := min(len(w), 1)
	// collect appends bag g's rows from position i on, up to bagChunk in
	// all, and returns where it stopped.
	k := 0
	collect := func(g, i int) int {
		for ; i < bg.Bounds[g+1] && k < bagChunk; i++ {
			j := Wrap(ids[i], vocab)
			if j == bg.Pad {
				continue
			}
			rows[k] = addr(table[j*dim:])
			if w != nil {
				coef[k] = w[i]
			}
			k++
		}
		return i
	}
	// add adds rows[s:e] into o (to o's values with acc, else from zero)
	// and multiplies o by scale, prefetching the rows bagAhead later. With
	// no rows and no acc, o is cleared.
	add := func(o []float32, s, e int, scale float32, acc bool) {
		switch {
		case e > s:
			sumRows(ptr(o), rows[s:e], coef[s*scaled:e*scaled], size,
				rows[min(s+bagAhead, k):min(e+bagAhead, k)], scale, acc)
		case !acc:
			clear(o)
		}
	}
	for b := lo; b < hi; {
		// The rows of whole bags b..g-1, as many as fit.
		k = 0
		g := b
		for g < hi && g-b < bagChunk && k+bg.Bounds[g+1]-bg.Bounds[g] <= bagChunk {
			collect(g, bg.Bounds[g])
			ends[g-b] = k
			g++
		}
		if g == b {
			// Bag b alone is longer than bagChunk: add it in pieces.
			o := out[b*stride : b*stride+dim]
			acc := false
			for i := bg.Bounds[b]; i < bg.Bounds[b+1]; {
				k = 0
				i = collect(b, i)
				add(o, 0, k, 1, acc)
				acc = acc || k > 0
			}
			if !acc {
				clear(o) // every id was padding
			}
			meanOf(o, bg, ids, vocab, b)
			b++
			continue
		}
		// A mean divides by the bag's count of rows added, e-s, in sumRows.
		s := 0
		for h := b; h < g; h++ {
			o := out[h*stride : h*stride+dim]
			e, scale := ends[h-b], float32(1)
			if bg.Mode == BagMean && e > s {
				scale = 1 / float32(e-s)
			}
			add(o, s, e, scale, false) // written, never read: o may be fresh memory
			s = e
		}
		b = g
	}
	runtime.KeepAlive(table)
}

// BagArgmax returns, for BagMax, the position in ids of the entry that
// gave each element of the pooled output: arg[b*dim+d] is the first
// non-padding position i of bag b with the largest r(i)[d], or -1 for an
// empty bag. It is O(n × dim).
func BagArgmax[T Float, I Index](table []T, ids []I, w []T, dim int, bg *Bags) []int32 {
	arg := make([]int32, bg.N()*dim)
	BagArgmaxInto(arg, make([]float64, bg.N()*dim), table, ids, w, dim, bg)
	return arg
}

// BagArgmaxInto is BagArgmax into arg, with best as scratch, both of
// length bags × dim.
func BagArgmaxInto[T Float, I Index](arg []int32, best []float64, table []T, ids []I, w []T, dim int, bg *Bags) {
	parallel.Run(bg.N(), len(ids)*dim, argmaxTask[T, I]{arg: arg, best: best, table: table, ids: ids, w: w, dim: dim, bg: *bg})
}

// argmaxTask is BagArgmaxInto's work for parallel.Run: the bags lo..hi-1.
type argmaxTask[T Float, I Index] struct {
	arg      []int32
	best     []float64
	table, w []T
	ids      []I
	dim      int
	bg       Bags
}

func (t argmaxTask[T, I]) Part(lo, hi int) int {
	table, ids, w, dim, bg := t.table, t.ids, t.w, t.dim, &t.bg
	vocab := len(table) / max(dim, 1)
	for b := lo; b < hi; b++ {
		a, m := t.arg[b*dim:(b+1)*dim], t.best[b*dim:(b+1)*dim]
		for d := range a {
			a[d] = -1
		}
		for i := bg.Bounds[b]; i < bg.Bounds[b+1]; i++ {
			j := Wrap(ids[i], vocab)
			if j == bg.Pad {
				continue
			}
			row, c := table[j*dim:(j+1)*dim], weight(w, i)
			for d := range a {
				// float64 holds every T exactly, in the same order.
				if v := float64(c * row[d]); a[d] < 0 || v > m[d] {
					a[d], m[d] = int32(i), v
				}
			}
		}
	}
	return -1
}

// bagCoefs returns, for BagSum and BagMean, each position's factor in its
// bag's output, w[i] (or 1), divided by the bag's count for BagMean, and 0
// for padding; and the bag of each position.
func bagCoefs[T Float, I Index](ids []I, w []T, vocab int, bg *Bags) (coef []T, bagOf []int32) {
	coef, bagOf = make([]T, len(ids)), make([]int32, len(ids))
	for b := range bg.N() {
		inv := T(1)
		if bg.Mode == BagMean {
			if m := count(bg, ids, vocab, b); m > 0 {
				inv = 1 / T(m)
			}
		}
		for i := bg.Bounds[b]; i < bg.Bounds[b+1]; i++ {
			bagOf[i] = int32(b)
			if Wrap(ids[i], vocab) != bg.Pad {
				coef[i] = weight(w, i) * inv
			}
		}
	}
	return coef, bagOf
}

// BagTableGrad adds into dst [vocab, dim] the gradient of BagPool with
// respect to the table, for upstream gradient g [bags, dim], scaled by c
// and, if freq is set, divided for each row by the number of times its id
// occurs in ids:
//
//	sum, mean: dst[ids[i]] += c * coef(i) * g[bag of i]
//	max:       dst[ids[i]][d] += c * w[i] * g[b][d]   where arg[b][d] == i
//
// with coef(i) as BagPool weighs position i; padding ids get nothing. arg
// is BagArgmax's result (BagMax only). Each destination row sums its terms
// in position order and goroutines own disjoint ranges of rows, so the
// result does not depend on GOMAXPROCS. It is O(n × dim) plus, with freq,
// O(vocab).
func BagTableGrad[T Float, I Index](dst, g, table []T, ids []I, w []T, dim int, bg *Bags, arg []int32, c T, freq bool) {
	vocab := len(dst) / max(dim, 1)
	coef, bagOf := bagCoefs(ids, w, vocab, bg)
	if bg.Mode == BagMax {
		for i := range coef {
			coef[i] = 0
		}
		for _, i := range arg {
			if i >= 0 {
				coef[i] = 1 // marks the positions that won an element
			}
		}
	}
	var times []int32
	if freq {
		times = make([]int32, vocab)
		for _, v := range ids {
			times[Wrap(v, vocab)]++
		}
	}
	parallel.For(vocab, len(ids)*dim, func(jlo, jhi int) {
		for i, v := range ids {
			j := Wrap(v, vocab)
			if j < jlo || j >= jhi || j == bg.Pad || coef[i] == 0 {
				continue
			}
			b := int(bagOf[i])
			k := c
			if times != nil {
				k /= T(times[j])
			}
			d, gb := dst[j*dim:(j+1)*dim], g[b*dim:(b+1)*dim]
			if bg.Mode != BagMax {
				AddRow(d, gb, k*coef[i])
				continue
			}
			a, wi := arg[b*dim:(b+1)*dim], weight(w, i)
			for e := range d {
				if a[e] == int32(i) {
					d[e] += k * wi * gb[e]
				}
			}
		}
	})
}

// BagWeightGrad sets gw [n] to the gradient of BagPool with respect to
// the weights, for upstream gradient g [bags, dim]:
//
//	sum, mean: gw[i] = ⟨table[ids[i]], g[bag of i]⟩ × (1, or 1/m for mean)
//	max:       gw[i] = Σ over d with arg[b][d] == i of table[ids[i]][d] * g[b][d]
//
// and 0 for padding. It is O(n × dim).
func BagWeightGrad[T Float, I Index](gw, g, table []T, ids []I, dim int, bg *Bags, arg []int32) {
	vocab := len(table) / max(dim, 1)
	coef, bagOf := bagCoefs[T](ids, nil, vocab, bg)
	parallel.For(len(ids), len(ids)*dim, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			j := Wrap(ids[i], vocab)
			if j == bg.Pad {
				gw[i] = 0
				continue
			}
			b := int(bagOf[i])
			row, gb := table[j*dim:(j+1)*dim], g[b*dim:(b+1)*dim]
			gb = gb[:len(row)]
			var s T
			if bg.Mode == BagMax {
				a := arg[b*dim : (b+1)*dim]
				for d := range row {
					if a[d] == int32(i) {
						s += row[d] * gb[d]
					}
				}
			} else {
				for d := range row {
					s += row[d] * gb[d]
				}
				s *= coef[i]
			}
			gw[i] = s
		}
	})
}

// BagPositionGrad sets out [n, dim] to the gradient each position's row
// received, for upstream gradient g [bags, dim]:
//
//	sum, mean: out[i] = coef(i) * g[bag of i]
//	max:       out[i][d] = w[i] * g[b][d] where arg[b][d] == i, else 0
//
// and zeros for padding; summed by row id, these give BagTableGrad's rows.
// It is O(n × dim).
func BagPositionGrad[T Float, I Index](out, g []T, ids []I, w []T, vocab, dim int, bg *Bags, arg []int32) {
	nb := bg.N()
	clear(out[bg.Bounds[nb]*dim:]) // positions after the last bag
	for b := range nb {
		inv := T(1)
		if bg.Mode == BagMean {
			if m := count(bg, ids, vocab, b); m > 0 {
				inv = 1 / T(m)
			}
		}
		gb := g[b*dim : (b+1)*dim]
		for i := bg.Bounds[b]; i < bg.Bounds[b+1]; i++ {
			o := out[i*dim : (i+1)*dim]
			gb := gb[:len(o)]
			switch {
			case Wrap(ids[i], vocab) == bg.Pad:
				clear(o)
			case bg.Mode == BagMax:
				a, wi := arg[b*dim:(b+1)*dim], weight(w, i)
				for d := range o {
					o[d] = 0
					if a[d] == int32(i) {
						o[d] = wi * gb[d]
					}
				}
			default:
				c := weight(w, i) * inv
				for d := range o {
					o[d] = c * gb[d]
				}
			}
		}
	}
}

// OffsetBounds sets bounds[b] = off[b] for the len(bounds)-1 bags' starts
// and bounds[len(bounds)-1] = n, and returns -1; or it returns the first b
// whose offset breaks the rules, with the first 0, none less than the one
// before, none past n (bounds then holds the starts before it).
func OffsetBounds[I Index](bounds []int, off []I, n int) int {
	bags := len(bounds) - 1
	for b, v := range off[:bags] {
		if b == 0 && v != 0 || b > 0 && int64(v) < int64(bounds[b-1]) || int64(v) > int64(n) {
			return b
		}
		bounds[b] = int(v)
	}
	bounds[bags] = n
	return -1
}

// EvenBounds sets bounds[b] = b*per: bags of per ids each.
func EvenBounds(bounds []int, per int) {
	for b := range bounds {
		bounds[b] = b * per
	}
}

// PackIDs writes the ids of bags one after another into dst and pad into
// the rest of it; PackOffsets writes the start of each bag into dst.
func PackIDs[I Index](dst []I, bags [][]int, pad int) {
	p := 0
	for _, bag := range bags {
		for _, v := range bag {
			dst[p] = I(v)
			p++
		}
	}
	for ; p < len(dst); p++ {
		dst[p] = I(pad)
	}
}

// PackOffsets writes the start of each of bags, packed one after another,
// into dst.
func PackOffsets[I Index](dst []I, bags [][]int) {
	p := 0
	for b, bag := range bags {
		dst[b] = I(p)
		p += len(bag)
	}
}

// Int32Misfit returns the last of pad and the ids of bags that an int32
// cannot hold and false, or 0 and true when every one fits.
func Int32Misfit(bags [][]int, pad int) (int, bool) {
	fits := func(v int) bool { return int(int32(v)) == v }
	bad, ok := pad, fits(pad)
	for _, bag := range bags {
		for _, v := range bag {
			if !fits(v) {
				bad, ok = v, false
			}
		}
	}
	if ok {
		return 0, true
	}
	return bad, false
}
