package nn

import (
	"context"
	"fmt"
	"slices"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
)

// KeyedJagged is one batch of every feature's ids, TorchRec's
// KeyedJaggedTensor: feature Keys[k]'s ids of sample b are Lengths[k·batch+b]
// of Values, the features one after another and each feature's samples
// in order, with Weights (nil, or one per value) for a Weighted
// collection.
//
//	kj := nn.KeyedJagged{Keys: []string{"user", "ad"}, Lengths: []int64{1, 2, 1, 0}, Values: []int64{7, 3, 9, 4}}
//	// batch 2: user [7] [3], ad [9 4] []
type KeyedJagged struct {
	Keys    []string
	Lengths []int64
	Values  []int64
	Weights []float64
}

// Pack writes kj into the tensors a collection's Bag reads: values and
// weights (vectors of at least len(kj.Values) elements: the rest are left
// as they are and not read) and offsets (len(features)·batch+1), in the
// collection's order of features, whatever kj's order of keys. kj must
// name every feature once and no other key, with a length for every
// feature and sample, Weights exactly for a Weighted collection (weights
// then is a vector of the tables' dtype, else nil); the tensors are those
// Bag was given: Int64 values and offsets. Anything else is an error
// wrapping gather.ErrShape or gather.ErrOption, and then no tensor is
// changed. It is O(len(kj.Values) + len(kj.Lengths)).
func (c *Collection) Pack(kj KeyedJagged, values, offsets, weights *tensor.Dense) error {
	nf := len(c.feats)
	if len(kj.Keys) != nf {
		return fmt.Errorf("collection: the batch has %d keys for %d features: %w", len(kj.Keys), nf, gather.ErrShape)
	}
	if offsets == nil || values == nil || offsets.Dtype() != tensor.Int64 || values.Dtype() != tensor.Int64 ||
		offsets.Dims() != 1 || values.Dims() != 1 || (offsets.Shape()[0]-1)%nf != 0 {
		return fmt.Errorf("collection: values and offsets must be the Int64 vectors Bag reads: %w", gather.ErrShape)
	}
	batch := (offsets.Shape()[0] - 1) / nf
	if len(kj.Lengths) != nf*batch {
		return fmt.Errorf("collection: %d lengths for %d features of %d samples: %w", len(kj.Lengths), nf, batch, gather.ErrShape)
	}
	if (kj.Weights != nil) != c.opts.Weighted || (weights != nil) != c.opts.Weighted {
		return fmt.Errorf("collection: weights are given exactly when the collection is Weighted: %w", gather.ErrOption)
	}
	if kj.Weights != nil && (len(kj.Weights) != len(kj.Values) || weights.Dtype() != c.dtype || weights.Dims() != 1 || weights.Shape()[0] < len(kj.Values)) {
		return fmt.Errorf("collection: %d weights for %d values, into a %v %v tensor: %w", len(kj.Weights), len(kj.Values), weights.Dtype(), weights.Shape(), gather.ErrShape)
	}
	// Where each key's ids start in kj.Values, and the collection's
	// features in kj's order.
	at := make(map[string]int, nf)
	start := make([]int64, nf+1)
	for k, key := range kj.Keys {
		if _, dup := at[key]; dup {
			return fmt.Errorf("collection: the batch names key %q twice: %w", key, gather.ErrOption)
		}
		at[key] = k
		start[k+1] = start[k]
		for _, n := range kj.Lengths[k*batch : (k+1)*batch] {
			if n < 0 {
				return fmt.Errorf("collection: key %q has a negative length %d: %w", key, n, gather.ErrShape)
			}
			start[k+1] += n
		}
	}
	if start[nf] != int64(len(kj.Values)) {
		return fmt.Errorf("collection: the lengths add up to %d ids, the batch has %d: %w", start[nf], len(kj.Values), gather.ErrShape)
	}
	if len(kj.Values) > values.Shape()[0] {
		return fmt.Errorf("collection: %d ids for a values vector of %d: %w", len(kj.Values), values.Shape()[0], gather.ErrShape)
	}
	order := make([]int, nf)
	for k, f := range c.feats {
		i, ok := at[f.key]
		if !ok {
			return fmt.Errorf("collection: the batch has no key %q: %w", f.key, gather.ErrOption)
		}
		order[k] = i
	}
	v, o := values.Int64s(), offsets.Int64s()
	pos := int64(0)
	o[0] = 0
	for k, i := range order {
		copy(v[pos:], kj.Values[start[i]:start[i+1]])
		if kj.Weights != nil {
			floatsFor(c.dtype).fromFloat64(sliceOf(weights, int(pos), int(start[i+1]-start[i])), kj.Weights[start[i]:start[i+1]])
		}
		for b, n := range kj.Lengths[i*batch : (i+1)*batch] {
			o[k*batch+b+1] = o[k*batch+b] + n
		}
		pos += start[i+1] - start[i]
	}
	return nil
}

// sliceOf returns n elements of the vector t from element at on, as a
// vector sharing t's memory.
func sliceOf(t *tensor.Dense, at, n int) *tensor.Dense {
	if t.Dtype() == tensor.Float32 {
		return tensor.New(tensor.WithShape(n), tensor.WithBacking(t.Float32s()[at:at+n]))
	}
	return tensor.New(tensor.WithShape(n), tensor.WithBacking(t.Float64s()[at:at+n]))
}

// Map replaces, in values, the raw ids of every feature with an id map
// (Feature.IDs) by the rows its map gives them at step, and starts the
// rows it gave new ids afresh (CollectionOptions.Init), as RawIDs.Map
// does for one table: one pass over the batch, each table's map called
// once for each of its features' ids. values and offsets are the tensors
// Bag reads, written by Pack with raw ids; the ids of features without a
// map are left as they are. values is written only when every map has
// mapped its ids; on error it is unchanged, and the maps of the features
// before the one that failed have mapped theirs (the same Map again
// gives them the same rows). Steps must not decrease.
func (c *Collection) Map(ctx context.Context, values, offsets *tensor.Dense, step int64) error {
	nf := len(c.feats)
	if values == nil || offsets == nil || values.Dtype() != tensor.Int64 || offsets.Dtype() != tensor.Int64 ||
		offsets.Dims() != 1 || (offsets.Shape()[0]-1)%nf != 0 {
		return fmt.Errorf("collection: values and offsets must be the Int64 vectors Bag reads: %w", gather.ErrShape)
	}
	batch := (offsets.Shape()[0] - 1) / nf
	v, o := values.Int64s(), offsets.Int64s()
	if o[0] != 0 || o[nf*batch] > int64(len(v)) || !slices.IsSorted(o) {
		return fmt.Errorf("collection: offsets must start at 0, not decrease and end at most at %d: %w", len(v), gather.ErrShape)
	}
	c.mapped = slices.Grow(c.mapped[:0], int(o[nf*batch]))[:o[nf*batch]]
	for k, f := range c.feats {
		lo, hi := o[k*batch], o[(k+1)*batch]
		if f.group.raw == nil {
			copy(c.mapped[lo:hi], v[lo:hi])
			continue
		}
		if err := f.group.raw.mapInto(ctx, v[lo:hi], c.mapped[lo:hi], step); err != nil {
			return fmt.Errorf("collection: feature %q: %w", f.key, err)
		}
	}
	copy(v, c.mapped)
	return nil
}
