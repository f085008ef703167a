//go:build !amd64 || purego

package kernel

// streamStores is false: without assembly the stream functions are their
// Go twins, which write through the caches.
const streamStores = false

func streamCopy(dst, src *byte, n uintptr) { streamCopyGo(dst, src, n) }

func streamClear(dst *byte, n uintptr) { streamClearGo(dst, n) }

func streamScaled32(dst, src *byte, n uintptr, c float32) {
	streamScaled32Go(dst, src, n, c)
}

func streamScaled64(dst, src *byte, n uintptr, c float64) {
	streamScaled64Go(dst, src, n, c)
}

func storeFence() { storeFenceGo() }
