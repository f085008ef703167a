package fileio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bothPaths runs test with reads through a ring (where the kernel has
// one) and with reads on goroutines.
func bothPaths(t *testing.T, test func(t *testing.T)) {
	for _, ring := range []bool{true, false} {
		t.Run(fmt.Sprintf("ring=%v", ring), func(t *testing.T) {
			defer func(old bool) { useRing = old }(useRing)
			useRing = ring
			test(t)
		})
	}
}

// Rows read and written at any depth are the rows at their offsets.
func TestRows(t *testing.T) { bothPaths(t, testRows) }

func testRows(t *testing.T) {
	const size, n = 520, 1000
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
		offs[k] = int64(r.IntN(400)) * size // in spans with gaps
	}
	// Past row 600, far apart: adjacent rows in order (one read into
	// dst) and reversed, a row twice, one alone, rows a few bytes apart.
	offs = append(offs, 700*size, 701*size, 702*size, 800*size, 799*size, 798*size, 900*size, 900*size, 650*size, 600*size+3, 600*size+50)
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
	distinct := []int64{0, 7 * size, 999 * size, 250 * size}
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
		if !errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "the row at offset 520000") {
			t.Fatalf("depth %d: want EOF naming offset 520000, got %v", depth, err)
		}
	}
	// A read of two rows, the second past the end, reads the first and
	// then finds the end: an error naming both.
	want := "2 rows at offsets 519480 to 520000" // one read through a ring
	if !useRing || !haveRing() {
		want = "the row at offset 520000"
	}
	err = ReadRows(f, []int64{(n - 1) * size, n * size}, size, make([]byte, 2*size), 4)
	if !errors.Is(err, io.EOF) || !strings.Contains(err.Error(), want) {
		t.Fatalf("want EOF naming %s, got %v", want, err)
	}
	if err := ReadRows(f, offs, size, make([]byte, size), 4); err == nil {
		t.Fatal("a buffer too small: want an error")
	}
}

// FuzzReadRows reads any rows of a file, at any depth, both ways: each
// is the row at its offset, and a row past the end is io.EOF.
func FuzzReadRows(f *testing.F) {
	const size, n = 16, 1000
	path := filepath.Join(f.TempDir(), "rows")
	data := make([]byte, size*n)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		f.Fatal(err)
	}
	file, err := os.Open(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { file.Close() })
	f.Add([]byte{1, 2, 3, 3, 200, 4}, uint8(4), false)
	f.Add([]byte{0, 1, 2, 255, 254}, uint8(1), true)
	f.Fuzz(func(t *testing.T, raw []byte, depth uint8, ring bool) {
		defer func(old bool) { useRing = old }(useRing)
		useRing = ring
		offs := make([]int64, len(raw)/2)
		past := false
		for k := range offs {
			offs[k] = int64(raw[2*k])<<8 | int64(raw[2*k+1]) // any byte offset below 65,536
			past = past || offs[k]+size > size*n
		}
		got := make([]byte, len(offs)*size)
		err := ReadRows(file, offs, size, got, int(depth))
		if past {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("rows past the end: want io.EOF, got %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		for k, off := range offs {
			if !bytes.Equal(got[k*size:(k+1)*size], data[off:off+size]) {
				t.Fatalf("row %d (offset %d) differs", k, off)
			}
		}
	})
}
