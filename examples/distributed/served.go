package main

import (
	"fmt"
	"strconv"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/serve"
)

// denseNames are the names of the dense learnables in a saved model, in
// the order of denseParams.
var denseNames = []string{"dense.weight", "dense.bias", "top1.weight", "top1.bias", "top2.weight", "top2.bias"}

// served prints the held-out loss of w with its tables in each of
// serve's formats, and the bytes per row of each, and with c.save writes
// w to that file.
func served(c config, w *weights, held *batch) error {
	base := w.heldOutLoss(held)
	fmt.Println("served with its tables in each format:")
	for _, f := range []serve.Format{serve.Float32, serve.Float16, serve.Int8, serve.Int4} {
		q := &weights{dense: w.dense}
		for t, rows := range w.tables {
			tb, err := serve.Quantize(rows, embDim, f)
			if err != nil {
				return err
			}
			q.tables[t] = make([]float32, len(rows))
			ids := make([]int64, tb.Rows())
			for i := range ids {
				ids[i] = int64(i)
			}
			if err := tb.Lookup(q.tables[t], ids); err != nil {
				return err
			}
		}
		l := q.heldOutLoss(held)
		fmt.Printf("  %-13s %3d bytes a row  held-out loss %.5f (%+.3f%%)\n", f, f.RowBytes(embDim), l, 100*(l-base)/base)
	}
	if c.save == "" {
		return nil
	}
	if c.deltas != "" {
		// The base saved last with the deltas after it is the model
		// trained: a server started now loads the base and applies them.
		fmt.Printf("the model is the base saved to %s with its deltas in %s\n", c.save, c.deltas)
		return nil
	}
	if err := save(c, w, 0); err != nil {
		return err
	}
	fmt.Printf("saved the model to %s\n", c.save)
	return nil
}

// save writes w to c.save, atomically (checkpoint.Write): a server
// watching the file sees the old model or the new, never part of one.
func save(c config, w *weights, base uint64) error {
	ts := map[string]tensor.Tensor{}
	for f, rows := range w.tables {
		ts[fmt.Sprintf("feature%d.weight", f)] = tensor.New(tensor.WithShape(vocab[f], embDim), tensor.WithBacking(rows))
	}
	shapes := [][]int{{hidden1, denseFeatures}, {hidden1}, {hidden2, 3*embDim + hidden1}, {hidden2}, {1, hidden2}, {1}}
	for k, name := range denseNames {
		ts[name] = tensor.New(tensor.WithShape(shapes[k]...), tensor.WithBacking(w.dense[k]))
	}
	meta := map[string]string{"model": "click", "seed": strconv.FormatUint(c.seed, 10)}
	if base != 0 {
		meta["base"] = strconv.FormatUint(base, 10) // the version -deltas publish after
	}
	return checkpoint.Write(c.save, ts, meta)
}
