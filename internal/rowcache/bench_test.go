package rowcache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// nullStore is a Store of rows that reads zeros and writes nothing: the
// hit rates alone are measured.
type nullStore struct{ rows int64 }

func (s nullStore) RowBytes() int                                                { return 8 }
func (s nullStore) Rows() int64                                                  { return s.rows }
func (s nullStore) ReadRows(ctx context.Context, ids []int64, dst []byte) error  { return nil }
func (s nullStore) WriteRows(ctx context.Context, ids []int64, src []byte) error { return nil }

// BenchmarkHitRate reports the cache's hit rate over batches of 4,096 ids
// drawn from Zipf (s = 1.05, as bench/bigtable draws them) and uniformly
// over 10M rows, with 1M slots, against the oracle's: a cache holding the
// 1M most frequent rows (for this Zipf, ids 0 to 1M-1).
func BenchmarkHitRate(b *testing.B) {
	const rows, slots, batch = 10_000_000, 1_000_000, 4096
	for _, run := range []struct {
		stream string
		policy Policy
	}{{"zipf", LRU}, {"zipf", LFU}, {"uniform", LRU}, {"uniform", LFU}} {
		stream := run.stream
		b.Run(fmt.Sprintf("%s/%s", stream, []string{"lru", "lfu"}[run.policy]), func(b *testing.B) {
			r := rand.New(rand.NewPCG(7, 8))
			zipf := rand.NewZipf(r, 1.05, 1, rows-1)
			draw := func() int64 {
				if stream == "zipf" {
					return int64(zipf.Uint64())
				}
				return r.Int64N(rows)
			}
			c, err := New(nullStore{rows}, slots, run.policy)
			if err != nil {
				b.Fatal(err)
			}
			ids, got := make([]int64, batch), make([]int32, batch)
			var oracle, total int
			warm := 3000 // batches before counting: the cache full and evicting
			for i := 0; i < warm || b.Loop(); i++ {
				for k := range ids {
					ids[k] = draw()
					if i >= warm && ids[k] < slots {
						oracle++
					}
				}
				if i == warm {
					c.hits, c.misses = 0, 0
				}
				if err := c.Fetch(context.Background(), ids, got); err != nil {
					b.Fatal(err)
				}
				if i >= warm {
					total += batch
				}
			}
			hits, misses, _ := c.Stats()
			b.ReportMetric(float64(hits)/float64(hits+misses), "hit")
			b.ReportMetric(float64(oracle)/float64(total), "oracle")
		})
	}
}
