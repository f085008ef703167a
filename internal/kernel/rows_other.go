//go:build !amd64 || purego

package kernel

// hasRowAsm is false: without assembly, takeRows moves rows one at a time
// with copy, as fast as copyRowsGo.
const hasRowAsm = false

func copyRows(dst *byte, rows []uintptr, size uintptr, ahead []uintptr) {
	copyRowsGo(dst, rows, size, ahead)
}

func streamRows(dst *byte, rows []uintptr, size uintptr, ahead []uintptr) {
	copyRowsGo(dst, rows, size, ahead)
}

func sumRows(dst *byte, rows []uintptr, coef []float32, size uintptr, ahead []uintptr, scale float32, acc bool) {
	sumRowsGo(dst, rows, coef, size, ahead, scale, acc)
}
