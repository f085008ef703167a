package metrics

import (
	"fmt"
	"math"

	"github.com/gathergrad/gather/internal/errs"
)

// A Regression measures predicted values against true ones, as a rating
// model is judged (Surprise's accuracy.rmse and accuracy.mae): the root
// mean squared error and the mean absolute error over every example
// Update has seen. Sums accumulate in float64. The zero Regression is
// ready to use; it is not safe for concurrent use.
type Regression struct {
	n        int64
	sq, abs  float64
	residual float64 // Σ (prediction - target), for Bias
}

// Update adds the examples of one batch: predictions and their targets.
// Slices of different lengths are an error wrapping gather.ErrShape; a
// prediction or target that is NaN or infinite is an error wrapping
// ErrNotFinite naming its position; on error no example is added.
func (r *Regression) Update(predictions, targets []float32) error {
	if len(predictions) != len(targets) {
		return fmt.Errorf("metrics: %d predictions for %d targets: %w", len(predictions), len(targets), errs.ErrShape)
	}
	for i, p := range predictions {
		if math.IsNaN(float64(p)) || math.IsInf(float64(p), 0) || math.IsNaN(float64(targets[i])) || math.IsInf(float64(targets[i]), 0) {
			return fmt.Errorf("metrics: example %d: prediction %v, target %v: %w", i, p, targets[i], ErrNotFinite)
		}
	}
	for i, p := range predictions {
		d := float64(p) - float64(targets[i])
		r.sq += d * d
		r.abs += math.Abs(d)
		r.residual += d
	}
	r.n += int64(len(predictions))
	return nil
}

// Examples returns the number of examples added.
func (r *Regression) Examples() int64 { return r.n }

// RMSE returns √(Σ (p - y)² / n), NaN before any example.
func (r *Regression) RMSE() float64 { return math.Sqrt(r.sq / float64(r.n)) }

// MAE returns Σ |p - y| / n, NaN before any example.
func (r *Regression) MAE() float64 { return r.abs / float64(r.n) }

// Bias returns Σ (p - y) / n, the mean error (above 0: the model
// predicts too high), NaN before any example.
func (r *Regression) Bias() float64 { return r.residual / float64(r.n) }

// Reset forgets every example.
func (r *Regression) Reset() { *r = Regression{} }
