package optim

import (
	"fmt"
	"math"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/kernel"
)

// SparseAdagrad is PyTorch's torch.optim.Adagrad on a sparse gradient
// (an nn.Embedding with sparse=True): one accumulator per element, the
// column "sum" (dim values a row, InitialAccumulatorValue to start). For
// step t and each row the gradient names, with g its gradient,
//
//	clr = LearnRate / (1 + (t-1)*LRDecay)
//	sum += g*g
//	w -= clr * g / (sqrt(sum) + Eps)
//
// computed in the table's dtype, as PyTorch computes it. Other rows are
// left alone. PyTorch refuses weight decay with a sparse gradient, and so
// there is none here. NewSparseAdagrad sets PyTorch's defaults; a step
// refuses a learning rate, LRDecay or InitialAccumulatorValue that is
// negative or not finite, and an Eps not above 0.
type SparseAdagrad struct {
	LearnRate               float64
	LRDecay                 float64
	InitialAccumulatorValue float64
	Eps                     float64
	// CheckFinite makes a step refuse a gradient that holds a NaN or an
	// infinity: an error wrapping ErrNotFinite that names the row, with
	// the table and the sums unchanged.
	CheckFinite bool
}

// NewSparseAdagrad returns a SparseAdagrad with learning rate lr and
// PyTorch's other defaults (no decay, accumulators from 0, Eps 1e-10).
func NewSparseAdagrad(lr float64) *SparseAdagrad {
	return &SparseAdagrad{LearnRate: lr, Eps: 1e-10}
}

// Name returns "sparse_adagrad".
func (o *SparseAdagrad) Name() string { return "sparse_adagrad" }

// Params returns the numbers of the update at step t, for a store that
// applies the rule on its servers (driver.Params).
func (o *SparseAdagrad) Params(t int64) []float64 {
	nclr, _ := o.check(t) // checked by the store's call of Check
	return []float64{f32(nclr), f32(o.Eps)}
}

// Columns returns the accumulators, "sum", dim values.
func (o *SparseAdagrad) Columns(dim int) []driver.Column {
	return []driver.Column{{Name: "sum", Width: dim, Init: o.InitialAccumulatorValue}}
}

// StepRows updates the rows g names where r holds them, as step r.Step.
func (o *SparseAdagrad) StepRows(r Rows, g *RowGrad) error {
	nclr, err := o.check(r.Step)
	if err != nil {
		return err
	}
	sg, dim, err := driver.CheckRows("sparse adagrad", r, g, o.Columns, o.CheckFinite)
	if err != nil {
		return err
	}
	if r.Weight.Dtype() == tensor.Float32 {
		kernel.SparseAdagradRows(r.Weight.Float32s(), sg.Values.Float32s(), r.State[0].Float32s(), sg.Rows, dim, float32(nclr), float32(o.Eps))
		return nil
	}
	kernel.SparseAdagradRows(r.Weight.Float64s(), sg.Values.Float64s(), r.State[0].Float64s(), sg.Rows, dim, nclr, o.Eps)
	return nil
}

// Check reports the error StepRows would report for step t and the
// gradient g of rows dim wide.
func (o *SparseAdagrad) Check(t int64, g *RowGrad, dim int) error {
	if _, err := o.check(t); err != nil {
		return err
	}
	return driver.CheckGrad("sparse adagrad", g, dim, o.CheckFinite)
}

// check reports an error unless o's settings are ones PyTorch accepts,
// and returns the negated learning rate of step t.
func (o *SparseAdagrad) check(t int64) (float64, error) {
	for _, s := range []struct {
		name string
		v    float64
	}{{"learning rate", o.LearnRate}, {"LRDecay", o.LRDecay}, {"InitialAccumulatorValue", o.InitialAccumulatorValue}} {
		if !(s.v >= 0) || math.IsInf(s.v, 1) {
			return 0, fmt.Errorf("sparse adagrad: %s %v must be finite and at least 0: %w", s.name, s.v, errs.ErrOption)
		}
	}
	if !(o.Eps > 0) || math.IsInf(o.Eps, 1) {
		return 0, fmt.Errorf("sparse adagrad: Eps %v must be above 0 and finite (NewSparseAdagrad sets 1e-10): %w", o.Eps, errs.ErrOption)
	}
	if t < 1 {
		return 0, fmt.Errorf("sparse adagrad: step number %d; steps count from 1: %w", t, errs.ErrOption)
	}
	return -(o.LearnRate / (1 + float64(t-1)*o.LRDecay)), nil
}
