package table

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/tablerows"
)

// FuzzParseLayout reads any layout description: an error wrapping
// checkpoint.ErrFormat, or rows whose description reads back the same.
func FuzzParseLayout(f *testing.F) {
	for _, s := range []string{"weight:64,sum:1", "weight:4,exp_avg:4,exp_avg_sq:4", "weight:3", "", "weight:0", "sum:1,weight:2", "weight:2,weight:2", "weight:2,a:-1", "weight:9999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dim, cols, err := driver.ParseLayout(s)
		if err != nil {
			if !errors.Is(err, checkpoint.ErrFormat) {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		desc, _, err := tablerows.Describe("", dim, cols)
		if err != nil || desc != s && !sameLayout(desc, s) {
			t.Fatalf("%q reads as %d %v, which describes as %q (%v)", s, dim, cols, desc, err)
		}
	})
}

// sameLayout reports whether a and b describe the same rows (numbers
// may be written with leading zeros or a sign).
func sameLayout(a, b string) bool {
	da, ca, err1 := driver.ParseLayout(a)
	db, cb, err2 := driver.ParseLayout(b)
	if err1 != nil || err2 != nil || da != db || len(ca) != len(cb) {
		return false
	}
	for k := range ca {
		if ca[k] != cb[k] {
			return false
		}
	}
	return true
}

// FuzzOpenCached opens any file as a cached table: an error, or a table
// every row of which reads.
func FuzzOpenCached(f *testing.F) {
	dir := f.TempDir()
	for k, opts := range [][]driver.Option{nil, {WithState(driver.Column{Name: "sum", Width: 1})}, {WithHalf(driver.BFloat16), WithState(driver.Column{Name: "m", Width: 2})}} {
		p := filepath.Join(dir, string(rune('a'+k)))
		if err := Create(p, "t", 5, 3, tensor.Float32, opts...); err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-1])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "t.safetensors")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := OpenCached(context.Background(), p, CacheOptions{Budget: 1 << 16}, FileOptions{})
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		sc := c.Schema()
		if sc.Rows > 1<<12 {
			return
		}
		ids := make([]int64, sc.Rows)
		for i := range ids {
			ids[i] = int64(i)
		}
		if _, err := c.Read(context.Background(), ids); err != nil {
			t.Fatalf("%+v: %v", sc, err)
		}
	})
}
