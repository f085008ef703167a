//go:build !amd64 || purego

package gather

import "unsafe"

// rowAssembly is false where the package has no assembly for moving rows:
// takeRows then never calls copyRows or streamRows.
const rowAssembly = false

func copyRows(dst unsafe.Pointer, rows *[rowsAhead]uintptr, n int, size uintptr) {
	panic("gather: copyRows without assembly")
}

func streamRows(dst unsafe.Pointer, rows *[rowsAhead]uintptr, n int, size uintptr) {
	panic("gather: streamRows without assembly")
}
