//go:build !amd64 || purego

package gather

import "unsafe"

// prefetch does nothing where the package has no assembly for it.
func prefetch(p unsafe.Pointer, n uintptr) {}
