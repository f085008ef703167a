//go:build !amd64 || purego

package gather

import "unsafe"

// prefetch does nothing where the package has no assembly for it.
func prefetch(p unsafe.Pointer, n uintptr) {}

// prefetchLines does nothing where the package has no assembly for it.
func prefetchLines(addrs *[rowsAhead]uintptr, n int, size uintptr) {}
