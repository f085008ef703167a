package feed

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/gathergrad/gather/internal/localredis"
)

// clickSchema is examples/stream's click model as events: a label, a raw
// user id and a raw item id.
var clickSchema = Schema{Columns: []Column{
	{Name: "label", Role: Label},
	{Name: "user", Role: Sparse, IDs: Int},
	{Name: "item", Role: Sparse, IDs: Int},
}}

// BenchmarkStream reads a local Redis Stream of click events (a label, a
// user and an item id) through a consumer group in batches of 1,024,
// each batch acknowledged: events/s is the rate one trainer takes them
// at, the server on the same machine. The entries are written before the
// timer runs, 200,000 at a time.
func BenchmarkStream(b *testing.B) {
	srv := localredis.StartServer(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addrs[0], Password: srv.Password})
	defer c.Close()
	ctx := context.Background()
	const batch, fill = 1024, 200_000
	added := 0
	add := func() {
		p := c.Pipeline()
		for k := range fill {
			n := added + k
			p.XAdd(ctx, &redis.XAddArgs{Stream: "{bench}", Values: []any{"label", n % 2, "user", n * 7919 % 500_000, "item", n * 104_729 % 1_000_000}})
			if k%2000 == 1999 {
				if _, err := p.Exec(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		added += fill
	}
	add()
	s, err := OpenStream(ctx, c, clickSchema, StreamOptions{Stream: "{bench}", Group: "g", Consumer: "w", Batch: batch})
	if err != nil {
		b.Fatal(err)
	}
	read := 0
	for b.Loop() {
		if added-read < batch {
			b.StopTimer()
			add()
			b.StartTimer()
		}
		bt, err := s.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Ack(ctx); err != nil {
			b.Fatal(err)
		}
		read += bt.Real
	}
	b.ReportMetric(float64(read)/b.Elapsed().Seconds(), "events/s")
}
