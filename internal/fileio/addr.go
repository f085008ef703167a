package fileio

import "unsafe"

// addr returns the address of b's first byte.
func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// bytesOf returns the memory of v as bytes.
func bytesOf[T any](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(zero)))
}

// PreferHugePagesFor is PreferHugePages for the memory of v.
func PreferHugePagesFor[T any](v []T) { PreferHugePages(bytesOf(v)) }
