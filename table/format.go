package table

import (
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/table/driver"
)

// isHalf reports whether f is Float16 or BFloat16.
func isHalf(f driver.Format) bool { return f == driver.Float16 || f == driver.BFloat16 }

// halfOf returns f as the half kernels take it; f must be Float16 or
// BFloat16.
func halfOf(f driver.Format) kernel.HalfFormat {
	if f == driver.BFloat16 {
		return kernel.BFloat16
	}
	return kernel.Float16
}

// format returns the format of the values of a table of dtype dt whose
// half format is half (0 for none).
func format(dt tensor.Dtype, half driver.Format) driver.Format {
	switch {
	case isHalf(half):
		return half
	case dt == tensor.Float64:
		return driver.Float64
	}
	return driver.Float32
}

func (c *Cached) format() driver.Format { return format(c.dt, c.half) }
