package kernel

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// fma32Ref is x·y + z rounded once to float32, from exact arithmetic.
func fma32Ref(x, y, z float32) float32 {
	for _, v := range []float32{x, y, z} {
		if math.IsInf(float64(v), 0) || v != v {
			return float32(float64(x)*float64(y) + float64(z))
		}
	}
	var e big.Float
	e.SetPrec(400).SetFloat64(float64(x))
	e.Mul(&e, new(big.Float).SetFloat64(float64(y)))
	e.Add(&e, new(big.Float).SetFloat64(float64(z)))
	f, _ := e.Float32()
	return f
}

// FMA32 rounds once: random operands, operands whose float64 sum is a
// float32 midpoint, and subnormal results.
func TestFMA32(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(x, y, z float32) {
		t.Helper()
		got, want := FMA32(x, y, z), fma32Ref(x, y, z)
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("FMA32(%g, %g, %g) = %g, want %g", x, y, z, got, want)
		}
	}
	for range 200000 {
		x := float32(r.NormFloat64()) * float32(math.Exp2(float64(r.IntN(40)-20)))
		y := float32(r.NormFloat64())
		z := float32(r.NormFloat64()) * float32(math.Exp2(float64(r.IntN(40)-20)))
		check(x, y, z)
	}
	// z + (a product a tiny step past half an ulp of z): the float64 sum
	// rounds to the float32 midpoint, the exact one lies past it.
	for range 20000 {
		z := float32(1 + r.Float64())
		half := math.Nextafter32(z, 2) - z
		check(half/2*(1+0x1p-40)/(1+0x1p-40), 1+0x1p-23, z)
		check(half/2, 1+0x1p-30, z)
		check(half/2, 1-0x1p-30, z)
		check(-half/2, 1+0x1p-30, z)
		check(half/2, float32(1+0x1p-23), z)
	}
	for _, c := range [][3]float32{
		{0x1p-75, 0x1p-75, 0x1p-149}, {0x1p-80, 0x1p-69, 0}, {3e38, 10, -3e38}, {-0.0, 1, 0}, {0, 0, -0.0},
		{float32(math.Inf(1)), 0, 1}, {float32(math.NaN()), 1, 1}, {1e-30, 1e-10, -1e-40},
	} {
		check(c[0], c[1], c[2])
	}
}

// refGemm is alpha·op(a)·op(b) + beta·c in float64, element by element,
// and the bound of a reassociated float sum's error on each: k·eps·
// (Σ|alpha·a·b|) + eps·|beta·c| (with a float32 eps for float32).
func refGemm[T Float](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) (want, bound []float64) {
	eps := 0x1p-52
	if _, ok := any(alpha).(float32); ok {
		eps = 0x1p-23
	}
	want, bound = make([]float64, m*n), make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s, abs float64
			for l := range k {
				ai, bi := i*lda+l, l*ldb+j
				if transA {
					ai = l*lda + i
				}
				if transB {
					bi = j*ldb + l
				}
				av, bv := a[ai], b[bi]
				s += float64(av) * float64(bv)
				abs += math.Abs(float64(av) * float64(bv))
			}
			v := float64(alpha) * s
			var cv float64
			if beta != 0 {
				cv = float64(beta) * float64(c[i*ldc+j])
			}
			want[i*n+j] = v + cv
			bound[i*n+j] = float64(k+2)*eps*math.Abs(float64(alpha))*abs + 2*eps*math.Abs(cv) + 1e-300
		}
	}
	return want, bound
}

type gemmCase struct {
	transA, transB bool
	m, n, k        int
	padA, padB     int // extra columns of each leading dimension
	padC           int
	alpha, beta    float64
}

func (c gemmCase) String() string {
	return fmt.Sprintf("tA=%v tB=%v m=%d n=%d k=%d pad=%d,%d,%d alpha=%g beta=%g", c.transA, c.transB, c.m, c.n, c.k, c.padA, c.padB, c.padC, c.alpha, c.beta)
}

