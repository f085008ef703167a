package serve

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"github.com/gathergrad/gather/internal/ref"
	"github.com/gathergrad/gather/table"
)

// BenchmarkQuantBag is bench/quant_peer.py's cases: 8-bit and 4-bit bags
// on 1M x 64 and 100k x 16 tables, 4,096 bags of 1-20 Zipf ids (exponent
// 1.1), sum and mean, with and without weights, into a reused output.
func BenchmarkQuantBag(b *testing.B) {
	for _, c := range []struct {
		tag       string
		rows, dim int
	}{{"1Mx64", 1_000_000, 64}, {"100kx16", 100_000, 16}} {
		r := rand.New(rand.NewPCG(1, 2))
		w := make([]float32, c.rows*c.dim)
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		z := rand.NewZipf(r, 1.1, 1, uint64(c.rows-1))
		var ids, offsets []int64
		var weights []float32
		for range 4096 {
			offsets = append(offsets, int64(len(ids)))
			for range 1 + r.IntN(20) {
				ids = append(ids, int64(z.Uint64()))
				weights = append(weights, r.Float32())
			}
		}
		for _, f := range []Format{Int8, Int4} {
			tb, err := Quantize(w, c.dim, f)
			if err != nil {
				b.Fatal(err)
			}
			out := make([]float32, 4096*c.dim)
			for _, mode := range []driver.BagMode{driver.BagSum, driver.BagMean} {
				for _, weighted := range []bool{false, true} {
					o := BagOptions{Mode: mode}
					name := "plain"
					if weighted {
						o.Weights, name = weights, "weighted"
					}
					b.Run(fmt.Sprintf("%s/%s/%s/%s", f.String()[:4], c.tag, [...]string{"sum", "mean"}[mode], name), func(b *testing.B) {
						b.ReportAllocs()
						for b.Loop() {
							if err := tb.Bag(out, ids, offsets, o); err != nil {
								b.Fatal(err)
							}
						}
					})
				}
			}
		}
	}
}

// BenchmarkApply measures Table.Apply of a delta of 1,000 rows drawn
// uniformly from a table of 1,000,000 rows of 64 values (float32 and
// int8): the time a server spends to bring a table up to date, per 1,000
// rows changed, once its heap has grown to its working size
// (ref.Steady).
func BenchmarkApply(b *testing.B) {
	const rows, dim, changed = 1_000_000, 64, 1000
	r := rand.New(rand.NewPCG(1, 2))
	w := make([]float32, rows*dim)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	ids := make(map[int64]bool, changed)
	for len(ids) < changed {
		ids[r.Int64N(rows)] = true
	}
	d := &driver.Delta{Table: "t", Base: 1, Seq: 1, Dim: dim, Rows: slices.Sorted(maps.Keys(ids)), Values: w[:changed*dim]}
	for _, f := range []Format{Float32, Int8} {
		b.Run(f.String(), func(b *testing.B) {
			tb, err := Quantize(w, dim, f)
			if err != nil {
				b.Fatal(err)
			}
			tb = tb.At(1).Named("t")
			apply := func() {
				if _, err := tb.Apply(d); err != nil {
					b.Fatal(err)
				}
			}
			ref.Steady(apply) // the memory of earlier calls reused, as in a server that has run a while
			b.ReportAllocs()
			for b.Loop() {
				apply()
			}
		})
	}
}

// BenchmarkApplyIDs measures IDs.Apply of 1,000 assignments to a map of
// 1,000,000 rows, every row held: the id map's part of a delta.
func BenchmarkApplyIDs(b *testing.B) {
	const rows, changed = 1_000_000, 1000
	m, err := table.NewIDMap("m", driver.IDMapOptions{Rows: rows})
	if err != nil {
		b.Fatal(err)
	}
	raw, at := make([]int64, rows), make([]int64, rows)
	for i := range raw {
		raw[i] = int64(i) * 7919
	}
	if _, err := m.Map(context.Background(), raw, at, 0, nil); err != nil {
		b.Fatal(err)
	}
	x := NewIDs(m)
	r := rand.New(rand.NewPCG(1, 2))
	d := &driver.Delta{Table: "m", Base: 1, Seq: 1, Dim: 1}
	for range changed {
		d.AssignedRows, d.AssignedIDs = append(d.AssignedRows, r.Int64N(rows)), append(d.AssignedIDs, -1-r.Int64N(1<<40))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := x.Apply(d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyBeside measures what a delta's Apply costs the requests
// beside it: a goroutine that wakes every 100 µs, as requests arriving
// would, while a delta of 20,000 rows (of 64 float32, in 1,000,000) is
// applied; wait-p99-ms and wait-max-ms are how long past its wake-up it
// waited. Run it at -cpu 1, where the two share a processor, as on a busy
// server.
func BenchmarkApplyBeside(b *testing.B) {
	const rows, dim, changed = 1_000_000, 64, 20_000
	r := rand.New(rand.NewPCG(1, 2))
	w := make([]float32, rows*dim)
	ids := make(map[int64]bool, changed)
	for len(ids) < changed {
		ids[r.Int64N(rows)] = true
	}
	d := &driver.Delta{Table: "t", Base: 1, Seq: 1, Dim: dim, Rows: slices.Sorted(maps.Keys(ids)), Values: w[:changed*dim]}
	tb, err := Quantize(w, dim, Float32)
	if err != nil {
		b.Fatal(err)
	}
	tb = tb.At(1).Named("t")
	var waits []time.Duration
	for b.Loop() {
		done, out := make(chan struct{}), make(chan []time.Duration)
		go func() {
			var mine []time.Duration
			for {
				select {
				case <-done:
					out <- mine
					return
				default:
				}
				t := time.Now()
				time.Sleep(100 * time.Microsecond)
				mine = append(mine, time.Since(t)-100*time.Microsecond)
			}
		}()
		time.Sleep(time.Millisecond) // the waker is asleep
		if _, err := tb.Apply(d); err != nil {
			b.Fatal(err)
		}
		close(done)
		waits = append(waits, <-out...)
	}
	slices.Sort(waits)
	ms := func(q float64) float64 { return float64(waits[int(q*float64(len(waits)-1))].Microseconds()) / 1000 }
	b.ReportMetric(ms(0.99), "wait-p99-ms")
	b.ReportMetric(ms(1), "wait-max-ms")
}
