package kernel

import "unsafe"

// The conversions between slices and the addresses the assembly takes,
// for the kernels and their Go twins: with alloc_unsafe.go, the only
// place the package uses unsafe.

// Pointer is the element type of tensors of dtype tensor.UnsafePointer,
// which Take and TakeAlong move like any other.
type Pointer = unsafe.Pointer

// ptr returns the address of s's first element (of its backing array when
// s is empty), as the assembly takes it.
func ptr[T any](s []T) *byte { return (*byte)(unsafe.Pointer(unsafe.SliceData(s))) }

// addr returns the address of s's first element as an integer, for the
// lists of row addresses copyRows and sumRows read.
func addr[T any](s []T) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(s))) }

// elemSize returns the size in bytes of an element of s.
func elemSize[T any](s []T) uintptr {
	var z T
	return unsafe.Sizeof(z)
}

// sizeOf returns the size in bytes of a T.
func sizeOf[T any]() uintptr {
	var z T
	return unsafe.Sizeof(z)
}

// valuesAt returns the n values of type T from p on.
func valuesAt[T any](p *byte, n uintptr) []T { return unsafe.Slice((*T)(unsafe.Pointer(p)), n) }

// Words returns the memory of b as a []T of len(b)/size(T) elements:
// the way Take moves elements of any dtype as machine words of their
// width. b's first byte must be aligned for T.
func Words[T any](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	return valuesAt[T](&b[0], uintptr(len(b))/sizeOf[T]())
}

// sliceAt returns the n elements from p on.
func sliceAt[T any](p *T, n int) []T { return unsafe.Slice(p, n) }

// offset returns p advanced by n bytes.
func offset(p *byte, n uintptr) *byte { return (*byte)(unsafe.Add(unsafe.Pointer(p), n)) }

// rowAt returns the address rows[k] holds as a pointer: rows holds
// addresses as integers, of memory the caller keeps alive.
func rowAt(rows []uintptr, k int) *byte { return *(**byte)(unsafe.Pointer(&rows[k])) }

// as returns s's first element as a *U, a type of the same size as T (the
// int64 an int is on a 64-bit machine).
func as[U, T any](s []T) *U { return (*U)(unsafe.Pointer(unsafe.SliceData(s))) }
