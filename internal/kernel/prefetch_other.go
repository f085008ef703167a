//go:build !amd64 || purego

package kernel

func prefetch(p *byte, n uintptr) { prefetchGo(p, n) }

func prefetchLines(addrs *[rowsAhead]uintptr, n int, size uintptr) { prefetchLinesGo(addrs, n, size) }
