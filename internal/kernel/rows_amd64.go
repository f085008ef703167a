//go:build !purego

package kernel

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasRowAsm reports whether the processor runs copyRows and streamRows,
// which use AVX instructions.
var hasRowAsm = cpu.X86.HasAVX

// copyRows is copyRowsGo in AVX assembly, with 32-byte loads and stores
// (rows_amd64.s). Call it only when hasRowAsm is set.
//
//go:noescape
func copyRows(dst unsafe.Pointer, rows *[rowsAhead]uintptr, n int, size uintptr)

// streamRows is copyRowsGo in AVX assembly with streaming stores, for a
// 32-byte aligned dst (rows_amd64.s). Call storeFence before another
// goroutine may read dst, and call it only when hasRowAsm is set.
//
//go:noescape
func streamRows(dst unsafe.Pointer, rows *[rowsAhead]uintptr, n int, size uintptr)