// runGemm runs case c for T, with values from seed, and checks it
// against refGemm, the elements of c outside the m×n matrix (the padding
// of ldc, which holds NaN) and the inputs. It returns c.
func runGemm[T Float](t testing.TB, c gemmCase, seed uint64) []T {
	r := rand.New(rand.NewPCG(seed, 9))
	ra, ca := c.m, c.k
	if c.transA {
		ra, ca = c.k, c.m
	}
	rb, cb := c.k, c.n
	if c.transB {
		rb, cb = c.n, c.k
	}
	lda, ldb, ldc := ca+c.padA, cb+c.padB, c.n+c.padC
	fill := func(rows, ld int) []T {
		v := make([]T, max(rows*ld, 1))
		for i := range v {
			v[i] = T(r.NormFloat64())
		}
		return v
	}
	a, b, cm := fill(ra, lda), fill(rb, ldb), fill(c.m, ldc)
	for i := range c.m {
		for j := c.n; j < ldc; j++ {
			cm[i*ldc+j] = T(math.NaN())
		}
	}
	if c.beta == 0 && c.m > 0 && c.n > 0 {
		cm[0] = T(math.NaN()) // not read when beta is 0
	}
	a0, b0 := slices.Clone(a), slices.Clone(b)
	want, bound := refGemm(c.transA, c.transB, c.m, c.n, c.k, T(c.alpha), a, lda, b, ldb, T(c.beta), cm, ldc)
	Gemm(c.transA, c.transB, c.m, c.n, c.k, T(c.alpha), a, lda, b, ldb, T(c.beta), cm, ldc)
	for i := range c.m {
		for j := range ldc {
			got := float64(cm[i*ldc+j])
			if j >= c.n {
				if !math.IsNaN(got) {
					t.Fatalf("%v: c[%d][%d], past column n, was written: %v", c, i, j, got)
				}
				continue
			}
			if d := math.Abs(got - want[i*c.n+j]); !(d <= bound[i*c.n+j]) {
				t.Fatalf("%v: c[%d][%d] = %v, want %v within %g (off by %g)", c, i, j, got, want[i*c.n+j], bound[i*c.n+j], d)
			}
		}
	}
	if !slices.Equal(a, a0) || !slices.Equal(b, b0) {
		t.Fatalf("%v: an input changed", c)
	}
	return cm
}

// gemmCases are shapes around the blocks and tiles, 1s, odd sizes,
// every transposition, leading dimensions past the columns, and alpha
// and beta 0, 1 and others.
func gemmCases() []gemmCase {
	var cs []gemmCase
	shapes := [][3]int{{1, 1, 1}, {1, 7, 3}, {5, 1, 9}, {6, 16, 1}, {7, 17, 2}, {13, 33, 31}, {0, 3, 3}, {3, 0, 3}, {3, 3, 0},
		{121, 50, 257}, {64, 24, 300}, {97, 9, 513}, {250, 130, 64}, {20, 200, 40}, {16, 520, 300}}
	for s, sh := range shapes {
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			ab := [][2]float64{{1, 0}, {1, 1}, {-0.5, 2}, {0, 0.5}, {2, 0}}[s%5]
			cs = append(cs, gemmCase{tr[0], tr[1], sh[0], sh[1], sh[2], s % 3, (s + 1) % 4, s % 2 * 3, ab[0], ab[1]})
		}
	}
	return cs
}

func TestGemm(t *testing.T) {
	for k, c := range gemmCases() {
		t.Run(c.String(), func(t *testing.T) {
			runGemm[float32](t, c, uint64(k))
			runGemm[float64](t, c, uint64(k))
		})
	}
}

