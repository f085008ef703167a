package optim

import (
	"errors"
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/shapes"
)

// A Sparse optimiser updates a table in place from its row gradient:
// SparseSGD, SparseAdam and RowWiseAdagrad. Its Step must not keep g
// after it returns: nn's Embedding.Step reuses g's memory for the next
// step.
type Sparse interface {
	Step(table *tensor.Dense, g *RowGrad) error
}

// ErrNotFinite: an optimiser asked to check (CheckFinite) was given a
// gradient holding a NaN or an infinity.
var ErrNotFinite = errors.New("gradient is not finite")

// checkRowGrad checks that g can update table and, with finite, that its
// values are finite.
func checkRowGrad(op string, table *tensor.Dense, g *RowGrad, finite bool) (dim int, err error) {
	return checkRows(op, table, g, true, finite)
}

// checkRows is checkRowGrad; with ordered false, g's rows (a cache's
// slots) must lie in the table but may come in any order.
func checkRows(op string, table *tensor.Dense, g *RowGrad, ordered, finite bool) (dim int, err error) {
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
		if r < 0 || r >= ts[0] || ordered && k > 0 && r <= g.Rows[k-1] {
			return 0, fmt.Errorf("%s: gradient row %d at position %d is out of order or out of range [0, %d]: %w",
				op, r, k, ts[0]-1, gather.ErrIndexOutOfRange)
		}
	}
	if finite {
		if p := operand.PickFloat(table.Dtype(), firstNonFinite[float32], firstNonFinite[float64])(g.Values); p >= 0 {
			return 0, fmt.Errorf("%s: the gradient of row %d holds %v at column %d; nothing was updated: %w",
				op, g.Rows[p/ts[1]], g.Values.Get(p), p%ts[1], ErrNotFinite)
		}
	}
	return ts[1], nil
}

func firstNonFinite[T kernel.Float](t *tensor.Dense) int {
	return kernel.FirstNonFinite(operand.Floats[T](t))
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
