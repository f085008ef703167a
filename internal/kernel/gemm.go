package kernel

import (
	"math"
	"math/big"
	"unsafe"

	"github.com/gathergrad/gather/internal/parallel"
)

// Gemm sets c to alpha·op(a)·op(b) + beta·c, BLAS's xGEMM on row-major
// matrices: op(a) is m×k (a, or its transpose when transA is set, with
// leading dimension lda), op(b) is k×n, c is m×n with leading dimension
// ldc. As BLAS states it, c is not read when beta is 0, and a and b are
// not read when alpha is 0 or k is 0; c must not overlap a or b. The
// caller checks the dimensions (BLAS's argument rules).
//
// It is the GotoBLAS/BLIS structure: for each block of nc columns of
// op(b) and kc of its rows, the block is packed into panels of nr
// columns; for each block of mc rows of op(a), that block is packed into
// panels of mr rows; a micro-kernel computes each mr×nr tile of their
// product as kc fused multiply-adds per element, in order of k from zero,
// and the tile is added into c (scaled by alpha; the first kc block
// applies beta). Packing pays only when a panel is used many times: an
// operand used by few tiles (op(a) when n is small, op(b) when m is
// small and it is not transposed) is read in place instead, with the same
// multiply-adds in the same order. The micro-kernel is assembly (AVX2
// and FMA) where the processor has them (gemm_amd64.s), else its Go twin,
// which gives the same bits. A large product is split across goroutines
// by rows of c, or by columns when it has more columns than rows; each
// element's sums are the same whatever the split, so results do not
// depend on GOMAXPROCS. It allocates nothing once its buffers are kept.
// It is O(m·n·k).
func Gemm[T Float](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if alpha == 0 || k == 0 {
		scaleRows(m, n, beta, c, ldc)
		return
	}
	g := gemmOf[T]()
	p := gemmProblem[T]{g: g, transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, a: a, lda: lda, b: b, ldb: ldb, beta: beta, c: c, ldc: ldc}
	p.directA = n <= directAMaxN*g.nr
	p.directB = !transB && m <= directBMaxM*g.mr
	rows, cols := (m+g.mr-1)/g.mr, (n+g.nr-1)/g.nr
	parts := rows
	if p.byCols = cols > rows; p.byCols {
		parts = cols
	}
	parallel.RunRanges(parts, m*n*k/gemmWorkPerElement, p)
}

// directAMaxN and directBMaxM: op(a) is read in place when c has at most
// directAMaxN panels of nr columns (each panel of op(a) would serve that
// many tiles), op(b) when c has at most directBMaxM panels of mr rows.
const directAMaxN, directBMaxM = 8, 48

// gemmWorkPerElement divides m·n·k into the work parallel.Run weighs: a
// product is split across goroutines from about 2M multiply-adds on.
const gemmWorkPerElement = 64

// scaleRows sets c to beta·c (zeros for beta 0, without reading c).
func scaleRows[T Float](m, n int, beta T, c []T, ldc int) {
	for i := range m {
		row := c[i*ldc : i*ldc+n]
		switch beta {
		case 0:
			clear(row)
		case 1:
		default:
			for j := range row {
				row[j] *= beta
			}
		}
	}
}

// gemmParams are one dtype's blocking and micro-kernel.
type gemmParams[T Float] struct {
	mr, nr     int // the micro-kernel's tile
	kc, mc, nc int // the blocks: kc·nr of b in L1, mc·kc of a in L2
	// kernel writes the mr×nr tile of the product of an mr×kc block of a
	// (element (i, l) at a[i·ai + l·al]) and a kc×nr block of b (row l at
	// b[l·bl:]) into c, rows ldc apart: c = tile, or c += tile with add,
	// where tile[i][j] = fma(a[i][kc-1], b[kc-1][j], ... fma(a[i][0], b[0][j], 0)).
	kernel func(kc int, a []T, ai, al int, b []T, bl int, c []T, ldc int, add bool)
	bufs   parallel.List[gemmBuf[T]]
}

// gemmBuf is one goroutine's packed blocks and tile.
type gemmBuf[T Float] struct {
	a, b, tile []T
}

var (
	sgemm = gemmParams[float32]{mr: 6, nr: 16, kc: 256, mc: 120, nc: 3072, kernel: kernelS, bufs: parallel.NewList[gemmBuf[float32]](16)}
	dgemm = gemmParams[float64]{mr: 6, nr: 8, kc: 256, mc: 96, nc: 2048, kernel: kernelD, bufs: parallel.NewList[gemmBuf[float64]](16)}
)

func gemmOf[T Float]() *gemmParams[T] {
	var zero T
	if unsafe.Sizeof(zero) == 4 {
		return any(&sgemm).(*gemmParams[T])
	}
	return any(&dgemm).(*gemmParams[T])
}

