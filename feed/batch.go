package feed

import "github.com/gathergrad/gather/nn"

// A batcher assembles Batches of size examples from the examples of
// parsed blocks, in its own buffers, reused batch after batch.
type batcher struct {
	lay   *layout
	size  int
	n     int // the examples added since begin
	batch Batch
	vals  [][]int64
	wts   [][]float64
	lens  [][]int64
}

func newBatcher(lay *layout, size int) *batcher {
	nd, ns := len(lay.dense), len(lay.sparse)
	return &batcher{lay: lay, size: size,
		batch: Batch{Labels: make([]float32, size), Weights: make([]float32, size), Dense: make([]float32, size*nd), DenseDim: nd,
			Sparse: nn.KeyedJagged{Keys: append([]string(nil), lay.sparse...), Lengths: make([]int64, ns*size)}},
		vals: make([][]int64, ns), wts: make([][]float64, ns), lens: make([][]int64, ns)}
}

// begin starts a batch.
func (a *batcher) begin() {
	a.n = 0
	for s := range a.vals {
		a.vals[s], a.lens[s] = a.vals[s][:0], a.lens[s][:0]
		if a.lay.weights {
			a.wts[s] = a.wts[s][:0]
		}
	}
}

// full reports whether the batch holds size examples.
func (a *batcher) full() bool { return a.n >= a.size }

// add appends example i of blk to the batch, which is not full.
func (a *batcher) add(blk *block, i int) {
	b, n, nd := &a.batch, a.n, a.batch.DenseDim
	b.Labels[n], b.Weights[n] = blk.labels[i], 1
	copy(b.Dense[n*nd:(n+1)*nd], blk.dense[i*nd:(i+1)*nd])
	for s := range a.vals {
		lo, hi := blk.starts[s][i], blk.starts[s][i+1]
		a.vals[s] = append(a.vals[s], blk.ids[s][lo:hi]...)
		a.lens[s] = append(a.lens[s], int64(hi-lo))
		if a.lay.weights {
			for _, w := range blk.wts[s][lo:hi] {
				a.wts[s] = append(a.wts[s], float64(w))
			}
		}
	}
	a.n++
}

// end returns the batch of the examples added since begin, of epoch,
// padded to size with examples of weight 0.
func (a *batcher) end(epoch int) *Batch {
	b, n, nd, ns := &a.batch, a.n, a.batch.DenseDim, len(a.vals)
	b.Epoch, b.Real = epoch, n
	for k := n; k < a.size; k++ { // padding
		b.Labels[k], b.Weights[k] = 0, 0
		clear(b.Dense[k*nd : (k+1)*nd])
		for s := range ns {
			a.lens[s] = append(a.lens[s], 0)
		}
	}
	kj := &b.Sparse
	kj.Values = kj.Values[:0]
	if a.lay.weights {
		kj.Weights = kj.Weights[:0]
	}
	for s := range ns {
		copy(kj.Lengths[s*a.size:(s+1)*a.size], a.lens[s])
		kj.Values = append(kj.Values, a.vals[s]...)
		if a.lay.weights {
			kj.Weights = append(kj.Weights, a.wts[s]...)
		}
	}
	if !a.lay.weights {
		kj.Weights = nil
	} else if kj.Weights == nil {
		kj.Weights = []float64{}
	}
	return b
}
