package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/parquet-go/parquet-go"
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
func BenchmarkCriteoBatch(b *testing.B) { benchBatch(b, benchFile(b)) }

// benchBatch times a batch of 2,048 from a reader of path that keeps
// reading it, epoch after epoch, past the first epochs' growth.
func benchBatch(b *testing.B, path string) {
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

var (
	pqOnce sync.Once
	pqPath string
)

// benchParquet is the lines of benchFile as a Parquet file parquet-go
// writes (snappy, row groups of 25,000): the label INT32, the integers
// and the 26 categoricals optional INT64 (the hexadecimal ids as the 64
// bits they spell), written once.
func benchParquet(b *testing.B) string {
	pqOnce.Do(func() {
		g := parquet.Group{"label": parquet.Leaf(parquet.Int32Type)}
		for i := 1; i <= 13; i++ {
			g[fmt.Sprintf("I%d", i)] = parquet.Optional(parquet.Leaf(parquet.Int64Type))
		}
		for i := 1; i <= 26; i++ {
			g[fmt.Sprintf("C%d", i)] = parquet.Optional(parquet.Leaf(parquet.Int64Type))
		}
		schema := parquet.NewSchema("criteo", g)
		names := []string{"label"}
		for i := 1; i <= 13; i++ {
			names = append(names, fmt.Sprintf("I%d", i))
		}
		for i := 1; i <= 26; i++ {
			names = append(names, fmt.Sprintf("C%d", i))
		}
		col := make([]int, len(names)) // each field's leaf column
		for k, n := range names {
			leaf, _ := schema.Lookup(n)
			col[k] = leaf.ColumnIndex
		}
		pqPath = filepath.Join(b.TempDir(), "criteo.parquet")
		f, err := os.Create(pqPath)
		if err != nil {
			b.Fatal(err)
		}
		w := parquet.NewWriter(f, schema, parquet.Compression(&parquet.Snappy), parquet.MaxRowsPerRowGroup(25000))
		row := make(parquet.Row, len(names))
		for k := range 20 {
			for _, line := range criteoLines(uint64(100+k), 10000) {
				for i, s := range strings.Split(line, "\t") {
					var v parquet.Value
					switch {
					case i == 0:
						x, _ := strconv.Atoi(s)
						v = parquet.Int32Value(int32(x)).Level(0, 0, col[i])
					case s == "":
						v = parquet.NullValue().Level(0, 0, col[i])
					case i <= 13:
						x, _ := strconv.ParseInt(s, 10, 64)
						v = parquet.Int64Value(x).Level(0, 1, col[i])
					default:
						x, _ := strconv.ParseUint(s, 16, 64)
						v = parquet.Int64Value(int64(x)).Level(0, 1, col[i])
					}
					row[col[i]] = v
				}
				if _, err := w.WriteRows([]parquet.Row{row}); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	})
	return pqPath
}

// BenchmarkParquetBatch is BenchmarkCriteoBatch from benchParquet's
// file: a batch's time and allocations once running.
func BenchmarkParquetBatch(b *testing.B) { benchBatch(b, benchParquet(b)) }
