package nn

import (
	"context"
	"testing"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/cluster"
	"github.com/gathergrad/gather/internal/localredis"
	"github.com/gathergrad/gather/optim"
	_ "github.com/gathergrad/gather/optim/clusterlua"
	"github.com/gathergrad/gather/table"
)

// A training step of a Shared table on a local Redis Cluster of 3
// masters, batches of 256 ids from 20,000 drawn skewed, SparseAdam:
// numbered ids, and the same ids raw through a map on the cluster
// (NewRawIDs of a cluster.IDMap). The step-ratio of raw ids on Redis is raw/numbered.
func BenchmarkSharedRawStep(b *testing.B) {
	cl := localredis.Start(b, 3, 0)
	o := cluster.Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 5 * time.Second}
	ctx := context.Background()
	const dim, batch, distinct, rows = 16, 256, 20_000, 64 * 1024
	stream := rawStream(3, distinct, 64, batch)
	number := map[int64]int{}
	for _, ids := range stream {
		for _, id := range ids {
			if _, ok := number[id]; !ok {
				number[id] = len(number)
			}
		}
	}
	cols := optim.NewSparseAdam(0.01).Columns(dim)
	for _, mode := range []string{"numbered", "raw"} {
		b.Run(mode, func(b *testing.B) {
			if err := cluster.Create(ctx, o, mode, rows+1, dim, tensor.Float32, table.WithState(cols...), table.WithReplace()); err != nil {
				b.Fatal(err)
			}
			s, err := cluster.Open(ctx, o, mode)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var m *cluster.IDMap
			if mode == "raw" {
				if m, err = cluster.NewIDMap(ctx, s, driver.IDMapOptions{Rows: rows}, driver.RowInit{Seed: 1, Std: 0.1}); err != nil {
					b.Fatal(err)
				}
			}
			c, err := table.NewCached(ctx, s, table.CacheOptions{Budget: 16 << 20, Shared: &table.SharedOptions{}})
			if err != nil {
				b.Fatal(err)
			}
			g := gorgonia.NewGraph()
			emb, err := CachedEmbedding(ctx, g, c, WithPadding(rows))
			if err != nil {
				b.Fatal(err)
			}
			defer emb.Close(ctx)
			model := newRawModel(b, g, emb, batch)
			var raw *RawIDs
			if m != nil {
				if raw, err = NewRawIDs(emb, m, m.RowInit()); err != nil {
					b.Fatal(err)
				}
			}
			opt := optim.NewSparseAdam(0.01)
			step := func(n int) {
				ids := stream[n%len(stream)]
				if raw != nil {
					if err := raw.Map(ctx, ids, model.ids, int64(n)); err != nil {
						b.Fatal(err)
					}
				} else {
					for k, id := range ids {
						model.ids.Ints()[k] = number[id]
					}
				}
				if err := model.vm.RunAll(); err != nil {
					b.Fatal(err)
				}
				if err := emb.Step(context.Background(), opt); err != nil {
					b.Fatal(err)
				}
				model.vm.Reset()
			}
			for n := range len(stream) { // every id seen: rows made, Functions loaded
				step(n)
			}
			n := len(stream)
			b.ResetTimer()
			for b.Loop() {
				step(n)
				n++
			}
		})
	}
}
