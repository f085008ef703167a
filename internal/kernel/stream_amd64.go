//go:build !purego

package kernel

// streamStores reports whether the stream functions write past the
// caches: on amd64 they are SSE2 assembly (stream_amd64.s), which every
// amd64 processor runs.
const streamStores = true

// streamCopy is streamCopyGo with non-temporal stores, which write memory
// without first reading the destination's cache lines and without pushing
// other data out of the caches. n must be a multiple of 16 and dst 16-byte
// aligned. The stores are weakly ordered: call storeFence before another
// goroutine may read dst.
//
//go:noescape
func streamCopy(dst, src *byte, n uintptr)

// streamClear is streamClearGo with non-temporal stores. n must be a
// multiple of 16 and dst 16-byte aligned; call storeFence as for
// streamCopy.
//
//go:noescape
func streamClear(dst *byte, n uintptr)

// streamScaled32 is streamScaled32Go with non-temporal stores; n is a
// multiple of 4 and dst 16-byte aligned. Call storeFence as for
// streamCopy.
//
//go:noescape
func streamScaled32(dst, src *byte, n uintptr, c float32)

// streamScaled64 is streamScaled64Go with non-temporal stores; n is a
// multiple of 2 and dst 16-byte aligned. Call storeFence as for
// streamCopy.
//
//go:noescape
func streamScaled64(dst, src *byte, n uintptr, c float64)

// storeFence orders all earlier stores, streaming ones included, before
// every later store (SFENCE); storeFenceGo is its twin for ordinary stores.
func storeFence()
