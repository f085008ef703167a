package kernel

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"
)

// Half-precision rows: float16 (IEEE binary16) and bfloat16 (the top half
// of a float32), each value two little-endian bytes.

// A HalfFormat is float16 or bfloat16.
type HalfFormat int

// The half formats.
const (
	Float16 HalfFormat = iota + 1
	BFloat16
)

func (f HalfFormat) String() string {
	switch f {
	case Float16:
		return "float16"
	case BFloat16:
		return "bfloat16"
	}
	return fmt.Sprintf("HalfFormat(%d)", int(f))
}

// MaxFloat16 is the largest finite float16; rounding saturates to it.
const MaxFloat16 = 65504

// ToHalf writes x as f values, rounded to nearest even (saturating at the
// format's largest finite value), into dst (2·len(x) bytes).
func ToHalf(f HalfFormat, dst []byte, x []float32) {
	for j, v := range x {
		binary.LittleEndian.PutUint16(dst[2*j:], halfBits(f, nearest(f, v)))
	}
}

// FromHalf writes the f values of src (2·len(dst) bytes) into dst.
func FromHalf(f HalfFormat, dst []float32, src []byte) {
	for j := range dst {
		h := binary.LittleEndian.Uint16(src[2*j:])
		if f == Float16 {
			dst[j] = float16.Frombits(h).Float32()
		} else {
			dst[j] = math.Float32frombits(uint32(h) << 16)
		}
	}
}

// halfBits returns the bits of v, a value f represents exactly.
func halfBits(f HalfFormat, v float32) uint16 {
	if f == Float16 {
		return uint16(float16.Fromfloat32(v))
	}
	return uint16(math.Float32bits(v) >> 16)
}

// nearest returns v rounded to the nearest f value, ties to even,
// saturating at the largest finite one.
func nearest(f HalfFormat, v float32) float32 {
	if f == Float16 {
		v = max(min(v, MaxFloat16), -MaxFloat16)
		return float16.Fromfloat32(v).Float32()
	}
	b := math.Float32bits(v)
	if b&0x7f800000 == 0x7f800000 {
		return v // NaN, infinities
	}
	b += 0x7fff + (b>>16)&1
	if b&0x7f800000 == 0x7f800000 { // rounded past the largest finite
		b = b&0x80000000 | 0x7f7f0000
	}
	return math.Float32frombits(b &^ 0xffff)
}

// below returns the f value next to v towards zero, or v itself when f
// represents it, and the f value next to that one away from zero
// (v lies in [lo, hi] by magnitude). v is finite and within f's range.
func below(f HalfFormat, v float32) (lo, hi float32) {
	if f == BFloat16 {
		b := math.Float32bits(v)
		lo = math.Float32frombits(b &^ 0xffff)
		return lo, math.Float32frombits(b&^0xffff + 0x10000)
	}
	h := float16.Fromfloat32(v)
	if math.Abs(float64(h.Float32())) > math.Abs(float64(v)) {
		h-- // the magnitude's bits, sign aside, order as the values do
	}
	return h.Float32(), (h + 1).Float32()
}

// RoundRow rounds the values of x to f: to nearest even when stochastic
// is false, else up or down at random, with the chance of each in
// proportion to the distance from the other, so that the rounding is
// unbiased (stochastic rounding). The random bits come from a hash of
// (seed, step, id, column), so the result is the same on any store and
// any number of goroutines. Values beyond f's largest finite value
// saturate to it; NaN and infinities stay as they are.
func RoundRow(f HalfFormat, x []float32, stochastic bool, seed uint64, step, id int64) {
	limit := float32(MaxFloat16)
	if f == BFloat16 {
		limit = math.Float32frombits(0x7f7f0000)
	}
	h := mix(seed ^ uint64(step)*0x9e3779b97f4a7c15 ^ uint64(id)*0xc2b2ae3d27d4eb4f)
	for j, v := range x {
		if !stochastic || v != v || math.IsInf(float64(v), 0) {
			x[j] = nearest(f, v)
			continue
		}
		if v > limit || v < -limit {
			x[j] = max(min(v, limit), -limit)
			continue
		}
		lo, hi := below(f, v)
		if lo == v {
			continue
		}
		p := (float64(v) - float64(lo)) / (float64(hi) - float64(lo)) // in (0, 1)
		u := float64(mix(h+uint64(j)*0x9e3779b97f4a7c15)>>11) / (1 << 53)
		if u < p {
			x[j] = hi
		} else {
			x[j] = lo
		}
	}
}

// mix is SplitMix64's finaliser.
func mix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// HalfToFloatBytes writes the f values of src (two bytes each) into dst
// as little-endian float32 values (four bytes each).
func HalfToFloatBytes(f HalfFormat, dst, src []byte) {
	for j := range len(src) / 2 {
		h := binary.LittleEndian.Uint16(src[2*j:])
		v := math.Float32frombits(uint32(h) << 16)
		if f == Float16 {
			v = float16.Frombits(h).Float32()
		}
		binary.LittleEndian.PutUint32(dst[4*j:], math.Float32bits(v))
	}
}

// FloatBytesToHalf writes the little-endian float32 values of src into
// dst as f values, rounded to nearest even, saturating.
func FloatBytesToHalf(f HalfFormat, dst, src []byte) {
	for j := range len(src) / 4 {
		v := math.Float32frombits(binary.LittleEndian.Uint32(src[4*j:]))
		binary.LittleEndian.PutUint16(dst[2*j:], halfBits(f, nearest(f, v)))
	}
}
