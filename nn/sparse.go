package nn

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
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
}

// RowGradient sums the gradients of looked-up vectors into the gradients of
// the rows they came from: grad has shape ids.shape + [dim] (the gradient of
// a lookup's output), and ids index rows of a table of vocab rows: each in
// [0, vocab), any other an *gather.IndexError. Repeated ids are summed in the order they
// appear in ids, as IndexAdd sums them into a dense gradient, so the two
// agree exactly. Row pad (if >= 0) is left out. It is O(n log n + n × dim)
// for n ids.
func RowGradient(ids, grad tensor.Tensor, vocab, pad int) (*RowGrad, error) {
	return rowGradient(ids, grad, vocab, pad, nil)
}

// rowBuf is the memory a row gradient is built in, kept by Embedding.Step
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
	if err := checkIndices(opconfig.Label{Op: "row gradient", Arg: "ids", NonNegative: true}, ix, 0, vocab); err != nil {
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

// checkRowGrad checks that g can update table.
func checkRowGrad(op string, table *tensor.Dense, g *RowGrad) (dim int, err error) {
	if table == nil || g == nil || g.Values == nil {
		return 0, fmt.Errorf("%s: table and gradient must not be nil: %w", op, gather.ErrShape)
	}
	if dt := table.Dtype(); dt != tensor.Float32 && dt != tensor.Float64 {
		return 0, fmt.Errorf("%s: table must be float32 or float64, got %v: %w", op, dt, gather.ErrDtype)
	}
	ts := table.Shape()
	if len(ts) != 2 || !operand.Writable(table) {
		return 0, fmt.Errorf("%s: table of shape %v must be a row-major matrix that is not a view: %w", op, ts, gather.ErrShape)
	}
	if table.Dtype() != g.Values.Dtype() {
		return 0, fmt.Errorf("%s: the gradient holds %v values, the table %v: %w",
			op, g.Values.Dtype(), table.Dtype(), gather.ErrDtype)
	}
	if !shapes.SameShape(g.Values.Shape(), []int{len(g.Rows), ts[1]}) {
		return 0, fmt.Errorf("%s: gradient of %d rows has values of shape %v; the table needs shape (%d, %d): %w",
			op, len(g.Rows), g.Values.Shape(), len(g.Rows), ts[1], gather.ErrShape)
	}
	for k, r := range g.Rows {
		if r < 0 || r >= ts[0] || k > 0 && r <= g.Rows[k-1] {
			return 0, fmt.Errorf("%s: gradient row %d at position %d is out of order or out of range [0, %d]: %w",
				op, r, k, ts[0]-1, gather.ErrIndexOutOfRange)
		}
	}
	return ts[1], nil
}

// SparseSGD is stochastic gradient descent on the rows a RowGrad names:
// each such row w becomes
//
//	w - lr*(g + wd*w)
//
// and every other row is left alone. Without weight decay this equals
// dense SGD (gorgonia.VanillaSolver) on the dense gradient exactly, since
// untouched rows have zero gradient. With weight decay it is lazy: dense
// SGD with L2 regularisation would also shrink untouched rows every step.
// A SparseSGD keeps no state, so one value may step any number of tables.
type SparseSGD struct {
	LearnRate   float64
	WeightDecay float64
}

// Step updates table in place. It is O(len(g.Rows) × dim). A learning
// rate or weight decay that is negative or not finite is an error wrapping
// gather.ErrOption, and the table is left as it was.
func (o *SparseSGD) Step(table *tensor.Dense, g *RowGrad) error {
	if err := checkRates("sparse sgd", o.LearnRate, o.WeightDecay); err != nil {
		return err
	}
	dim, err := checkRowGrad("sparse sgd", table, g)
	if err != nil {
		return err
	}
	switch table.Dtype() {
	case tensor.Float32:
		sgdParallel(table.Float32s(), g.Values.Float32s(), g.Rows, dim, float32(o.LearnRate), float32(o.WeightDecay))
	case tensor.Float64:
		sgdParallel(table.Float64s(), g.Values.Float64s(), g.Rows, dim, o.LearnRate, o.WeightDecay)
	}
	return nil
}

// rowsAhead is how many rows ahead of the one it updates an optimiser
// prefetches: the rows a batch names lie scattered through the table, and
// each update would otherwise wait for its row to come from memory.
const rowsAhead = 8

// sgdParallel runs sgdRows over ranges of the (distinct) rows in parallel.
func sgdParallel[T kernel.Float](w, g []T, rows []int, dim int, lr, wd T) {
	p := kernel.Workers(len(rows)*dim, len(rows))
	if p <= 1 {
		sgdRows(w, g, rows, dim, lr, wd, 0, len(rows))
		return
	}
	kernel.ParallelFor(len(rows), p, func(lo, hi int) { sgdRows(w, g, rows, dim, lr, wd, lo, hi) })
}

// sgdRows updates the rows rows[lo:hi]; without weight decay, with
// kernel.AddRow (w += -lr*g, each product rounded before the sum, as below).
func sgdRows[T kernel.Float](w, g []T, rows []int, dim int, lr, wd T, lo, hi int) {
	for k := lo; k < hi; k++ {
		if k+rowsAhead < hi {
			q := rows[k+rowsAhead]
			kernel.PrefetchRow(w[q*dim : (q+1)*dim])
		}
		r := rows[k]
		wr, gr := w[r*dim:(r+1)*dim], g[k*dim:(k+1)*dim]
		if wd == 0 {
			kernel.AddRow(wr, gr, -lr)
			continue
		}
		gr = gr[:len(wr)]
		for j := range wr {
			d := gr[j] + T(wd*wr[j])
			// The conversion rounds the product, so that it is not fused
			// with the addition: the result then matches a dense solver's
			// separate multiply and add.
			wr[j] += T(-lr * d)
		}
	}
}

// checkRates reports an error unless the learning rate lr and the weight
// decay wd of the optimiser named op are finite and not negative.
func checkRates(op string, lr, wd float64) error {
	if !(lr >= 0) || math.IsInf(lr, 1) {
		return fmt.Errorf("%s: learning rate %v must be finite and at least 0: %w", op, lr, gather.ErrOption)
	}
	if !(wd >= 0) || math.IsInf(wd, 1) {
		return fmt.Errorf("%s: weight decay %v must be finite and at least 0: %w", op, wd, gather.ErrOption)
	}
	return nil
}

// SparseAdam is Adam for row gradients with the semantics of PyTorch's
// SparseAdam: only the rows a step's gradient names have their moments
// updated and move; the step count t, used in the bias corrections, counts
// every call of Step. For a named row, with g its gradient,
//
//	m = Beta1*m + (1-Beta1)*g
//	v = Beta2*v + (1-Beta2)*g*g
//	w = w - LearnRate * sqrt(1-Beta2^t)/(1-Beta1^t) * m / (sqrt(v) + Eps)
//
// This differs from dense Adam, which decays the moments of every row on
// every step, so a row keeps moving (by its momentum) on steps that do not
// touch it; here an untouched row stays exactly where it is and its moments
// wait for its next use. WeightDecay, if set, is decoupled (AdamW-style)
// and lazy: a named row is multiplied by 1 - LearnRate*WeightDecay before
// its update; untouched rows are not decayed.
//
// Every field means what it says, zero included: NewSparseAdam sets
// PyTorch's defaults (Beta1 0.9, Beta2 0.999, Eps 1e-8). Step refuses
// values PyTorch refuses (a learning rate or weight decay that is negative
// or not finite, a beta outside [0, 1), Eps not above 0), so a literal
// that leaves Eps at zero fails at once.
//
// A SparseAdam belongs to the first table it steps: its moments, two
// buffers of the table's size and dtype allocated at the first Step, and
// its step count describe that table alone, and Step on another table
// (another tensor, even of the same shape) is an error wrapping
// ErrOtherTable. Use one SparseAdam per table. A step is
// O(len(g.Rows) × dim).
type SparseAdam struct {
	LearnRate   float64
	Beta1       float64
	Beta2       float64
	Eps         float64
	WeightDecay float64

	t     int
	table uintptr // address of the table's first element; 0 before the first Step
	m, v  any     // []float32 or []float64, the table's dtype
}

// ErrOtherTable: an optimiser that keeps state for one table was stepped
// on another.
var ErrOtherTable = errors.New("optimiser belongs to another table")

// NewSparseAdam returns a SparseAdam with learning rate lr and PyTorch's
// other defaults.
func NewSparseAdam(lr float64) *SparseAdam {
	return &SparseAdam{LearnRate: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
}

// Step updates table in place.
func (o *SparseAdam) Step(table *tensor.Dense, g *RowGrad) error {
	dim, err := checkRowGrad("sparse adam", table, g)
	if err != nil {
		return err
	}
	if err := checkRates("sparse adam", o.LearnRate, o.WeightDecay); err != nil {
		return err
	}
	switch {
	case !(o.Beta1 >= 0 && o.Beta1 < 1) || !(o.Beta2 >= 0 && o.Beta2 < 1):
		return fmt.Errorf("sparse adam: betas %v and %v must lie in [0, 1): %w", o.Beta1, o.Beta2, gather.ErrOption)
	case !(o.Eps > 0):
		return fmt.Errorf("sparse adam: Eps %v must be above 0 (NewSparseAdam sets 1e-8): %w", o.Eps, gather.ErrOption)
	}
	n := table.Shape().TotalSize()
	switch {
	case o.table == 0:
		o.table = table.Uintptr()
		o.m, o.v = zeros(table.Dtype(), n), zeros(table.Dtype(), n)
	case table.Uintptr() != o.table || momentLen(o.m) != n:
		return fmt.Errorf("sparse adam: stepped on a %v table of shape %v, but it keeps the moments of another; use one SparseAdam per table: %w",
			table.Dtype(), table.Shape(), ErrOtherTable)
	}
	b1, b2, eps := o.Beta1, o.Beta2, o.Eps
	o.t++
	step := o.LearnRate * math.Sqrt(1-math.Pow(b2, float64(o.t))) / (1 - math.Pow(b1, float64(o.t)))
	decay := 1 - o.LearnRate*o.WeightDecay
	p := kernel.Workers(len(g.Rows)*dim, len(g.Rows))
	switch table.Dtype() {
	case tensor.Float32:
		w, gv, m, v := table.Float32s(), g.Values.Float32s(), o.m.([]float32), o.v.([]float32)
		kernel.ParallelFor(len(g.Rows), p, func(lo, hi int) { adamRows(w, gv, m, v, g.Rows, dim, b1, b2, eps, step, decay, lo, hi) })
	case tensor.Float64:
		w, gv, m, v := table.Float64s(), g.Values.Float64s(), o.m.([]float64), o.v.([]float64)
		kernel.ParallelFor(len(g.Rows), p, func(lo, hi int) { adamRows(w, gv, m, v, g.Rows, dim, b1, b2, eps, step, decay, lo, hi) })
	}
	return nil
}

// zeros returns n zeros of dtype dt, Float32 ([]float32) or else Float64
// ([]float64): an optimiser's state for a table of that dtype.
func zeros(dt tensor.Dtype, n int) any {
	if dt == tensor.Float32 {
		return make([]float32, n)
	}
	return make([]float64, n)
}

// momentLen returns the length of a moment buffer.
func momentLen(m any) int {
	switch m := m.(type) {
	case []float32:
		return len(m)
	case []float64:
		return len(m)
	}
	return -1
}

// adamRows updates the rows rows[lo:hi] and their moments, computing in
// float64 and keeping the moments in the table's type T.
func adamRows[T kernel.Float](w, g, m, v []T, rows []int, dim int, b1, b2, eps, step, decay float64, lo, hi int) {
	for k := lo; k < hi; k++ {
		if k+rowsAhead < hi {
			q := rows[k+rowsAhead]
			kernel.PrefetchRow(w[q*dim : (q+1)*dim])
			kernel.PrefetchRow(m[q*dim : (q+1)*dim])
			kernel.PrefetchRow(v[q*dim : (q+1)*dim])
		}
		r := rows[k]
		wr, gr := w[r*dim:(r+1)*dim], g[k*dim:(k+1)*dim]
		mr, vr := m[r*dim:(r+1)*dim], v[r*dim:(r+1)*dim]
		for j := range wr {
			x := float64(gr[j])
			mj := b1*float64(mr[j]) + (1-b1)*x
			vj := b2*float64(vr[j]) + (1-b2)*x*x
			mr[j], vr[j] = T(mj), T(vj)
			wr[j] = T(float64(wr[j])*decay - step*mj/(math.Sqrt(vj)+eps))
		}
	}
}

// A SparseOptimizer updates a table in place from its row gradient:
// SparseSGD and SparseAdam. Its Step must not keep g after it returns:
// Embedding.Step reuses g's memory for the next step.
type SparseOptimizer interface {
	Step(table *tensor.Dense, g *RowGrad) error
}

// sparseLookup is one lookup of a sparse embedding: its ids and the zero
// "tap" added to its output, whose gradient is the output's gradient.
type sparseLookup struct {
	ids, tap *gorgonia.Node
	bag      *bagOp         // for a bag: its op, whose output the tap follows
	inputs   gorgonia.Nodes // for a bag: the op's inputs
	freq     bool           // EmbeddingScaleGradByFreq
}

// grad returns the gradient of l's rows by position, shaped ids.shape +
// [dim], from the gradient of its tap: the tap's gradient itself for a
// lookup, what each position's row received for a bag.
func (l sparseLookup) grad(tapGrad *tensor.Dense, vocab int) (*tensor.Dense, error) {
	if l.bag == nil {
		if !l.freq {
			return tapGrad, nil
		}
		ix, err := operand.ReadIndices("embedding", "ids", l.ids.Value())
		if err != nil {
			return nil, err
		}
		return divideByFreq(tapGrad.Clone().(*tensor.Dense), ix, vocab), nil
	}
	vals := make([]gorgonia.Value, len(l.inputs))
	for k, n := range l.inputs {
		vals[k] = n.Value()
	}
	a, err := l.bag.args(vals)
	if err != nil {
		return nil, err
	}
	defer a.release()
	o := l.bag
	out := tensor.New(tensor.Of(o.dtype), tensor.WithShape(append(o.idShape.Clone(), o.dim)...))
	if out.Shape().TotalSize() == 0 {
		return out, nil
	}
	switch o.dtype {
	case tensor.Float32:
		positionGrad(out.Float32s(), tapGrad.Float32s(), a.table.Float32s(), a, floatsOf[float32](a.w), o.vocab, o.dim)
	case tensor.Float64:
		positionGrad(out.Float64s(), tapGrad.Float64s(), a.table.Float64s(), a, floatsOf[float64](a.w), o.vocab, o.dim)
	}
	if l.freq {
		return divideByFreq(out, a.ids, vocab), nil
	}
	return out, nil
}

// divideByFreq divides row p of g (ids.shape + [dim]) by the number of
// times ids[p] occurs in ids, in place, and returns g.
func divideByFreq(g *tensor.Dense, ids operand.Indices, vocab int) *tensor.Dense {
	n := ids.Shape.TotalSize()
	counts := make(map[int]float64)
	for p := range n {
		counts[kernel.Wrap(ids.At(p), vocab)]++
	}
	if n == 0 {
		return g
	}
	dim := g.Shape().TotalSize() / n
	for p := range n {
		c := counts[kernel.Wrap(ids.At(p), vocab)]
		switch g.Dtype() {
		case tensor.Float32:
			row := g.Float32s()[p*dim : (p+1)*dim]
			for k := range row {
				row[k] /= float32(c)
			}
		case tensor.Float64:
			row := g.Float64s()[p*dim : (p+1)*dim]
			for k := range row {
				row[k] /= c
			}
		}
	}
	return g
}

func positionGrad[T kernel.Float](out, g, table []T, a bagArgs, w []T, vocab, dim int) {
	switch a.ids.Dtype {
	case tensor.Int:
		positionGradTyped(out, g, table, a.ids.Ints, w, vocab, dim, &a.bg)
	case tensor.Int32:
		positionGradTyped(out, g, table, a.ids.I32, w, vocab, dim, &a.bg)
	default:
		positionGradTyped(out, g, table, a.ids.I64, w, vocab, dim, &a.bg)
	}
}

func positionGradTyped[T kernel.Float, I kernel.Index](out, g, table []T, ids []I, w []T, vocab, dim int, bg *kernel.Bags) {
	var arg []int32
	if bg.Mode == kernel.BagMax {
		arg = kernel.BagArgmax(table, ids, w, dim, bg)
	}
	kernel.BagPositionGrad(out, g, ids, w, vocab, dim, bg, arg)
}

// GradNodes returns the nodes of a sparse embedding to differentiate with
// respect to, alongside the model's other learnables:
//
//	gorgonia.Grad(loss, append(dense, emb.GradNodes()...)...)
//
// Each is an input of zeros added to one lookup's output, so its gradient is
// that output's gradient: O(batch × dim), never the table's size. It
// returns nil for a dense or frozen embedding, whose table is in Learnables.
func (e *Embedding) GradNodes() gorgonia.Nodes {
	var ns gorgonia.Nodes
	for _, l := range e.lookups {
		ns = append(ns, l.tap)
	}
	return ns
}

// RowGrad returns the gradient of a sparse embedding's table after a run of
// the graph: the rows its lookups touched and their summed gradients (the
// padding row left out). It reads the ids and the gradients of GradNodes and
// clears the latter, so that a machine that accumulates gradients across
// runs does not add this run's into the next. On its first 8 calls (Step's
// included) and every 64th after them it also checks that GradNodes still
// hold zeros: a dense solver given them moves them, which is an error
// wrapping gather.ErrGraph.
func (e *Embedding) RowGrad() (*RowGrad, error) { return e.rowGrad(nil) }

// rowGrad is RowGrad, built in buf's memory when buf is not nil.
func (e *Embedding) rowGrad(buf *rowBuf) (*RowGrad, error) {
	if !e.cfg.sparse || e.cfg.frozen {
		return nil, fmt.Errorf("embedding %q: RowGrad needs a sparse, trainable embedding: %w", e.Table.Name(), gather.ErrOption)
	}
	if len(e.lookups) == 0 {
		return nil, fmt.Errorf("embedding %q: RowGrad before any Lookup: %w", e.Table.Name(), gather.ErrGraph)
	}
	vocab, dim := e.Table.Shape()[0], e.Table.Shape()[1]
	checkTaps := tapCheckDue(e.rowGrads)
	e.rowGrads++
	idss, grads, taps := make([]*tensor.Dense, len(e.lookups)), make([]*tensor.Dense, len(e.lookups)), make([]*tensor.Dense, len(e.lookups))
	// Whatever happens, this run's tap gradients are cleared, so that a
	// machine that accumulates gradients does not add them into the next.
	defer func() {
		for _, g := range taps {
			if g != nil {
				clearFloats(g)
			}
		}
	}()
	for k, l := range e.lookups {
		gv, err := l.tap.Grad()
		if err != nil {
			return nil, fmt.Errorf("embedding %q: no gradient for %v; was it passed to gorgonia.Grad? %w", e.Table.Name(), l.tap.Name(), errs.Graph(err))
		}
		if gv == nil || l.ids.Value() == nil {
			return nil, fmt.Errorf("embedding %q: the graph has not run: run it (vm.RunAll) before Step or RowGrad, "+
				"so that the lookups' ids and gradients are there: %w", e.Table.Name(), gather.ErrGraph)
		}
		if idss[k], err = operand.Read("embedding", "ids", l.ids.Value()); err != nil {
			return nil, err
		}
		if checkTaps {
			if err := checkTap(e.Table.Name(), l.tap); err != nil {
				return nil, err
			}
		}
		if taps[k], err = operand.Read("embedding", "gradient", gv); err != nil {
			return nil, err
		}
		if grads[k], err = l.grad(taps[k], vocab); err != nil {
			return nil, err
		}
	}
	if len(e.lookups) == 1 {
		return rowGradient(idss[0], grads[0], vocab, e.padding(), buf)
	}

	// Several lookups: one list of ids and one of their gradients, in
	// lookup order.
	var ids []int
	for _, t := range idss {
		ix, err := operand.ReadIndices("embedding", "ids", t)
		if err != nil {
			return nil, err
		}
		for p := range ix.Shape.TotalSize() {
			ids = append(ids, int(ix.At(p)))
		}
	}
	grad := tensor.New(tensor.Of(e.Table.Dtype()), tensor.WithShape(len(ids), dim))
	off := 0
	for _, g := range grads {
		n := g.Shape().TotalSize()
		if n > 0 {
			switch grad.Dtype() {
			case tensor.Float32:
				copy(grad.Float32s()[off:off+n], g.Float32s())
			case tensor.Float64:
				copy(grad.Float64s()[off:off+n], g.Float64s())
			}
		}
		off += n
	}
	idsT := tensor.New(tensor.Of(tensor.Int), tensor.WithShape(len(ids)))
	if len(ids) > 0 {
		idsT = tensor.New(tensor.WithShape(len(ids)), tensor.WithBacking(ids))
	}
	return rowGradient(idsT, grad, vocab, e.padding(), buf)
}

// Step is the sparse training step of the table: it takes RowGrad and
// hands it to opt, which updates the table in place.
//
//	vm.RunAll()
//	emb.Step(adam)  // the table, from the rows this run touched
//	solver.Step(gorgonia.NodesToValueGrads(dense))  // the rest of the model
//	vm.Reset()
//
// Step builds the row gradient (its rows, its values and the sort's
// scratch) in memory it keeps for the next step, where RowGrad allocates
// them anew; opt must not keep the gradient after its Step returns
// (SparseSGD and SparseAdam do not). Steps of one Embedding must not run
// concurrently.
func (e *Embedding) Step(opt SparseOptimizer) error {
	if opt == nil {
		return fmt.Errorf("embedding %q: Step needs an optimiser, such as &nn.SparseSGD{...} or nn.NewSparseAdam: %w", e.Table.Name(), gather.ErrOption)
	}
	table, err := e.table()
	if err != nil {
		return err
	}
	g, err := e.rowGrad(&e.buf)
	if err != nil {
		return err
	}
	if e.file != nil {
		// A table in a file: an I/O error on its mapping is an error here,
		// not the end of the process (see OpenEmbedding).
		if err := fileio.Guard(func() error { return opt.Step(table, g) }); err != nil {
			return fmt.Errorf("embedding %q: %w", e.Table.Name(), err)
		}
		return nil
	}
	return opt.Step(table, g)
}

// tapCheckDue reports whether the row gradient built after n others checks
// the taps: the first 8 and every 64th after them. A dense solver given
// the taps moves them from its first step on, so a mistake shows within a
// few steps, while a long run pays for the pass over them rarely.
func tapCheckDue(n int) bool { return n < 8 || n%64 == 0 }

// checkTap reports an error unless the tap node holds zeros. A tap that
// moved was updated by a dense solver (GradNodes passed to it as
// learnables), which trains the tap instead of the table.
func checkTap(table string, tap *gorgonia.Node) error {
	t, ok := tap.Value().(*tensor.Dense)
	if !ok {
		return nil
	}
	var p int
	switch t.Dtype() {
	case tensor.Float32:
		p = firstNonZero(t.Float32s())
	case tensor.Float64:
		p = firstNonZero(t.Float64s())
	default:
		return nil
	}
	if p < 0 {
		return nil
	}
	return fmt.Errorf("embedding %q: %v is no longer zero (element %d): GradNodes were updated by a dense solver; "+
		"pass them to gorgonia.Grad only, never to a solver or BindDualValues: %w", table, tap.Name(), p, gather.ErrGraph)
}

// firstNonZero returns the position of the first element of s that is not
// zero, or -1.
func firstNonZero[T kernel.Float](s []T) int {
	for i, v := range s {
		if v != 0 {
			return i
		}
	}
	return -1
}

func (e *Embedding) padding() int {
	if e.cfg.hasPad {
		return e.cfg.pad
	}
	return -1
}
