package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gathergrad/gather/feed"
)

// BenchmarkStep times a training step of the command's model (batch
// 2,048, tables of 100,000 rows) fed two ways: "memory", from the
// batches of one epoch read beforehand and given in turn (the step
// alone, on the same ids as the file's), and
// "file", from a feed.Reader of a 300,000-line file on disk, shuffled, as
// the command reads it (the step with the reading beside it). Their
// ratio is what reading costs a step, over whole epochs (-benchtime
// 147x is one); run them alternately and compare medians.
func BenchmarkStep(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "train.txt")
	if _, err := synthesize(path, 300_000, 1, func([]byte) bool { return false }); err != nil {
		b.Fatal(err)
	}
	const batch, rows = 2048, 100_000
	schema := feed.Criteo()
	for k := range schema.Columns {
		if schema.Columns[k].Role == feed.Sparse {
			schema.Columns[k].Modulo = rows
		}
	}
	open := func() *feed.Reader {
		r, err := feed.Open([]string{path}, schema, feed.Options{Batch: batch, Epochs: 1 << 20, Shuffle: true, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	ctx := context.Background()
	for _, from := range []string{"memory", "file"} {
		b.Run(from, func(b *testing.B) {
			m, err := newModel(batch, rows, 0.1, 1, false)
			if err != nil {
				b.Fatal(err)
			}
			defer m.close()
			r := open()
			defer r.Close()
			var held []feed.Batch
			if from == "memory" {
				for {
					bt, err := r.Next(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if bt.Epoch > 0 {
						break
					}
					held = append(held, copyBatch(bt))
				}
				r.Close()
			}
			next := func(i int) *feed.Batch {
				if held != nil {
					return &held[i%len(held)]
				}
				bt, err := r.Next(ctx)
				if err != nil {
					b.Fatal(err)
				}
				return bt
			}
			// The machine's buffers; and the reader past its first
			// epoch, whose start parses two windows ahead: from there on
			// it parses as the steps take batches.
			for i := range 160 {
				if _, err := m.step(ctx, next(i)); err != nil {
					b.Fatal(err)
				}
			}
			i := 0
			for b.Loop() {
				if _, err := m.step(ctx, next(i)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
	_ = os.Remove(path)
}

// copyBatch returns a copy of b that the reader's next batch does not
// overwrite.
func copyBatch(b *feed.Batch) feed.Batch {
	c := *b
	c.Labels = append([]float32(nil), b.Labels...)
	c.Weights = append([]float32(nil), b.Weights...)
	c.Dense = append([]float32(nil), b.Dense...)
	c.Sparse.Keys = append([]string(nil), b.Sparse.Keys...)
	c.Sparse.Lengths = append([]int64(nil), b.Sparse.Lengths...)
	c.Sparse.Values = append([]int64(nil), b.Sparse.Values...)
	return c
}
