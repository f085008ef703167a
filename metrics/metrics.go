// Package metrics judges a binary classifier as it trains: a click model's
// predicted probabilities against the clicks that came. A Binary keeps
// the figures TorchRec's RecMetricModule reports, over the whole stream
// (Lifetime) and over its last examples (Window):
//
//   - AUC, the probability that a positive scores above a negative (ties
//     count half): exact over the window; over the lifetime from a
//     histogram of the scores (BinnedAUC), whose error the Report bounds;
//   - log loss, the mean of -y·log p - (1-y)·log(1-p), p clamped to
//     [1e-7, 1-1e-7];
//   - normalized entropy (NE), the log loss over the entropy of the
//     stream's click-through rate: below 1 the model knows more than the
//     rate alone;
//   - calibration, the sum of the predictions over the number of clicks.
//
// Update costs O(1) an example (a ring write and a histogram count);
// Window costs O(w log w) for a window of w examples, Lifetime O(bins).
//
//	m, _ := metrics.NewBinary(metrics.Options{Window: 100_000})
//	for each batch: m.Update(probs, clicks)
//	fmt.Println(m.Window().AUC, m.Window().NE)
//
// A Regression judges predicted values (a rating model's) by their RMSE
// and MAE.
package metrics

import (
	"fmt"
	"math"
	"slices"

	"github.com/gathergrad/gather/internal/errs"
)

// Options configure a Binary.
type Options struct {
	// Window is how many of the latest examples Window reports on; 0
	// means 100,000.
	Window int
	// Bins is how many equal bins of [0, 1] the binned AUC counts scores
	// in; 0 means 10,000.
	Bins int
}

// A Report is what a Binary measured over some examples.
type Report struct {
	Examples  int64
	Clicks    float64 // the sum of the labels
	AUC       float64 // exact (Window), or the binned AUC (Lifetime); NaN without both classes
	BinnedAUC float64 // from the histogram of the scores
	// AUCBound bounds |BinnedAUC - exact AUC|: half the fraction of
	// positive-negative pairs whose scores share a bin, which the
	// histogram cannot order.
	AUCBound    float64
	LogLoss     float64
	NE          float64 // LogLoss over the entropy of the rate Clicks/Examples; NaN for a rate of 0 or 1
	Calibration float64 // the sum of the predictions over Clicks
}

// A Binary measures predicted probabilities against 0/1 labels. It is not
// safe for concurrent use.
type Binary struct {
	bins int
	// The window: a ring of the latest examples.
	scores []float32
	labels []float32
	next   int  // where the next example goes
	full   bool // the ring has wrapped
	// The lifetime.
	n            int64
	clicks, pred float64
	loss         float64
	pos, neg     []float64 // the labels' weights by score bin
}

// MaxBytes bounds the memory a Binary takes: 8 bytes a window example
// and 32 a bin (its histogram, and Lifetime's copy of it). Options past
// it are an error naming the bytes.
const MaxBytes = 1 << 30

// ErrNotFinite: a score that is NaN or infinite. It is optim.ErrNotFinite.
var ErrNotFinite = errs.ErrNotFinite

// NewBinary returns a Binary of o. A negative Window or Bins, or a
// Binary of more than MaxBytes, is an error wrapping gather.ErrOption
// that names the option and its limit.
func NewBinary(o Options) (*Binary, error) {
	switch {
	case o.Window < 0:
		return nil, fmt.Errorf("metrics: Window %d must be at least 0: %w", o.Window, errs.ErrOption)
	case o.Bins < 0:
		return nil, fmt.Errorf("metrics: Bins %d must be at least 0: %w", o.Bins, errs.ErrOption)
	}
	if o.Window == 0 {
		o.Window = 100_000
	}
	if o.Bins == 0 {
		o.Bins = 10_000
	}
	if b := 8*float64(o.Window) + 32*float64(o.Bins); b > MaxBytes {
		return nil, fmt.Errorf("metrics: Window %d and Bins %d take %.0f bytes, more than MaxBytes (%d): %w", o.Window, o.Bins, b, MaxBytes, errs.ErrOption)
	}
	return &Binary{bins: o.Bins, scores: make([]float32, o.Window), labels: make([]float32, o.Window),
		pos: make([]float64, o.Bins), neg: make([]float64, o.Bins)}, nil
}

// eps clamps a prediction away from 0 and 1 in the log loss, as
// TorchRec's NE does.
const eps = 1e-7

