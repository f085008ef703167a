//go:build !purego

package kernel

// prefetch is prefetchGo in assembly: PREFETCHT0 for each 64-byte line of
// the n bytes at p (prefetch_amd64.s). It returns at once and never
// faults. Every amd64 processor has the instruction.
//
//go:noescape
func prefetch(p *byte, n uintptr)

// prefetchLines is prefetchLinesGo in assembly: prefetch(addrs[i], size)
// for each of the first n addresses, in one call (prefetch_amd64.s).
//
//go:noescape
func prefetchLines(addrs *[rowsAhead]uintptr, n int, size uintptr)