// The assembly micro-kernels and their Go twins give the same bits, tile
// by tile and over whole products; so do one and two goroutines.
func TestGemmTwin(t *testing.T) {
	if !hasGemmAsm {
		t.Skip("no assembly micro-kernel on this processor or build")
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, kc := range []int{1, 2, 3, 17, 256} {
		// a read with strides: a packed panel (1, 6), rows of a row-major
		// matrix (lda, 1) and its columns (1, lda); c written and added to.
		for _, st := range [][2]int{{1, 6}, {kc + 3, 1}, {1, 9}} {
			as, bs := make([]float32, 5*st[0]+(kc-1)*st[1]+1), make([]float32, 21*kc)
			ad, bd := make([]float64, len(as)), make([]float64, 13*kc)
			for i := range as {
				as[i], ad[i] = float32(r.NormFloat64()), r.NormFloat64()
			}
			for i := range bs {
				bs[i] = float32(r.NormFloat64() * 1e3)
			}
			for i := range bd {
				bd[i] = r.NormFloat64() * 1e3
			}
			for _, add := range []bool{false, true} {
				cs1, cs2 := make([]float32, 6*19), make([]float32, 6*19)
				cd1, cd2 := make([]float64, 6*11), make([]float64, 6*11)
				for i := range cs1 {
					cs1[i] = float32(i)
					cs2[i] = cs1[i]
				}
				for i := range cd1 {
					cd1[i], cd2[i] = float64(i), float64(i)
				}
				kernelS(kc, as, st[0], st[1], bs, 21, cs1, 19, add)
				kernelSGo(kc, as, st[0], st[1], bs, 21, cs2, 19, add)
				if !slices.Equal(cs1, cs2) {
					t.Fatalf("kc=%d strides %v add %v: float32 tiles differ:\n%v\n%v", kc, st, add, cs1, cs2)
				}
				kernelD(kc, ad, st[0], st[1], bd, 13, cd1, 11, add)
				kernelDGo(kc, ad, st[0], st[1], bd, 13, cd2, 11, add)
				if !slices.Equal(cd1, cd2) {
					t.Fatalf("kc=%d strides %v add %v: float64 tiles differ", kc, st, add)
				}
			}
		}
	}
	for k, c := range gemmCases() {
		asm32, asm64 := runGemm[float32](t, c, uint64(k)), runGemm[float64](t, c, uint64(k))
		sgemm.kernel, dgemm.kernel = kernelSGo, kernelDGo
		go32, go64 := runGemm[float32](t, c, uint64(k)), runGemm[float64](t, c, uint64(k))
		sgemm.kernel, dgemm.kernel = kernelS, kernelD
		if !sameBits(asm32, go32) || !sameBits(asm64, go64) {
			t.Fatalf("%v: the assembly and the Go twin differ", c)
		}
	}
	// Split by rows, and by columns.
	for _, big := range []gemmCase{{m: 300, n: 200, k: 300, alpha: 1}, {m: 16, n: 700, k: 300, alpha: 1}} {
		p := runtime.GOMAXPROCS(1)
		one := runGemm[float32](t, big, 5)
		runtime.GOMAXPROCS(max(p, 2))
		two := runGemm[float32](t, big, 5)
		runtime.GOMAXPROCS(p)
		if !sameBits(one, two) {
			t.Fatalf("%v: one and two goroutines give other bits", big)
		}
	}
}

func sameBits[T Float](a, b []T) bool {
	return slices.EqualFunc(a, b, func(x, y T) bool {
		return x == y || x != x && y != y
	})
}

// Once its buffers are kept, Gemm allocates nothing, on one goroutine or
// several.
func TestGemmAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, c := range []gemmCase{{m: 64, n: 64, k: 64, alpha: 1}, {m: 400, n: 300, k: 300, alpha: 1, transB: true}} {
		a, b, cm := make([]float32, c.m*c.k), make([]float32, c.k*c.n), make([]float32, c.m*c.n)
		run := func() { Gemm(c.transA, c.transB, c.m, c.n, c.k, 1, a, c.k, b, c.n, 0, cm, c.n) }
		run()
		if n := testing.AllocsPerRun(20, run); n != 0 {
			t.Errorf("%v: %v allocations a call", c, n)
		}
	}
}

