package kernel

import "unsafe"

// prefetchGo is the reference for prefetch: a prefetch only asks the
// processor to load memory into its caches early; it reads nothing from
// Go's point of view and changes no result, so without assembly it does
// nothing.
func prefetchGo(p unsafe.Pointer, n uintptr) {}

// prefetchLinesGo is the reference for prefetchLines:
//
//	for i := range n { prefetchGo(addrs[i], size) }
func prefetchLinesGo(addrs *[rowsAhead]uintptr, n int, size uintptr) {}
