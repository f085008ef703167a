package optim

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/table"
)

// A ServerStepper is a RowStepper whose step the servers of a Redis
// Cluster apply to the rows they hold (table.RedisStore's Functions), so
// that several workers train one table at once and lose no update
// (table.CacheOptions.Shared). SparseSGD, SparseAdam and RowWiseAdagrad
// are ServerSteppers; the server computes what StepRows computes on
// float32 rows, to the bit.
type ServerStepper interface {
	RowStepper
	// StepServer applies the step of g, float32 rows in increasing
	// order, to the rows of s; t is the step's count (from 1), which
	// SparseAdam's bias corrections use.
	StepServer(s *table.RedisStore, g *RowGrad, t int64) error
}

// StepServer applies the step on the server (see ServerStepper).
func (o *SparseSGD) StepServer(s *table.RedisStore, g *RowGrad, t int64) error {
	if err := checkRates("sparse sgd", o.LearnRate, o.WeightDecay); err != nil {
		return err
	}
	ids, grad, err := serverGrad("sparse sgd", s, g, o.CheckFinite)
	if err != nil {
		return err
	}
	return s.StepSGD(ids, grad, o.LearnRate, o.WeightDecay)
}

// StepServer applies the step on the server (see ServerStepper).
func (o *SparseAdam) StepServer(s *table.RedisStore, g *RowGrad, t int64) error {
	if err := o.check(); err != nil {
		return err
	}
	ids, grad, err := serverGrad("sparse adam", s, g, o.CheckFinite)
	if err != nil {
		return err
	}
	return s.StepAdam(ids, grad, table.AdamStep{LearnRate: o.LearnRate, Beta1: o.Beta1, Beta2: o.Beta2, Eps: o.Eps, WeightDecay: o.WeightDecay, T: t})
}

// StepServer applies the step on the server (see ServerStepper).
func (o *RowWiseAdagrad) StepServer(s *table.RedisStore, g *RowGrad, t int64) error {
	if err := o.check(); err != nil {
		return err
	}
	ids, grad, err := serverGrad("rowwise adagrad", s, g, o.CheckFinite)
	if err != nil {
		return err
	}
	return s.StepAdagrad(ids, grad, o.LearnRate, o.Eps, o.WeightDecay)
}

// serverGrad checks that g is a float32 gradient of rows of s in
// increasing order and returns its rows and values as a RedisStore's
// Step methods take them.
func serverGrad(op string, s *table.RedisStore, g *RowGrad, finite bool) ([]int64, []float32, error) {
	if s == nil || g == nil || g.Values == nil {
		return nil, nil, fmt.Errorf("%s: store and gradient must not be nil: %w", op, gather.ErrShape)
	}
	if g.Values.Dtype() != tensor.Float32 || !operand.Writable(g.Values) {
		return nil, nil, fmt.Errorf("%s: a server steps float32 rows; the gradient holds %v: %w", op, g.Values.Dtype(), gather.ErrDtype)
	}
	vals := g.Values.Float32s()
	if sh := g.Values.Shape(); len(sh) != 2 || sh[0] != len(g.Rows) {
		return nil, nil, fmt.Errorf("%s: gradient of %d rows has values of shape %v: %w", op, len(g.Rows), sh, gather.ErrShape)
	}
	ids := make([]int64, len(g.Rows))
	for k, r := range g.Rows {
		if r < 0 || int64(r) >= s.Rows() || k > 0 && r <= g.Rows[k-1] {
			return nil, nil, fmt.Errorf("%s: gradient row %d at position %d is out of order or out of range [0, %d]: %w",
				op, r, k, s.Rows()-1, gather.ErrIndexOutOfRange)
		}
		ids[k] = int64(r)
	}
	if finite {
		if p := firstNonFinite[float32](g.Values); p >= 0 {
			dim := len(vals) / max(len(g.Rows), 1)
			return nil, nil, fmt.Errorf("%s: the gradient of row %d holds %v at column %d; nothing was updated: %w",
				op, g.Rows[p/dim], vals[p], p%dim, ErrNotFinite)
		}
	}
	return ids, vals, nil
}

var (
	_ ServerStepper = (*SparseSGD)(nil)
	_ ServerStepper = (*SparseAdam)(nil)
	_ ServerStepper = (*RowWiseAdagrad)(nil)
)
