//go:build !amd64 || purego

package kernel

import "unsafe"

// hasRowAsm is false: without assembly, takeRows moves rows one at a time
// with copy, as fast as copyRowsGo.
const hasRowAsm = false

func copyRows(dst unsafe.Pointer, rows []uintptr, size uintptr, ahead []uintptr) {
	copyRowsGo(dst, rows, size, ahead)
}

func streamRows(dst unsafe.Pointer, rows []uintptr, size uintptr, ahead []uintptr) {
	copyRowsGo(dst, rows, size, ahead)
}

func sumRows(dst unsafe.Pointer, rows []uintptr, coef []float32, size uintptr, ahead []uintptr, scale float32) {
	sumRowsGo(dst, rows, coef, size, ahead, scale)
}
