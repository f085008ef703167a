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

// streamScaled32 is dst[i] = 0 + c*src[i] for n float32s with plain stores.
func streamScaled32(dst, src unsafe.Pointer, n uintptr, c float32) {
	d, g := unsafe.Slice((*float32)(dst), n), unsafe.Slice((*float32)(src), n)
	for i := range d {
		d[i] = 0 + c*g[i]
	}
}

// streamScaled64 is dst[i] = 0 + c*src[i] for n float64s with plain stores.
func streamScaled64(dst, src unsafe.Pointer, n uintptr, c float64) {
	d, g := unsafe.Slice((*float64)(dst), n), unsafe.Slice((*float64)(src), n)
	for i := range d {
		d[i] = 0 + c*g[i]
	}
}

// storeFence does nothing where streamCopy is a plain copy.
func storeFence() {}
