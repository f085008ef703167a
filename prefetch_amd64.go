//go:build !purego

package gather

import "unsafe"

// prefetch asks the processor to start loading the n bytes at p into its
// caches, and returns at once. It does not read the memory from Go's point
// of view and never faults.
//
//go:noescape
func prefetch(p unsafe.Pointer, n uintptr)

// prefetchLines is prefetch(addrs[i], size) for each of the first n
// addresses in addrs, in one call.
//
//go:noescape
func prefetchLines(addrs *[rowsAhead]uintptr, n int, size uintptr)
