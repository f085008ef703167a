package checkpoint

import (
	"os"
	"path/filepath"
	"testing"

	"gorgonia.org/tensor"
)

// BenchmarkSave writes a 1,000,000 × 64 float32 table (256 MB) with Save's
// path, Write: temporary file, sync, rename, directory sync. B/op is the
// memory Write allocates beside the table. BenchmarkRead reads it back.
// The directory is $GATHER_BENCH_DIR when set (a disk to measure), else
// the test's temporary directory. bench/README.md compares both with cp.
func BenchmarkSave(b *testing.B) {
	path, table := benchTable(b)
	b.SetBytes(int64(len(table.Header.Raw)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Write(path, map[string]tensor.Tensor{"emb.weight": table}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRead(b *testing.B) {
	path, table := benchTable(b)
	if err := Write(path, map[string]tensor.Tensor{"emb.weight": table}, nil); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(table.Header.Raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Read(path); err != nil {
			b.Fatal(err)
		}
	}
}

func benchTable(b *testing.B) (string, *tensor.Dense) {
	dir := os.Getenv("GATHER_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	v := make([]float32, 1_000_000*64)
	for i := range v {
		v[i] = float32(i%1000) / 7
	}
	path := filepath.Join(dir, "bench.safetensors")
	b.Cleanup(func() { os.Remove(path) })
	return path, tensor.New(tensor.WithShape(1_000_000, 64), tensor.WithBacking(v))
}
