//go:build !purego

package kernel

import "unsafe"

// Uninit returns a slice of n elements whose memory the runtime has not
// cleared: it may hold what a freed object left there. It is
//
//	make([]T, n)
//
// without the clearing, for a caller that writes every element before
// anything reads one. T holds no pointers, so the collector never reads
// that memory. With the purego tag it is make.
func Uninit[T Plain](n int) []T {
	var zero T
	p := mallocgc(uintptr(n)*unsafe.Sizeof(zero), nil, false)
	return unsafe.Slice((*T)(p), n)
}

// mallocgc is the runtime's allocator. A nil type allocates memory the
// collector does not scan; needzero false leaves it as it was. The runtime
// keeps this signature for the packages that link to it (go.dev/issue/67401).
//
//go:linkname mallocgc runtime.mallocgc
func mallocgc(size uintptr, typ unsafe.Pointer, needzero bool) unsafe.Pointer
