package rule

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/opconfig"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/shapes"
)

// A RowGrad is the gradient of an embedding table held as the rows a batch
// touched: Values[k] is the gradient of row Rows[k], and every other row's
// gradient is zero. Its size is O(batch × dim), whatever the vocabulary
// (TensorFlow's IndexedSlices, PyTorch's sparse embedding gradient).
type RowGrad struct {
	Rows   []int64       // distinct row ids in ascending order
	Values *tensor.Dense // [len(Rows), dim], the dtype of the table

	buf rowBuf // Set's memory, kept for the next Set
}

// RowGradient sums the gradients of looked-up vectors into the gradients of
// the rows they came from: grad has shape ids.shape + [dim] (the gradient of
// a lookup's output), and ids index rows of a table of vocab rows: each in
// [0, vocab), any other an *gather.IndexError. Repeated ids are summed in the order they
// appear in ids, as IndexAdd sums them into a dense gradient, so the two
// agree exactly. Row pad (if >= 0) is left out. It is O(n + n × dim) for
// n ids (a radix sort of the ids; for fewer than 256 ids, or a vocabulary of
// 2^33 rows or more, a comparison sort: O(n log n + n × dim)).
func RowGradient(ids, grad tensor.Tensor, vocab, pad int) (*RowGrad, error) {
	return rowGradient(ids, grad, vocab, pad, nil)
}

// Set makes g the row gradient RowGradient(ids, grad, vocab, pad) returns,
// built in the memory g kept from its last Set (its Rows and Values then
// change), so that a training loop that sets one RowGrad each step
// allocates nothing once the memory has grown. On error g is left as it
// was.
func (g *RowGrad) Set(ids, grad tensor.Tensor, vocab, pad int) error {
	r, err := rowGradient(ids, grad, vocab, pad, &g.buf)
	if err != nil {
		return err
	}
	g.Rows, g.Values = r.Rows, r.Values
	return nil
}

// rowBuf is the memory a row gradient is built in, kept by RowGrad.Set
// from one step to the next: the gradient's rows and values, and the
// sort's pairs and keys. Each grows as needed and is never shrunk.
type rowBuf struct {
	rows   []int64
	values any // []float32 or []float64
	sort   kernel.RowSort
}

// newValues returns an uncleared [n, dim] tensor of dtype dt, in buf's
// memory when buf is not nil and it is large enough (then kept there).
func newValues(dt tensor.Dtype, n, dim int, buf *rowBuf) *tensor.Dense {
	if buf == nil {
		return operand.NewOutput(dt, tensor.Shape{n, dim})
	}
	var backing any
	switch v := buf.values.(type) {
	case []float32:
		if dt == tensor.Float32 && cap(v) >= n*dim {
			backing = v[:n*dim]
		}
	case []float64:
		if dt == tensor.Float64 && cap(v) >= n*dim {
			backing = v[:n*dim]
		}
	}
	if backing == nil {
		t := operand.NewOutput(dt, tensor.Shape{n, dim})
		buf.values = t.Data()
		return t
	}
	return tensor.New(tensor.WithShape(n, dim), tensor.WithBacking(backing))
}

// rowGradient is RowGradient, built in buf's memory when buf is not nil.
func rowGradient(ids, grad tensor.Tensor, vocab, pad int, buf *rowBuf) (*RowGrad, error) {
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
	if len(gs) != len(ix.Shape)+1 || !shapes.SameShape(gs[:len(gs)-1], ix.Shape) {
		return nil, fmt.Errorf("row gradient: gradient of shape %v does not fit ids of shape %v (want ids.shape + [dim]): %w",
			gs, ix.Shape, errs.ErrShape)
	}
	dim := gs[len(gs)-1]
	if err := operand.CheckIndices(opconfig.Label{Op: "row gradient", Arg: "ids", NonNegative: true}, ix, 0, vocab); err != nil {
		return nil, err
	}
	if buf == nil {
		buf = &rowBuf{}
	}
	order := operand.Pick(ix.Dtype, sortRows[int], sortRows[int32], sortRows[int64])(ix, vocab, &buf.sort)
	out := &RowGrad{Rows: kernel.DistinctRows(buf.rows[:0], order, pad)}
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
