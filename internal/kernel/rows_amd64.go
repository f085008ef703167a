//go:build !purego

package kernel

import (
	"golang.org/x/sys/cpu"
)

// hasRowAsm reports whether the processor runs copyRows and streamRows,
// which use AVX instructions.
var hasRowAsm = cpu.X86.HasAVX

// copyRows is copyRowsGo in AVX assembly, with 32-byte loads and stores
// (rows_amd64.s); before it moves row k it prefetches ahead[k]. Call it
// only when hasRowAsm is set.
//
//go:noescape
func copyRows(dst *byte, rows []uintptr, size uintptr, ahead []uintptr)

// streamRows is copyRowsGo in AVX assembly with streaming stores, for a
// 32-byte aligned dst (rows_amd64.s). Call storeFence before another
// goroutine may read dst, and call it only when hasRowAsm is set.
//
//go:noescape
func streamRows(dst *byte, rows []uintptr, size uintptr, ahead []uintptr)

// sumRows is sumRowsGo in AVX assembly (rows_amd64.s): it keeps 256 bytes
// of dst in registers while it adds that part of every row (to dst's
// values when acc is set, else to zero: dst is then only written) and
// scales it,
// so a row costs a few instructions and the processor has the loads of many
// rows in flight at once; while it adds row k it prefetches the same part
// of ahead[k], so that the rows the caller adds next are on their way (see
// bagSum32). size must be a multiple of 32. Call it only when hasRowAsm is
// set.
//
//go:noescape
func sumRows(dst *byte, rows []uintptr, coef []float32, size uintptr, ahead []uintptr, scale float32, acc bool)
