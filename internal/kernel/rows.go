package kernel

import "unsafe"

// copyRowsGo copies n rows of size bytes from the addresses rows[0], ...,
// rows[n-1] to consecutive places from dst:
//
//	for i := range n { copy(dst[i*size:(i+1)*size], rows[i][:size]) }
//
// It is the reference for copyRows and streamRows. The caller keeps the
// memory rows point into alive.
func copyRowsGo(dst unsafe.Pointer, rows *[rowsAhead]uintptr, n int, size uintptr) {
	for i := range n {
		// rows[i] holds an address as an integer; read it as a pointer.
		src := *(*unsafe.Pointer)(unsafe.Pointer(&rows[i]))
		copy(unsafe.Slice((*byte)(unsafe.Add(dst, uintptr(i)*size)), size), unsafe.Slice((*byte)(src), size))
	}
}
