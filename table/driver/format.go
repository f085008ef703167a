package driver

import (
	"fmt"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/kernel"
)

// A Format is how a table's values are stored: the table's own dtype
// (Float32, Float64), two bytes a value (Float16, BFloat16, which a
// table in training holds as float32 in its cache, table.WithHalf), or
// FBGEMM's row-wise quantised rows, which package serve answers
// requests from (Int8, Int4). Int8 and Int4 are the bytes
// torch.ops.quantized.embedding_bag_byte_prepack and
// embedding_bag_4bit_prepack make: a row of dim values is dim bytes then
// its scale and bias as float32 (Int8), or (dim+1)/2 bytes, two values a
// byte with the even column in the low nibble, then its scale and bias as
// float16 (Int4); a value is scale·q + bias.
type Format int

// The formats.
const (
	Float32  Format = iota // 4·dim bytes a row, little-endian
	Float16                // 2·dim bytes a row: IEEE half precision (torch.half, safetensors' F16)
	BFloat16               // 2·dim bytes a row: a float32's top 16 bits (torch.bfloat16, BF16)
	Int8                   // dim+8 bytes a row
	Int4                   // (dim+1)/2+4 bytes a row
	Float64                // 8·dim bytes a row, little-endian
)

// formats is the table of formats: each one's name (String), the
// safetensors dtype of a row's bytes, and the bytes of a row of dim
// values.
var formats = [...]struct {
	name        string
	safetensors string
	rowBytes    func(dim int) int
}{
	Float32:  {"float32", "F32", func(dim int) int { return 4 * dim }},
	Float16:  {"float16", "F16", func(dim int) int { return 2 * dim }},
	BFloat16: {"bfloat16", "BF16", func(dim int) int { return 2 * dim }},
	Int8:     {"int8-rowwise", "U8", kernel.Row8Bytes},
	Int4:     {"int4-rowwise", "U8", kernel.Row4Bytes},
	Float64:  {"float64", "F64", func(dim int) int { return 8 * dim }},
}

// Valid reports whether f is one of the formats.
func (f Format) Valid() bool { return f >= 0 && int(f) < len(formats) }

func (f Format) String() string {
	if !f.Valid() {
		return fmt.Sprintf("Format(%d)", int(f))
	}
	return formats[f].name
}

// ParseFormat returns the format String names s.
func ParseFormat(s string) (Format, error) {
	for f, x := range formats {
		if x.name == s {
			return Format(f), nil
		}
	}
	return 0, fmt.Errorf("no format %q (float32, float16, bfloat16, int8-rowwise, int4-rowwise, float64): %w", s, errs.ErrOption)
}

// RowBytes returns the bytes of a row of dim values in format f, 0 for
// a format that is not one.
func (f Format) RowBytes(dim int) int {
	if !f.Valid() {
		return 0
	}
	return formats[f].rowBytes(dim)
}

// Safetensors returns the safetensors dtype of f's rows ("F32", "BF16",
// "U8" for the row-wise formats' bytes).
func (f Format) Safetensors() string {
	if !f.Valid() {
		return ""
	}
	return formats[f].safetensors
}
