//go:build !amd64 || purego

package gather

import "unsafe"

// streamStores reports whether streamCopy writes past the caches: only the
// amd64 assembly does.
const streamStores = false

// streamCopy is a plain copy of n bytes where there are no streaming stores.
func streamCopy(dst, src unsafe.Pointer, n uintptr) {
	copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
}

// streamClear is a plain clear of n bytes where there are no streaming stores.
func streamClear(dst unsafe.Pointer, n uintptr) {
	clear(unsafe.Slice((*byte)(dst), n))
}

// storeFence does nothing where streamCopy is a plain copy.
func storeFence() {}
