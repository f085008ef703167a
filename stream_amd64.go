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

// streamScaled32 sets dst[i] = 0 + c*src[i] for n float32s with
// non-temporal stores; n is a multiple of 4 and dst 16-byte aligned. Call
// storeFence as for streamCopy.
//
//go:noescape
func streamScaled32(dst, src unsafe.Pointer, n uintptr, c float32)

// streamScaled64 is streamScaled32 for float64s; n is a multiple of 2.
//
//go:noescape
func streamScaled64(dst, src unsafe.Pointer, n uintptr, c float64)

// storeFence orders all earlier stores, streaming ones included, before
// every later store (SFENCE).
func storeFence()
