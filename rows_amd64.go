//go:build !purego

package gather

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// rowAssembly reports whether copyRows and streamRows may be called: they
// use AVX instructions.
var rowAssembly = cpu.X86.HasAVX

// copyRows copies n rows of size bytes, a multiple of 32, from the
// addresses rows[0], ..., rows[n-1] to consecutive places from dst.
//
//go:noescape
func copyRows(dst unsafe.Pointer, rows *[rowsAhead]uintptr, n int, size uintptr)

// streamRows is copyRows with streaming stores, for a 32-byte aligned dst.
// Call storeFence before another goroutine may read dst.
//
//go:noescape
func streamRows(dst unsafe.Pointer, rows *[rowsAhead]uintptr, n int, size uintptr)
