package table

import "gorgonia.org/tensor"

// A Schema says what a table's rows are: its name, how many rows, the
// values of a row (Dim of them, of Dtype as a cache and the graph hold
// them, stored in Format), and the optimiser state each row carries
// after them (Columns). A table knows its schema once opened
// (Cached.Schema, and each Store's).
type Schema struct {
	Name    string
	Rows    int64
	Dim     int
	Dtype   tensor.Dtype
	Format  Format
	Columns []Column
}

// format returns the format of the values of a table of dtype dt whose
// half format is half (0 for none).
func format(dt tensor.Dtype, half Format) Format {
	switch {
	case half.isHalf():
		return half
	case dt == tensor.Float64:
		return Float64
	}
	return Float32
}

func (c *Cached) format() Format { return format(c.dt, c.half) }
