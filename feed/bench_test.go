package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	benchOnce sync.Once
	benchPath string
	benchSize int64
)

// benchFile is a Criteo-format file of 200,000 lines (about 47 MB, as
// DuckDB's anchor in bench/README.md), written once.
func benchFile(b *testing.B) string {
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "feed-bench")
		if err != nil {
			b.Fatal(err)
		}
		benchPath = filepath.Join(dir, "criteo.txt")
		f, err := os.Create(benchPath)
		if err != nil {
			b.Fatal(err)
		}
		for k := range 20 {
			f.WriteString(strings.Join(criteoLines(uint64(100+k), 10000), "\n") + "\n")
		}
		f.Close()
		st, _ := os.Stat(benchPath)
		benchSize = st.Size()
	})
	return benchPath
}

// BenchmarkCriteo reads the whole file into batches of 2,048 at 1 and 2
// parsing workers: rows a second and MB a second; allocations a batch
// once running (b.N runs of the file, the first included).
func BenchmarkCriteo(b *testing.B) {
	path := benchFile(b)
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			b.SetBytes(benchSize)
			rows := 0
			for b.Loop() {
				r, err := Open([]string{path}, Criteo(), Options{Batch: 2048, Workers: workers})
				if err != nil {
					b.Fatal(err)
				}
				for {
					bt, err := r.Next(context.Background())
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					rows += bt.Real
				}
				r.Close()
			}
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkCriteoBatch times one batch of 2,048 from a reader that
// keeps reading the file (epoch after epoch): the steady state, whose
// allocations a batch -benchmem reports.
func BenchmarkCriteoBatch(b *testing.B) {
	path := benchFile(b)
	r, err := Open([]string{path}, Criteo(), Options{Batch: 2048, Epochs: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for range 300 { // past the first epochs' growth of the buffers
		if _, err := r.Next(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Next(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
