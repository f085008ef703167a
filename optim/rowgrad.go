package optim

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
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
	Rows   []int         // distinct row ids in ascending order
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
	rows   []int
	values any // []float32 or []float64
	order  []rowPos
	keys   []uint64
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
	if dt := g.Dtype(); dt != tensor.Float32 && dt != tensor.Float64 {
		return nil, fmt.Errorf("row gradient: gradient must be float32 or float64, got %v: %w", dt, gather.ErrDtype)
	}
	gs := g.Shape()
	if len(gs) != len(ix.Shape)+1 || !shapes.SameShape(gs[:len(gs)-1], ix.Shape) {
		return nil, fmt.Errorf("row gradient: gradient of shape %v does not fit ids of shape %v (want ids.shape + [dim]): %w",
			gs, ix.Shape, gather.ErrShape)
	}
	dim := gs[len(gs)-1]
	if err := operand.CheckIndices(opconfig.Label{Op: "row gradient", Arg: "ids", NonNegative: true}, ix, 0, vocab); err != nil {
		return nil, err
	}
	order := sortedRows(ix, vocab, buf)
	out := &RowGrad{}
	if buf != nil {
		out.Rows = buf.rows[:0]
	}
	for k, o := range order {
		if o.row != pad && (k == 0 || o.row != order[k-1].row) {
			out.Rows = append(out.Rows, o.row)
		}
	}
	if len(out.Rows) == 0 || dim == 0 {
		out.Values = tensor.New(tensor.Of(g.Dtype()), tensor.WithShape(len(out.Rows), dim))
		return out, nil
	}
	if buf != nil {
		buf.rows = out.Rows
	}
	out.Values = newValues(g.Dtype(), len(out.Rows), dim, buf) // sumRows writes every row
	switch g.Dtype() {
	case tensor.Float32:
		sumRows(out.Values.Float32s(), g.Float32s(), order, out.Rows, dim)
	case tensor.Float64:
		sumRows(out.Values.Float64s(), g.Float64s(), order, out.Rows, dim)
	}
	return out, nil
}

// rowPos is a position in the ids and the row it names.
type rowPos struct{ row, pos int }

// sortedRows returns the (row, position) pairs of ix sorted by row, ties
// by position: the order in which a dense IndexAdd adds them. The pairs are
// packed into one integer key, row above position, where they fit (rows
// below 2^(64 - bits of n)), and radix-sorted on the row's bits (see
// sortKeys); otherwise they are sorted as pairs. With buf, it works in
// buf's memory.
func sortedRows(ix operand.Indices, vocab int, buf *rowBuf) []rowPos {
	n := ix.Shape.TotalSize()
	if buf == nil {
		buf = &rowBuf{}
	}
	order := slices.Grow(buf.order[:0], n)[:n]
	buf.order = order
	for p := range order {
		r, _ := kernel.Norm(ix.At(p), vocab)
		order[p] = rowPos{r, p}
	}
	shift := bits.Len(uint(n))
	if shift < 64 && uint64(vocab) <= math.MaxUint64>>shift {
		keys := slices.Grow(buf.keys[:0], 2*n)[:2*n]
		buf.keys = keys
		for p, o := range order {
			keys[p] = uint64(o.row)<<shift | uint64(o.pos)
		}
		keys = sortKeys(keys[:n], keys[n:], shift, bits.Len(uint(vocab)))
		mask := uint64(1)<<shift - 1
		for k, key := range keys {
			order[k] = rowPos{int(key >> shift), int(key & mask)}
		}
		return order
	}
	slices.SortFunc(order, func(a, b rowPos) int {
		if c := cmp.Compare(a.row, b.row); c != 0 {
			return c
		}
		return cmp.Compare(a.pos, b.pos)
	})
	return order
}

// sortKeys sorts keys, whose positions (bits below shift) ascend, by their
// rows (the next rowBits bits), keeping equal rows in position order: the
// same order as sorting the keys whole. It returns keys or tmp, a slice of
// the same length, whichever holds the result. Short lists are sorted by
// comparison; longer ones by a stable least-significant-digit radix sort,
// a pass per digit of at most 11 bits, in which each key moves once.
func sortKeys(keys, tmp []uint64, shift, rowBits int) []uint64 {
	if len(keys) < 256 || rowBits > 33 {
		slices.Sort(keys)
		return keys
	}
	passes := (rowBits + 10) / 11
	width := (rowBits + passes - 1) / passes
	var count [1 << 11]int
	mask := uint64(1)<<width - 1
	for lo := shift; lo < shift+rowBits; lo += width {
		clear(count[:])
		for _, k := range keys {
			count[k>>lo&mask]++
		}
		if count[keys[0]>>lo&mask] == len(keys) {
			continue // one digit for all: the pass would change nothing
		}
		sum := 0
		for d, c := range count[:mask+1] {
			count[d] = sum
			sum += c
		}
		for _, k := range keys {
			d := k >> lo & mask
			tmp[count[d]] = k
			count[d]++
		}
		keys, tmp = tmp, keys
	}
	return keys
}

// sumRows is, with order sorted by row and then position, and want the
// distinct rows of order but for padding,
//
//	for each (r, p) in order, if r is in want: dst[slot of r] = sum of src[p]
//
// The first position of a row is copied, the others added in order, so dst
// need not be cleared first.
func sumRows[T kernel.Float](dst, src []T, order []rowPos, want []int, dim int) {
	slot := 0
	for k, o := range order {
		if k+rowsAhead < len(order) { // the positions are in no order: fetch a source row ahead
			q := order[k+rowsAhead].pos
			kernel.PrefetchRow(src[q*dim : (q+1)*dim])
		}
		r, p := o.row, o.pos
		for slot < len(want) && want[slot] < r {
			slot++
		}
		if slot == len(want) || want[slot] != r {
			continue // the padding row
		}
		d, s := dst[slot*dim:(slot+1)*dim], src[p*dim:(p+1)*dim]
		if k == 0 || order[k-1].row != r {
			copy(d, s)
			continue
		}
		kernel.AddInto(d, s)
	}
}
