package kernel

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// benchRows are the Gather cases of bench/bench_cases.md: float32 tables,
// int64 ids drawn uniformly over the rows, fixed seed.
var benchRows = []struct {
	name               string
	outer, s, inner, n int
}{
	{"emb_50k_128", 1, 50000, 128, 16384},
	{"emb_1m_64", 1, 1000000, 64, 65536},
	{"axis1", 64, 1000, 64, 512},
}

func benchTable(outer, s, inner, n int) (src []float32, idx []int64) {
	r := rand.New(rand.NewPCG(1, uint64(s)))
	src = make([]float32, outer*s*inner)
	for i := range src {
		src[i] = float32(r.NormFloat64())
	}
	idx = make([]int64, n)
	for i := range idx {
		idx[i] = int64(r.IntN(s))
	}
	return src, idx
}

// BenchmarkStreamStores measures the Gather cases' forward with ordinary
// stores ("plain") and with the stores Take chooses for a new output
// ("chosen": streaming ones where streams allows), in the same run: into a
// new output per call ("new"), in this benchmark's small heap, where the
// memory Go hands out was written a few calls ago; and into outputs taken
// in turn from 128 MB of buffers ("cold"), whose memory was last written
// 128 MB of writes ago, as in a program whose live heap is that large.
// Both measure memory the process already has.
func BenchmarkStreamStores(b *testing.B) {
	const coldBytes = 128 << 20
	hows := []struct {
		name   string
		stream bool
	}{{"plain", false}, {"chosen", true}}
	for _, c := range benchRows {
		src, idx := benchTable(c.outer, c.s, c.inner, c.n)
		size := c.outer * c.n * c.inner
		outBytes := int64(4 * size)
		for _, how := range hows {
			b.Run(c.name+"/new/"+how.name, func(b *testing.B) {
				b.SetBytes(2*outBytes + int64(8*len(idx)))
				for b.Loop() {
					if Take(Uninit[float32](size), src, idx, c.outer, c.s, c.inner, how.stream) >= 0 {
						b.Fatal("index out of range")
					}
				}
			})
		}
		cold := make([][]float32, max(2, coldBytes/int(outBytes)))
		for i := range cold {
			cold[i] = make([]float32, size)
		}
		for _, how := range hows {
			b.Run(c.name+"/cold/"+how.name, func(b *testing.B) {
				b.SetBytes(2*outBytes + int64(8*len(idx)))
				i := 0
				for b.Loop() {
					if Take(cold[i], src, idx, c.outer, c.s, c.inner, how.stream) >= 0 {
						b.Fatal("index out of range")
					}
					i = (i + 1) % len(cold)
				}
			})
		}
		runtime.KeepAlive(cold)
	}
}

// BenchmarkIndexCheck measures the check every index passes before a call
// writes into memory the caller can see (a reused output, a gradient
// buffer), on 262,144 indices into 1024 (elem_axis1's), one thread: the Go
// loop alone ("loop", firstBadFrom) against firstBad ("chosen": AVX2
// assembly for the leading blocks of 16 where the processor has it).
func BenchmarkIndexCheck(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const s = 1024
	i64 := make([]int64, 1024*256)
	i32 := make([]int32, len(i64))
	for i := range i64 {
		i64[i] = int64(r.IntN(s))
		i32[i] = int32(i64[i])
	}
	b.Run("int64/loop", func(b *testing.B) {
		b.SetBytes(int64(8 * len(i64)))
		for b.Loop() {
			if firstBadFrom(i64, s, 0) >= 0 {
				b.Fatal("index out of range")
			}
		}
	})
	b.Run("int64/chosen", func(b *testing.B) {
		b.SetBytes(int64(8 * len(i64)))
		for b.Loop() {
			if firstBad(i64, s) >= 0 {
				b.Fatal("index out of range")
			}
		}
	})
	b.Run("int32/loop", func(b *testing.B) {
		b.SetBytes(int64(4 * len(i32)))
		for b.Loop() {
			if firstBadFrom(i32, s, 0) >= 0 {
				b.Fatal("index out of range")
			}
		}
	})
	b.Run("int32/chosen", func(b *testing.B) {
		b.SetBytes(int64(4 * len(i32)))
		for b.Loop() {
			if firstBad(i32, s) >= 0 {
				b.Fatal("index out of range")
			}
		}
	})
}
