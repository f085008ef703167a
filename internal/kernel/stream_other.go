//go:build !amd64 || purego

package kernel

import "unsafe"

// streamStores is false: without assembly the stream functions are their
// Go twins, which write through the caches.
const streamStores = false

func streamCopy(dst, src unsafe.Pointer, n uintptr) { streamCopyGo(dst, src, n) }

func streamClear(dst unsafe.Pointer, n uintptr) { streamClearGo(dst, n) }

func streamScaled32(dst, src unsafe.Pointer, n uintptr, c float32) {
	streamScaled32Go(dst, src, n, c)
}

func streamScaled64(dst, src unsafe.Pointer, n uintptr, c float64) {
	streamScaled64Go(dst, src, n, c)
}

func storeFence() { storeFenceGo() }
