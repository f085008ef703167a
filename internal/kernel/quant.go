package kernel

import (
	"encoding/binary"
	"math"

	"github.com/x448/float16"
)

// Rows in FBGEMM's row-wise formats, as torch.ops.quantized's
// embedding_bag_byte_prepack and embedding_bag_4bit_prepack make them:
//
//	8-bit: dim bytes, then the row's scale and bias as little-endian float32
//	4-bit: (dim+1)/2 bytes, two values a byte (the even column in the low
//	       nibble), then the scale and bias as little-endian float16
//
// A value is scale·q + bias.

// Row8Bytes and Row4Bytes are the bytes of a row of dim values.
func Row8Bytes(dim int) int { return dim + 8 }
func Row4Bytes(dim int) int { return (dim+1)/2 + 4 }

// QuantizeRow8 writes x's 8-bit row into dst (Row8Bytes(len(x)) bytes):
// scale = (max-min)/255, bias = min, q = round-half-even((x-min)·255/(max-min+1e-8)).
func QuantizeRow8(dst []byte, x []float32) {
	lo, hi := MinMax(x)
	span := hi - lo
	inv := 255 / (span + 1e-8)
	for j, v := range x {
		dst[j] = byte(int32(math.RoundToEven(float64((v - lo) * inv))))
	}
	binary.LittleEndian.PutUint32(dst[len(x):], math.Float32bits(span/255))
	binary.LittleEndian.PutUint32(dst[len(x)+4:], math.Float32bits(lo))
}

// QuantizeRow4 writes x's 4-bit row into dst (Row4Bytes(len(x)) bytes):
// bias = min rounded to float16, scale = (max-bias)/15 rounded to
// float16 (1 when that is 0 or its inverse overflows), q =
// round-half-even((x-bias)/scale) clamped to [0, 15].
func QuantizeRow4(dst []byte, x []float32) {
	lo, hi := MinMax(x)
	bias := float16.Fromfloat32(lo)
	lo = bias.Float32()
	span := hi - lo
	scale := float32(1)
	if span != 0 {
		scale = span / 15
	}
	scale = float16.Fromfloat32(scale).Float32()
	if scale == 0 {
		scale = 1
	}
	inv := 1 / scale
	if math.IsInf(float64(inv), 0) {
		scale, inv = 1, 1
	}
	n := (len(x) + 1) / 2
	clear(dst[:n])
	for j, v := range x {
		q := min(max(int32(math.RoundToEven(float64((v-lo)*inv))), 0), 15)
		dst[j/2] |= byte(q) << (4 * (j % 2))
	}
	binary.LittleEndian.PutUint16(dst[n:], uint16(float16.Fromfloat32(scale)))
	binary.LittleEndian.PutUint16(dst[n+2:], uint16(bias))
}

// Row4Fits reports whether QuantizeRow4 of a row whose smallest value is
// lo and largest hi has a finite float16 bias and scale (that is, whether
// its values read back finite), and returns the two as float32.
func Row4Fits(lo, hi float32) (bias, scale float32, ok bool) {
	b := float16.Fromfloat32(lo)
	bias = b.Float32()
	scale = float16.Fromfloat32((hi - bias) / 15).Float32()
	return bias, scale, !b.IsInf(0) && !math.IsInf(float64(scale), 0)
}

// MinMax returns the smallest and the largest of x (not empty).
func MinMax(x []float32) (lo, hi float32) {
	lo, hi = x[0], x[0]
	for _, v := range x[1:] {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

// AddRow8 adds w times the 8-bit row's values to acc, as FBGEMM's bag
// kernels do: with s = w·scale and b = w·bias, acc[j] = s·q[j] + (acc[j]+b).
func AddRow8(acc []float32, row []byte, w float32) {
	dim := len(acc)
	s := w * math.Float32frombits(binary.LittleEndian.Uint32(row[dim:]))
	b := w * math.Float32frombits(binary.LittleEndian.Uint32(row[dim+4:]))
	q := row[:dim]
	for j := range acc {
		acc[j] = s*float32(q[j]) + (acc[j] + b)
	}
}

// AddRow4 adds w times the 4-bit row's values to acc, as AddRow8 does.
func AddRow4(acc []float32, row []byte, w float32) {
	dim := len(acc)
	n := (dim + 1) / 2
	s := w * float16.Frombits(binary.LittleEndian.Uint16(row[n:])).Float32()
	b := w * float16.Frombits(binary.LittleEndian.Uint16(row[n+2:])).Float32()
	j := 0
	for _, v := range row[:dim/2] {
		acc[j] = s*float32(v&15) + (acc[j] + b)
		acc[j+1] = s*float32(v>>4) + (acc[j+1] + b)
		j += 2
	}
	if dim%2 == 1 {
		acc[j] = s*float32(row[j/2]&15) + (acc[j] + b)
	}
}

// AddRowHalf adds w times the row of little-endian float16 values to acc.
func AddRowHalf(acc []float32, row []byte, w float32) {
	for j := range acc {
		acc[j] += w * float16.Frombits(binary.LittleEndian.Uint16(row[2*j:])).Float32()
	}
}

// AddRowBF16 adds w times the row of little-endian bfloat16 values to
// acc: each a float32's top 16 bits.
func AddRowBF16(acc []float32, row []byte, w float32) {
	for j := range acc {
		acc[j] += w * math.Float32frombits(uint32(binary.LittleEndian.Uint16(row[2*j:]))<<16)
	}
}

// AddRow32 adds w times the row of little-endian float32 values to acc.
func AddRow32(acc []float32, row []byte, w float32) {
	for j := range acc {
		acc[j] += w * math.Float32frombits(binary.LittleEndian.Uint32(row[4*j:]))
	}
}
