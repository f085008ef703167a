package driver

import "gorgonia.org/tensor"

// A Schema says what a table's rows are: its name, how many rows, the
// values of a row (Dim of them, of Dtype as a cache and the graph hold
// them, stored in Format), and the optimiser state each row carries
// after them (Columns). A table knows its schema once opened
// (table.Cached.Schema, and each Store's).
type Schema struct {
	Name    string
	Rows    int64
	Dim     int
	Dtype   tensor.Dtype
	Format  Format
	Columns []Column
}
