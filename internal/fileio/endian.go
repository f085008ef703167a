package fileio

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// LittleEndian reports whether the machine stores numbers little-endian,
// as the module's file formats do: then a tensor's memory is its file
// bytes, and on a big-endian machine each element's bytes are swapped.
var LittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// Swapped returns a copy of b with the bytes of each size-byte element
// reversed.
func Swapped(b []byte, size int) []byte {
	out := append([]byte(nil), b...)
	SwapInPlace(out, size)
	return out
}

// SwapInPlace reverses the bytes of each size-byte element of b.
func SwapInPlace(b []byte, size int) {
	for i := 0; i+size <= len(b); i += size {
		e := b[i : i+size]
		for j, k := 0, size-1; j < k; j, k = j+1, k-1 {
			e[j], e[k] = e[k], e[j]
		}
	}
}

// LittleEndianBytes returns the values of v as little-endian bytes: v's
// own memory on a little-endian machine, else a swapped copy.
func LittleEndianBytes[T float32 | float64](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	var zero T
	size := int(unsafe.Sizeof(zero))
	b := unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*size)
	if LittleEndian {
		return b
	}
	return Swapped(b, size)
}

// Float32s returns the little-endian float32 values of b, copied.
func Float32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// Float64s returns the little-endian float64 values of b, copied.
func Float64s(b []byte) []float64 {
	out := make([]float64, len(b)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}
