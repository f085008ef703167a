//go:build !amd64 || purego

package kernel

import "unsafe"

func prefetch(p unsafe.Pointer, n uintptr) { prefetchGo(p, n) }

func prefetchLines(addrs *[rowsAhead]uintptr, n int, size uintptr) { prefetchLinesGo(addrs, n, size) }