// FuzzGemm: any shape, transposition, leading dimension, alpha and beta
// agrees with the reference within the reassociation bound, leaves the
// rest of c alone, and (with the assembly) gives the twin's bits.
func FuzzGemm(f *testing.F) {
	for _, c := range gemmCases()[:12] {
		f.Add(c.transA, c.transB, uint8(c.m), uint8(c.n), uint16(c.k), uint8(c.padA), uint8(c.padB), uint8(c.padC), c.alpha, c.beta, uint64(1))
	}
	f.Fuzz(func(t *testing.T, tA, tB bool, m, n uint8, k uint16, pa, pb, pc uint8, alpha, beta float64, seed uint64) {
		if math.IsNaN(alpha) || math.IsInf(alpha, 0) || math.Abs(alpha) > 1e6 || math.IsNaN(beta) || math.IsInf(beta, 0) || math.Abs(beta) > 1e6 {
			return
		}
		c := gemmCase{tA, tB, int(m % 80), int(n % 80), int(k % 600), int(pa % 5), int(pb % 5), int(pc % 5), alpha, beta}
		got := runGemm[float32](t, c, seed)
		got64 := runGemm[float64](t, c, seed)
		if hasGemmAsm {
			sgemm.kernel, dgemm.kernel = kernelSGo, kernelDGo
			twin, twin64 := runGemm[float32](t, c, seed), runGemm[float64](t, c, seed)
			sgemm.kernel, dgemm.kernel = kernelS, kernelD
			if !sameBits(got, twin) || !sameBits(got64, twin64) {
				t.Fatalf("%v: the assembly and the Go twin differ", c)
			}
		}
	})
}

type sgemmer interface {
	Sgemm(tA, tB gblas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
}

// BLAS's Sgemm and Dgemm panic where gonum's do, with gonum's message,
// and compute what Gemm computes (gonum's own products where the
// assembly does not run).
func TestBLAS(t *testing.T) {
	panics := func(f func()) (msg any) {
		defer func() { msg = recover() }()
		f()
		return nil
	}
	a, b, c := make([]float32, 12), make([]float32, 12), make([]float32, 16)
	for _, bad := range []struct {
		name string
		call func(sgemmer)
	}{
		{"transpose", func(i sgemmer) {
			i.Sgemm('x', gblas.NoTrans, 4, 4, 3, 1, a, 3, b, 4, 0, c, 4)
		}},
		{"m < 0", func(i sgemmer) {
			i.Sgemm(gblas.NoTrans, gblas.NoTrans, -1, 4, 3, 1, a, 3, b, 4, 0, c, 4)
		}},
		{"lda", func(i sgemmer) {
			i.Sgemm(gblas.NoTrans, gblas.NoTrans, 4, 4, 3, 1, a, 2, b, 4, 0, c, 4)
		}},
		{"short b", func(i sgemmer) {
			i.Sgemm(gblas.NoTrans, gblas.Trans, 4, 4, 3, 1, a, 3, b[:11], 3, 0, c, 4)
		}},
		{"short c", func(i sgemmer) {
			i.Sgemm(gblas.NoTrans, gblas.NoTrans, 4, 4, 3, 1, a, 3, b, 4, 0, c[:15], 4)
		}},
	} {
		want, got := panics(func() { bad.call(gonum.Implementation{}) }), panics(func() { bad.call(BLAS{}) })
		if want == nil || got != want {
			t.Errorf("%s: BLAS panics with %v, gonum with %v", bad.name, got, want)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for i := range a {
		a[i], b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	got, want := make([]float32, 16), make([]float32, 16)
	BLAS{}.Sgemm(gblas.NoTrans, gblas.NoTrans, 4, 4, 3, 1, a, 3, b, 4, 0, got, 4)
	if hasGemmAsm {
		Gemm(false, false, 4, 4, 3, 1, a, 3, b, 4, 0, want, 4)
	} else {
		gonum.Implementation{}.Sgemm(gblas.NoTrans, gblas.NoTrans, 4, 4, 3, 1, a, 3, b, 4, 0, want, 4)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("BLAS.Sgemm = %v, want %v", got, want)
	}
}
