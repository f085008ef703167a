//go:build !purego

package gather

import "unsafe"

// streamStores reports whether streamCopy writes past the caches.
const streamStores = true

// streamCopy copies n bytes from src to dst with non-temporal stores, which
// write to memory without first reading the destination's cache lines and
// without pushing other data out of the caches. n must be a multiple of 16
// and dst 16-byte aligned. The stores are weakly ordered: call storeFence
// before another goroutine may read dst.
//
//go:noescape
func streamCopy(dst, src unsafe.Pointer, n uintptr)

// streamClear sets n bytes at dst to zero with non-temporal stores. n must
// be a multiple of 16 and dst 16-byte aligned; call storeFence as for
// streamCopy.
//
//go:noescape
func streamClear(dst unsafe.Pointer, n uintptr)

// storeFence orders all earlier stores, streaming ones included, before
// every later store (SFENCE).
func storeFence()
