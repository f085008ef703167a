package optim

import (
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/kernel"
)

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
		prefetchAhead(rows, k, hi, dim, w)
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