// Update adds the examples: scores[k] the predicted probability of a
// click, labels[k] 0 or 1. A score outside [0, 1] or not a number, a
// label other than 0 or 1, or slices of different lengths is an error
// naming it (a NaN or infinite score wraps ErrNotFinite; another one
// outside [0, 1] gather.ErrOption), and nothing is added.
func (m *Binary) Update(scores, labels []float32) error {
	if len(scores) != len(labels) {
		return fmt.Errorf("metrics: %d scores for %d labels: %w", len(scores), len(labels), errs.ErrShape)
	}
	for k, p := range scores {
		if math.IsNaN(float64(p)) || math.IsInf(float64(p), 0) {
			return fmt.Errorf("metrics: scores[%d] = %v is not a probability: %w", k, p, ErrNotFinite)
		}
		if !(p >= 0 && p <= 1) {
			return fmt.Errorf("metrics: scores[%d] = %v is not a probability: %w", k, p, errs.ErrOption)
		}
		if y := labels[k]; y != 0 && y != 1 {
			return fmt.Errorf("metrics: labels[%d] = %v is not 0 or 1: %w", k, y, errs.ErrOption)
		}
	}
	for k, p := range scores {
		y := labels[k]
		m.scores[m.next], m.labels[m.next] = p, y
		if m.next++; m.next == len(m.scores) {
			m.next, m.full = 0, true
		}
		m.n++
		m.clicks += float64(y)
		m.pred += float64(p)
		m.loss += logLoss(p, y)
		b := m.bin(p)
		if y == 1 {
			m.pos[b]++
		} else {
			m.neg[b]++
		}
	}
	return nil
}

func (m *Binary) bin(p float32) int { return min(int(float64(p)*float64(m.bins)), m.bins-1) }

func logLoss(p, y float32) float64 {
	q := min(max(float64(p), eps), 1-eps)
	if y == 1 {
		return -math.Log(q)
	}
	return -math.Log(1 - q)
}

// Lifetime reports on every example so far; its AUC is the binned one.
func (m *Binary) Lifetime() Report {
	r := Report{Examples: m.n, Clicks: m.clicks}
	r.BinnedAUC, r.AUCBound = binnedAUC(m.pos, m.neg)
	r.AUC = r.BinnedAUC
	r.finish(m.loss, m.pred)
	return r
}

// Window reports on the latest Options.Window examples (all of them, if
// fewer): its AUC is exact, as scikit-learn's roc_auc_score computes it.
func (m *Binary) Window() Report {
	// The examples oldest first, so that the sums run in the stream's
	// order.
	scores, labels := m.scores[:m.next], m.labels[:m.next]
	if m.full {
		scores = append(slices.Clone(m.scores[m.next:]), scores...)
		labels = append(slices.Clone(m.labels[m.next:]), labels...)
	}
	r := Report{Examples: int64(len(scores))}
	var loss, pred float64
	pos, neg := make([]float64, m.bins), make([]float64, m.bins)
	for k, p := range scores {
		y := labels[k]
		r.Clicks += float64(y)
		pred += float64(p)
		loss += logLoss(p, y)
		if y == 1 {
			pos[m.bin(p)]++
		} else {
			neg[m.bin(p)]++
		}
	}
	r.AUC = exactAUC(scores, labels)
	r.BinnedAUC, r.AUCBound = binnedAUC(pos, neg)
	r.finish(loss, pred)
	return r
}

// finish sets r's log loss, NE and calibration from the sums of the
// losses and the predictions of its examples.
func (r *Report) finish(loss, pred float64) {
	if r.Examples == 0 {
		r.LogLoss, r.NE, r.Calibration = math.NaN(), math.NaN(), math.NaN()
		return
	}
	n := float64(r.Examples)
	r.LogLoss = loss / n
	ctr := r.Clicks / n
	r.NE = math.NaN()
	if ctr > 0 && ctr < 1 {
		r.NE = r.LogLoss / -(ctr*math.Log(ctr) + (1-ctr)*math.Log(1-ctr))
	}
	r.Calibration = pred / r.Clicks
}

// exactAUC returns the AUC of scores against labels, ties counting half:
// the Mann-Whitney statistic over the scores' ranks, NaN without both
// classes.
func exactAUC(scores, labels []float32) float64 {
	idx := make([]int32, len(scores))
	for k := range idx {
		idx[k] = int32(k)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		switch {
		case scores[a] < scores[b]:
			return -1
		case scores[a] > scores[b]:
			return 1
		}
		return 0
	})
	// Walk the scores in order, a run of equal scores at a time: each
	// positive beats the negatives below its run and ties half of its
	// run's.
	var pos, neg, wins float64
	for i := 0; i < len(idx); {
		j := i
		var p, q float64
		for ; j < len(idx) && scores[idx[j]] == scores[idx[i]]; j++ {
			if labels[idx[j]] == 1 {
				p++
			} else {
				q++
			}
		}
		wins += p*neg + p*q/2
		pos, neg = pos+p, neg+q
		i = j
	}
	if pos == 0 || neg == 0 {
		return math.NaN()
	}
	return wins / (pos * neg)
}

// binnedAUC returns the AUC of the histograms pos and neg (the labels'
// counts by score bin), pairs within a bin counting half, and the bound
// on its error: half the fraction of pairs within a bin.
func binnedAUC(pos, neg []float64) (auc, bound float64) {
	var p, q, wins, tied float64
	for b := range pos {
		wins += pos[b]*q + pos[b]*neg[b]/2
		tied += pos[b] * neg[b]
		p, q = p+pos[b], q+neg[b]
	}
	if p == 0 || q == 0 {
		return math.NaN(), math.NaN()
	}
	return wins / (p * q), tied / (p * q) / 2
}
