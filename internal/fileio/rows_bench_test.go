//go:build linux

package fileio

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkColdRead reads batches of rows of 260 bytes (RowWiseAdagrad's
// rows of 64 float32 values) from a 520 MB file whose pages are not in
// memory (dropped before each batch), at depth 32: uniform ids and Zipf
// ranks (exponent 1.05, the bench/bigtable stream), 280 rows (a Zipf
// step's cold rows) and 4,096 (a batch). Four ways: each row its own pread
// on goroutines (ReadRows where the kernel has no io_uring), spans on
// goroutines, each row its own read through a ring, and spans through a
// ring (ReadRows). cpu-ns/op
// is the process's user and system time per batch.
func BenchmarkColdRead(b *testing.B) {
	const rows, size, depth = 2_000_000, 260, 32
	path := filepath.Join(b.TempDir(), "rows")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 1<<20)
	for at := int64(0); at < rows*size; at += int64(len(block)) {
		if _, err := f.WriteAt(block[:min(int64(len(block)), rows*size-at)], at); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	cpu := func() time.Duration {
		var u syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &u)
		return time.Duration(u.Utime.Nano() + u.Stime.Nano())
	}
	for _, stream := range []string{"uniform", "zipf"} {
		for _, n := range []int{280, 4096} {
			r := rand.New(rand.NewPCG(1, 2))
			z := rand.NewZipf(r, 1.05, 1, rows-1)
			offs := make([]int64, n)
			seen := map[int64]bool{}
			for k := range offs {
				for {
					id := int64(z.Uint64())
					if stream == "uniform" {
						id = r.Int64N(rows)
					}
					if !seen[id] {
						seen[id] = true
						offs[k] = id * size
						break
					}
				}
			}
			dst := make([]byte, n*size)
			rowwise := func() []read {
				reads := make([]read, n)
				for k := range reads {
					reads[k] = read{dst[k*size : (k+1)*size], offs[k]}
				}
				return reads
			}
			ways := []struct {
				name string
				read func() error
			}{
				{"pread-rows", func() error {
					useRing = false
					defer func() { useRing = true }()
					return ReadRows(f, offs, size, dst, depth)
				}},
				{"pread-spans", func() error {
					p := planReads(offs, size, dst)
					_, err := inParallel(len(p.reads), depth, func(k int) error { _, err := f.ReadAt(p.reads[k].buf, p.reads[k].off); return err })
					return err
				}},
				{"ring-rows", func() error {
					ok := false
					readRing(f.Fd(), depth, rowwise, func(_ int, e error) { ok, err = true, e })
					if !ok {
						b.Skip("no io_uring ring here")
					}
					return err
				}},
				{"ring-spans", func() error { return ReadRows(f, offs, size, dst, depth) }},
			}
			for _, way := range ways {
				b.Run(fmt.Sprintf("%s/%d/%s", stream, n, way.name), func(b *testing.B) {
					var used time.Duration
					for b.Loop() {
						b.StopTimer()
						if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
							b.Fatal(err)
						}
						c := cpu()
						b.StartTimer()
						if err := way.read(); err != nil {
							b.Fatal(err)
						}
						used += cpu() - c
					}
					b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}
