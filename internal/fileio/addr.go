package fileio

import "unsafe"

// addr returns the address of b's first byte.
func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
