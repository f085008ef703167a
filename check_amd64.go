//go:build !purego

package gather

import "golang.org/x/sys/cpu"

// checkAssembly reports whether inRange64 and inRange32 may be called:
// they use AVX2 instructions. BenchmarkIndexCheck turns it off to time
// the Go loop alone.
var checkAssembly = cpu.X86.HasAVX2

// inRange64 returns how many of the n indices from p, in whole blocks of
// 16, come before the first block holding one outside [-s, s-1]: n, a
// multiple of 16, if no block does. s must be in [1, 2^62].
//
//go:noescape
func inRange64(p *int64, n int, s int) int

// inRange32 is inRange64 for int32 indices.
//
//go:noescape
func inRange32(p *int32, n int, s int) int
