package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/gathergrad/gather/feed"
	"github.com/gathergrad/gather/internal/localredis"
)

// BenchmarkStreamFed is one step of the dynamic model on a batch of
// 1,024 click events: memory, the batches made in memory; stream, the
// same events read from a local Redis Stream through feed.OpenStream
// (written before the timer runs), each batch acknowledged after its
// step. Their ratio is what feeding from a stream costs a step.
func BenchmarkStreamFed(b *testing.B) {
	const batch = 1024
	c := config{batch: batch, live: 40_000, churn: 200, rows: 50_000, admit: 1, dim: 8}
	newM := func(b *testing.B) *model {
		m, err := newModel(dynamic, batch, c.dim, [2]int{c.rows / 2, c.rows}, c.admit, 10_000)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(m.close)
		return m
	}
	const batches = 200
	s := newClickStream(1, c.live, c.churn)
	users, items, clicks := make([][]int64, batches), make([][]int64, batches), make([][]float32, batches)
	for k := range batches {
		users[k], items[k], clicks[k] = make([]int64, batch), make([]int64, batch), make([]float32, batch)
		s.next(users[k], items[k], clicks[k])
	}
	b.Run("memory", func(b *testing.B) {
		m := newM(b)
		k := 0
		for b.Loop() {
			if err := m.step(int64(k), [2][]int64{users[k%batches], items[k%batches]}, clicks[k%batches]); err != nil {
				b.Fatal(err)
			}
			k++
		}
	})
	for _, per := range []int{1, 64} {
		name := "stream"
		if per > 1 {
			name = fmt.Sprintf("stream-lines-%d", per)
		}
		b.Run(name, func(b *testing.B) { benchStreamFed(b, per, newM, users, items, clicks) })
	}
}

// benchStreamFed is BenchmarkStreamFed's stream case, with entries of per
// examples each as lines (StreamOptions.Lines) when per is above 1.
func benchStreamFed(b *testing.B, per int, newM func(*testing.B) *model, users, items [][]int64, clicks [][]float32) {
	batches, batch := len(users), len(users[0])
	{
		srv := localredis.StartServer(b)
		rc := redis.NewClient(&redis.Options{Addr: srv.Addrs[0], Password: srv.Password})
		defer rc.Close()
		ctx := context.Background()
		added := 0
		add := func() {
			p := rc.Pipeline()
			var lines []byte
			for k := range batches {
				for i := range batch {
					if per == 1 {
						p.XAdd(ctx, &redis.XAddArgs{Stream: outStream, Values: []any{"label", clicks[k][i], "user", users[k][i], "item", items[k][i]}})
						continue
					}
					lines = fmt.Appendf(lines, "%g\t%d\t%d\t0\n", clicks[k][i], users[k][i], items[k][i])
					if (i+1)%per == 0 || i == batch-1 {
						p.XAdd(ctx, &redis.XAddArgs{Stream: outStream, Values: []any{"ex", string(lines)}})
						lines = lines[:0]
					}
				}
				if _, err := p.Exec(ctx); err != nil {
					b.Fatal(err)
				}
			}
			added += batches
		}
		add()
		o := feed.StreamOptions{Stream: outStream, Group: "g", Consumer: "w", Batch: batch}
		if per > 1 {
			o.Lines = "ex"
		}
		st, err := feed.OpenStream(ctx, rc, onlineSchema, o)
		if err != nil {
			b.Fatal(err)
		}
		m := newM(b)
		ids := [2][]int64{make([]int64, batch), make([]int64, batch)}
		cl := make([]float32, batch)
		read := 0
		for b.Loop() {
			if added-read < 2 {
				b.StopTimer()
				add()
				b.StartTimer()
			}
			bt, err := st.Next(ctx)
			if err != nil {
				b.Fatal(err)
			}
			for k := range batch {
				ids[0][k], ids[1][k], cl[k] = bt.Sparse.Values[k], bt.Sparse.Values[batch+k], bt.Labels[k]
			}
			if err := m.step(int64(read), ids, cl); err != nil {
				b.Fatal(err)
			}
			if err := st.Ack(ctx); err != nil {
				b.Fatal(err)
			}
			read++
		}
	}
}
