package rowcache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkWriteBack writes back 5% (and 0.1%) of the rows of a 520 MB
// file (2,000,000 rows of 260 bytes, RowWiseAdagrad's rows of 64 float32
// values), drawn uniformly and sorted, as a journal's apply does, into
// pages not in memory (dropped before each write-back): row by row at
// depth 32 (WriteRows), against in spans (WriteSorted); each ends with
// the file's fsync.
func BenchmarkWriteBack(b *testing.B) {
	const rows, rowBytes = 2_000_000, 260
	path := filepath.Join(b.TempDir(), "rows")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 1<<20)
	for at := int64(0); at < rows*rowBytes; at += int64(len(block)) {
		if _, err := f.WriteAt(block[:min(int64(len(block)), rows*rowBytes-at)], at); err != nil {
			b.Fatal(err)
		}
	}
	fs, err := NewFileStore(f, 0, rowBytes, rows, 32)
	if err != nil {
		b.Fatal(err)
	}
	cold := func() {
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			b.Fatal(err)
		}
	}
	for _, dirty := range []int{100_000, 2_000} {
		r := rand.New(rand.NewPCG(1, 2))
		seen := map[int64]bool{}
		var ids []int64
		for len(ids) < dirty {
			if id := r.Int64N(rows); !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		src := make([]byte, dirty*rowBytes)
		for _, way := range []struct {
			name  string
			write func() error
		}{
			{"rows", func() error { return fs.WriteRows(context.Background(), ids, src) }},
			{"spans", func() error { return fs.WriteSorted(ids, src) }},
			{"spans-gap4k", func() error {
				defer func(g int64) { spanGap = g }(spanGap)
				spanGap = 4 << 10
				return fs.WriteSorted(ids, src)
			}},
			{"spans-gap16k", func() error {
				defer func(g int64) { spanGap = g }(spanGap)
				spanGap = 16 << 10
				return fs.WriteSorted(ids, src)
			}},
			{"spans-4m", func() error {
				defer func(n int64) { spanBytes = n }(spanBytes)
				spanBytes = 4 << 20
				return fs.WriteSorted(ids, src)
			}},
		} {
			b.Run(fmt.Sprintf("dirty=%d/%s", dirty, way.name), func(b *testing.B) {
				b.SetBytes(int64(dirty * rowBytes))
				for b.Loop() {
					b.StopTimer()
					cold()
					b.StartTimer()
					if err := way.write(); err != nil {
						b.Fatal(err)
					}
					if err := f.Sync(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
