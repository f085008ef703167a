// Package rowgrad builds the row gradient of a lookup (driver.RowGrad) from
// its ids and the gradient of its output: optim.RowGradient, and the
// reused buffer of nn's sparse step.
package rowgrad

import (
	"fmt"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
)

// Build is optim.RowGradient (its doc says what it computes).
//
// With buf, the row gradient is built in the memory buf kept from its
// last Build (the RowGrad it returned then changes), so that a training
// loop that builds one each step allocates nothing once the memory has
// grown; on error that RowGrad is left as it was.
func Build(ids, grad tensor.Tensor, vocab, pad int, buf *Buffer) (*driver.RowGrad, error) {
	g, err := build(ids, grad, vocab, pad, buf)
	if err != nil || buf == nil {
		return g, err
	}
	buf.g = *g
	return &buf.g, nil
}

// A Buffer is the memory a row gradient is built in, kept from one step
// to the next: the gradient's rows and values, the sort's pairs and
// keys, and the RowGrad Build returns. Each grows as needed and is never
// shrunk.
type Buffer struct {
	rows    []int64
	values  any // []float32 or []float64
	sort    kernel.RowSort
	g       driver.RowGrad
	headers map[int]*tensor.Dense // values as [n, dim] tensors, by n (a step's count of rows varies)
}

// newValues returns an uncleared [n, dim] tensor of dtype dt, in buf's
// memory when buf is not nil and it is large enough (then kept there),
// under the header made for n rows before when there is one.
func newValues(dt tensor.Dtype, n, dim int, buf *Buffer) *tensor.Dense {
	if buf == nil {
		return operand.NewOutput(dt, tensor.Shape{n, dim})
	}
	var t *tensor.Dense
	switch v := buf.values.(type) {
	case []float32:
		if dt == tensor.Float32 && cap(v) >= n*dim {
			t = header(buf, v[:n*dim], n, dim)
		}
	case []float64:
		if dt == tensor.Float64 && cap(v) >= n*dim {
			t = header(buf, v[:n*dim], n, dim)
		}
	}
	if t == nil {
		t = operand.NewOutput(dt, tensor.Shape{n, dim})
		buf.values = t.Data()
		clear(buf.headers) // of the memory before
	}
	return t
}

// header returns the [n, dim] tensor of backing: the one made for n rows
// before, if it is of this memory, else a new one, kept for next time.
func header[T float32 | float64](buf *Buffer, backing []T, n, dim int) *tensor.Dense {
	old := buf.headers[n]
	t := operand.Header(old, backing, n, dim)
	if t == old {
		return t
	}
	if buf.headers == nil {
		buf.headers = map[int]*tensor.Dense{}
	}
	buf.headers[n] = t
	return t
}

// build is Build, in buf's memory when buf is not nil.
func build(ids, grad tensor.Tensor, vocab, pad int, buf *Buffer) (*driver.RowGrad, error) {
	ix, err := operand.ReadIndices("row gradient", "ids", ids)
	if err != nil {
		return nil, err
	}
	g, err := operand.Read("row gradient", "gradient", grad)
	if err != nil {
		return nil, err
	}
	if err := operand.CheckFloat("row gradient", "gradient", g.Dtype()); err != nil {
		return nil, err
	}
	gs := g.Shape()
	if len(gs) != len(ix.Shape)+1 || !operand.SameShape(gs[:len(gs)-1], ix.Shape) {
		return nil, fmt.Errorf("row gradient: gradient of shape %v does not fit ids of shape %v (want ids.shape + [dim]): %w",
			gs, ix.Shape, errs.ErrShape)
	}
	dim := gs[len(gs)-1]
	if err := operand.CheckIndices(operand.Label{Op: "row gradient", Arg: "ids", NonNegative: true}, ix, 0, vocab); err != nil {
		return nil, err
	}
	if buf == nil {
		buf = &Buffer{}
	}
	order := operand.Pick(ix.Dtype, sortRows[int], sortRows[int32], sortRows[int64])(ix, vocab, &buf.sort)
	out := &buf.g
	out.Rows = kernel.DistinctRows(buf.rows[:0], order, pad)
	if len(out.Rows) == 0 || dim == 0 {
		out.Values = tensor.New(tensor.Of(g.Dtype()), tensor.WithShape(len(out.Rows), dim))
		return out, nil
	}
	buf.rows = out.Rows
	out.Values = newValues(g.Dtype(), len(out.Rows), dim, buf) // SumRows writes every row
	operand.PickFloat(g.Dtype(), sumRows[float32], sumRows[float64])(out.Values, g, order, out.Rows, dim)
	return out, nil
}

// sumRows is kernel.SumRows for values of Go type T.
func sumRows[T kernel.Float](dst, src *tensor.Dense, order []kernel.RowPos, rows []int64, dim int) {
	kernel.SumRows(operand.Floats[T](dst), operand.Floats[T](src), order, rows, dim)
}

// sortRows is kernel.SortRows for ids of Go type I.
func sortRows[I kernel.Index](ix operand.Indices, vocab int, buf *kernel.RowSort) []kernel.RowPos {
	return kernel.SortRows(operand.Slice[I](ix), vocab, buf)
}