// gemmProblem is one Gemm call, for parallel.RunRanges: Part computes the
// panels [lo, hi) of c, of mr rows, or of nr columns with byCols.
type gemmProblem[T Float] struct {
	g                *gemmParams[T]
	transA, transB   bool
	m, n, k          int
	alpha, beta      T
	a, b, c          []T
	lda, ldb, ldc    int
	directA, directB bool // op(a), op(b) read in place, not packed
	byCols           bool
}

func (p gemmProblem[T]) Part(lo, hi int) int {
	g := p.g
	r0, r1, c0, c1 := 0, p.m, 0, p.n
	if p.byCols {
		c0, c1 = lo*g.nr, min(hi*g.nr, p.n)
	} else {
		r0, r1 = lo*g.mr, min(hi*g.mr, p.m)
	}
	buf := g.bufs.Get()
	defer g.bufs.Put(buf)
	buf.tile = grow(buf.tile, g.mr*g.nr)
	buf.a = grow(buf.a, min(g.mc, roundUp(r1-r0, g.mr))*min(g.kc, p.k))
	buf.b = grow(buf.b, min(g.nc, roundUp(c1-c0, g.nr))*min(g.kc, p.k))
	for jc := c0; jc < c1; jc += g.nc {
		nc := min(g.nc, c1-jc)
		for pc := 0; pc < p.k; pc += g.kc {
			kc := min(g.kc, p.k-pc)
			switch {
			case !p.directB:
				p.packB(buf.b, pc, kc, jc, nc)
			case nc%g.nr != 0: // the last, narrower panel
				p.packB(buf.b, pc, kc, jc+nc-nc%g.nr, nc%g.nr)
			}
			for ic := r0; ic < r1; ic += g.mc {
				mc := min(g.mc, r1-ic)
				switch {
				case !p.directA:
					p.packA(buf.a, ic, mc, pc, kc)
				case mc%g.mr != 0: // the last, shorter panel
					p.packA(buf.a, ic+mc-mc%g.mr, mc%g.mr, pc, kc)
				}
				for jr := 0; jr < nc; jr += g.nr {
					w := min(g.nr, nc-jr)
					b, bl := buf.b[jr*kc:], g.nr
					switch {
					case p.directB && w == g.nr:
						b, bl = p.b[pc*p.ldb+jc+jr:], p.ldb
					case p.directB:
						b = buf.b
					}
					for ir := 0; ir < mc; ir += g.mr {
						h := min(g.mr, mc-ir)
						a, ai, al := buf.a[ir*kc:], 1, g.mr
						switch {
						case p.directA && h == g.mr && p.transA:
							a, ai, al = p.a[pc*p.lda+ic+ir:], 1, p.lda
						case p.directA && h == g.mr:
							a, ai, al = p.a[(ic+ir)*p.lda+pc:], p.lda, 1
						case p.directA:
							a = buf.a
						}
						if p.alpha == 1 && h == g.mr && w == g.nr && (pc > 0 || p.beta == 0 || p.beta == 1) {
							at := (ic+ir)*p.ldc + jc + jr
							g.kernel(kc, a, ai, al, b, bl, p.c[at:], p.ldc, pc > 0 || p.beta == 1)
							continue
						}
						g.kernel(kc, a, ai, al, b, bl, buf.tile, g.nr, false)
						p.update(buf.tile, ic+ir, h, jc+jr, w, pc == 0)
					}
				}
			}
		}
	}
	return -1
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func roundUp(x, m int) int { return (x + m - 1) / m * m }

// packB packs rows pc..pc+kc and columns jc..jc+nc of op(b) into panels
// of nr columns, each kc rows of nr values, zeros past column nc.
func (p *gemmProblem[T]) packB(dst []T, pc, kc, jc, nc int) {
	nr := p.g.nr
	for jr := 0; jr < nc; jr += nr {
		w := min(nr, nc-jr)
		panel := dst[jr*kc : (jr+nr)*kc]
		if p.transB { // op(b)[l][j] = b[j][l]: each row of b read along, a column of the panel
			for j := range nr {
				if j >= w {
					for l := range kc {
						panel[l*nr+j] = 0
					}
					continue
				}
				col := p.b[(jc+jr+j)*p.ldb+pc:][:kc]
				for l, v := range col {
					panel[l*nr+j] = v
				}
			}
			continue
		}
		for l := range kc {
			row := panel[l*nr : (l+1)*nr]
			copy(row, p.b[(pc+l)*p.ldb+jc+jr:][:w])
			clear(row[w:])
		}
	}
}

// packA packs rows ic..ic+mc and columns pc..pc+kc of op(a) into panels
// of mr rows, each kc columns of mr values, zeros past row mc.
func (p *gemmProblem[T]) packA(dst []T, ic, mc, pc, kc int) {
	mr := p.g.mr
	for ir := 0; ir < mc; ir += mr {
		h := min(mr, mc-ir)
		panel := dst[ir*kc : (ir+mr)*kc]
		if p.transA { // op(a)[i][l] = a[l][i]: each column of the panel is a row of a
			for l := range kc {
				col := panel[l*mr : (l+1)*mr]
				copy(col, p.a[(pc+l)*p.lda+ic+ir:][:h])
				clear(col[h:])
			}
			continue
		}
		if h == 6 && mr == 6 {
			// Six rows read side by side, each column written whole.
			at := (ic+ir)*p.lda + pc
			r0, r1, r2 := p.a[at:][:kc], p.a[at+p.lda:][:kc], p.a[at+2*p.lda:][:kc]
			r3, r4, r5 := p.a[at+3*p.lda:][:kc], p.a[at+4*p.lda:][:kc], p.a[at+5*p.lda:][:kc]
			panel = panel[:kc*6]
			for l := range r0 {
				col := panel[l*6 : l*6+6 : l*6+6]
				col[0], col[1], col[2], col[3], col[4], col[5] = r0[l], r1[l], r2[l], r3[l], r4[l], r5[l]
			}
			continue
		}
		for i := range h {
			row := p.a[(ic+ir+i)*p.lda+pc:][:kc]
			for l, v := range row {
				panel[l*mr+i] = v
			}
		}
		for i := h; i < mr; i++ {
			for l := range kc {
				panel[l*mr+i] = 0
			}
		}
	}
}

// update adds the h×w corner of tile into c at row i0, column j0:
// c = alpha·tile + beta·c for the first kc block (first), else c += alpha·tile.
func (p *gemmProblem[T]) update(tile []T, i0, h, j0, w int, first bool) {
	nr := p.g.nr
	for i := range h {
		t := tile[i*nr : i*nr+w]
		c := p.c[(i0+i)*p.ldc+j0:][:w]
		switch {
		case first && p.beta == 0:
			for j, v := range t {
				c[j] = p.alpha * v
			}
		case first && p.beta != 1:
			for j, v := range t {
				c[j] = p.alpha*v + p.beta*c[j]
			}
		default:
			for j, v := range t {
				c[j] += p.alpha * v
			}
		}
	}
}

// kernelSGo is gemmParams.kernel for float32 (mr 6, nr 16): the twin of
// the assembly, and the kernel where there is none.
func kernelSGo(kc int, a []float32, ai, al int, b []float32, bl int, c []float32, ldc int, add bool) {
	const mr, nr = 6, 16
	var acc [mr * nr]float32
	for l := range kc {
		brow := b[l*bl : l*bl+nr]
		for i := range mr {
			ail, row := a[i*ai+l*al], acc[i*nr:(i+1)*nr]
			for j, bj := range brow {
				row[j] = FMA32(ail, bj, row[j])
			}
		}
	}
	store(mr, nr, acc[:], c, ldc, add)
}

// kernelDGo is gemmParams.kernel for float64 (mr 6, nr 8).
func kernelDGo(kc int, a []float64, ai, al int, b []float64, bl int, c []float64, ldc int, add bool) {
	const mr, nr = 6, 8
	var acc [mr * nr]float64
	for l := range kc {
		brow := b[l*bl : l*bl+nr]
		for i := range mr {
			ail, row := a[i*ai+l*al], acc[i*nr:(i+1)*nr]
			for j, bj := range brow {
				row[j] = math.FMA(ail, bj, row[j])
			}
		}
	}
	store(mr, nr, acc[:], c, ldc, add)
}

// store writes the mr×nr tile into c, rows ldc apart: c = tile, or
// c += tile with add.
func store[T Float](mr, nr int, tile, c []T, ldc int, add bool) {
	for i := range mr {
		t, row := tile[i*nr:(i+1)*nr], c[i*ldc:i*ldc+nr]
		if !add {
			copy(row, t)
			continue
		}
		for j, v := range t {
			row[j] += v
		}
	}
}

// FMA32 returns x·y + z computed exactly and rounded once to float32, as
// a fused multiply-add instruction does. The float64 fused multiply-add
// of the three rounds once to float64; rounding that to float32 rounds
// twice, which differs only when the float64 result lies exactly halfway
// between two float32 values (or among float32's subnormals), where the
// exact sum is taken instead.
func FMA32(x, y, z float32) float32 {
	s := math.FMA(float64(x), float64(y), float64(z))
	// The low 29 of float64's 52 fraction bits are 1<<28 at a float32
	// midpoint; below 2⁻¹²⁵ float32's subnormals round elsewhere.
	if math.Float64bits(s)&(1<<29-1) != 1<<28 && math.Abs(s) >= 0x1p-125 {
		return float32(s)
	}
	return fma32Exact(x, y, z, s)
}

// fma32Exact is FMA32 where rounding s, the float64 result, to float32
// may not round x·y + z once.
func fma32Exact(x, y, z float32, s float64) float32 {
	if math.IsInf(s, 0) || math.IsNaN(s) || s == 0 && z == 0 {
		return float32(s)
	}
	var e big.Float
	e.SetPrec(400).SetFloat64(float64(x))
	e.Mul(&e, new(big.Float).SetFloat64(float64(y)))
	e.Add(&e, new(big.Float).SetFloat64(float64(z)))
	f, _ := e.Float32()
	return f
}
