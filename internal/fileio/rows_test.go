package fileio

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// Rows read and written at any depth are the rows at their offsets.
func TestRows(t *testing.T) {
	const size, n = 24, 500
	path := filepath.Join(t.TempDir(), "rows")
	data := make([]byte, size*n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	offs := make([]int64, 300)
	for k := range offs {
		offs[k] = int64(r.IntN(n)) * size
	}
	for _, depth := range []int{0, 1, 3, 32, 1000} {
		got := make([]byte, len(offs)*size)
		if err := ReadRows(f, offs, size, got, depth); err != nil {
			t.Fatalf("depth %d: %v", depth, err)
		}
		for k, off := range offs {
			if !bytes.Equal(got[k*size:(k+1)*size], data[off:off+size]) {
				t.Fatalf("depth %d: row %d differs", depth, k)
			}
		}
	}
	// Write distinct rows back at depth 8, then read the whole file.
	distinct := []int64{0, 7 * size, 499 * size, 250 * size}
	src := bytes.Repeat([]byte{0xAB}, len(distinct)*size)
	if err := WriteRows(f, distinct, size, src, 8); err != nil {
		t.Fatal(err)
	}
	for _, off := range distinct {
		copy(data[off:off+size], src[:size])
	}
	all, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(all, data) {
		t.Fatal("the file does not hold the rows written")
	}
	// A row past the end is an error naming its offset, at any depth.
	for _, depth := range []int{1, 8} {
		err := ReadRows(f, []int64{0, int64(n) * size}, size, make([]byte, 2*size), depth)
		if !errors.Is(err, io.EOF) || !bytes.Contains([]byte(err.Error()), []byte("offset 12000")) {
			t.Fatalf("depth %d: want EOF naming offset 12000, got %v", depth, err)
		}
	}
	if err := ReadRows(f, offs, size, make([]byte, size), 4); err == nil {
		t.Fatal("a buffer too small: want an error")
	}
}
