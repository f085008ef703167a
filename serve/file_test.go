package serve

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

func sines(n int) []float32 {
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(math.Sin(float64(i) * 0.37))
	}
	return w
}

// A table saved and opened mapped answers as the table in memory, in
// every format; a checkpoint's float32 tensor quantized file to file gives
// the bytes Quantize gives.
func TestSaveOpen(t *testing.T) {
	const rows, dim = 50, 12
	dir := t.TempDir()
	w := sines(rows * dim)
	src := filepath.Join(dir, "model.safetensors")
	wt := tensor.New(tensor.WithShape(rows, dim), tensor.WithBacking(slices.Clone(w)))
	if err := checkpoint.Write(src, map[string]tensor.Tensor{"emb": wt}, nil); err != nil {
		t.Fatal(err)
	}
	ids := []int64{0, 49, 7, 7}
	for _, f := range []Format{Float32, Float16, BFloat16, Int8, Int4} {
		mem, err := Quantize(w, dim, f)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, len(ids)*dim)
		if err := mem.Lookup(want, ids); err != nil {
			t.Fatal(err)
		}
		saved, converted := filepath.Join(dir, f.String()+".saved"), filepath.Join(dir, f.String()+".converted")
		if err := mem.Save(saved, "emb"); err != nil {
			t.Fatal(err)
		}
		if err := QuantizeFile(converted, src, "emb", f); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{saved, converted} {
			tb, err := Open(path, "emb")
			if err != nil {
				t.Fatal(err)
			}
			if tb.Format() != f || tb.Rows() != rows || tb.Dim() != dim || string(tb.Bytes()) != string(mem.Bytes()) {
				t.Fatalf("%s: %v %d x %d, bytes equal %v", path, tb.Format(), tb.Rows(), tb.Dim(), string(tb.Bytes()) == string(mem.Bytes()))
			}
			got := make([]float32, len(ids)*dim)
			if err := tb.Lookup(got, ids); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s: lookups differ", path)
			}
			if err := tb.Close(); err != nil {
				t.Fatal(err)
			}
			if err := tb.Lookup(got, ids); !errors.Is(err, ErrClosed) {
				t.Fatalf("a lookup after Close: want an error, got %v", err)
			}
		}
	}
}

// A table file whose rows carry optimiser state opens as the table of its
// values, and quantizes as they do.
func TestOpenStateFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "words.safetensors")
	opt := optim.NewRowWiseAdagrad(0.1)
	if err := table.Create(path, "words", 300, 8, tensor.Float32, table.WithSeed(3), table.WithState(opt.Columns(8)...)); err != nil {
		t.Fatal(err)
	}
	ts, _, err := checkpoint.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	rows := ts["words.rows"]
	if rows == nil || rows.Shape()[1] != 9 {
		t.Fatalf("the table file's tensors: %v", ts)
	}
	var w []float32
	for r := range 300 {
		w = append(w, rows.Data().([]float32)[r*9:r*9+8]...)
	}
	tb, err := Open(path, "words.rows")
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	got := make([]float32, 16)
	if err := tb.Lookup(got, []int64{299, 5}); err != nil {
		t.Fatal(err)
	}
	if want := append(slices.Clone(w[299*8:]), w[5*8:6*8]...); tb.Dim() != 8 || !slices.Equal(got, want) {
		t.Fatalf("dim %d, rows 299 and 5: %v, want %v", tb.Dim(), got, want)
	}
	q8 := filepath.Join(dir, "int8")
	if err := QuantizeFile(q8, path, "words.rows", Int8); err != nil {
		t.Fatal(err)
	}
	want, err := Quantize(w, 8, Int8)
	if err != nil {
		t.Fatal(err)
	}
	q, err := Open(q8, "words.rows")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if string(q.Bytes()) != string(want.Bytes()) {
		t.Fatal("QuantizeFile of a table file with state: not the bytes of its values quantized")
	}
}

// A table file of package table opens mapped as a float32 table.
func TestOpenTableFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "words.safetensors")
	if err := table.Create(path, "words", 1000, 8, tensor.Float32, table.WithSeed(3)); err != nil {
		t.Fatal(err)
	}
	ts, _, err := checkpoint.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	w := ts["words.weight"].Data().([]float32)
	tb, err := Open(path, "words.weight")
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	got := make([]float32, 8)
	if err := tb.Lookup(got, []int64{999}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, w[999*8:]) {
		t.Fatalf("row 999: %v, want %v", got, w[999*8:])
	}
}

// Files of another layout, truncated or not finite are errors naming the
// file, and QuantizeFile then leaves dst untouched.
func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	tb, err := Quantize(sines(40), 8, Int8)
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good")
	if err := tb.Save(good, "emb"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tensorFile := func(name string, ts map[string]tensor.Tensor, meta map[string]string) string {
		p := filepath.Join(dir, name)
		if err := checkpoint.Write(p, ts, meta); err != nil {
			t.Fatal(err)
		}
		return p
	}
	u8 := tensor.New(tensor.WithShape(5, 16), tensor.WithBacking(make([]uint8, 80)))
	nan := sines(16)
	nan[13] = float32(math.Inf(-1))
	for _, c := range []struct {
		path, name string
		err        error
		want       string
	}{
		{write("truncated", data[:len(data)-3]), "emb", checkpoint.ErrFormat, "truncated"},
		{good, "other", checkpoint.ErrMismatch, `good holds no tensor "other"; it holds "emb"`},
		{tensorFile("bytes", map[string]tensor.Tensor{"emb": u8}, nil), "emb", checkpoint.ErrMismatch, `format "" in its metadata`},
		{tensorFile("dim", map[string]tensor.Tensor{"emb": u8}, map[string]string{formatKey: "int8-rowwise", dimKey: "9"}), "emb", checkpoint.ErrFormat, "rows of 16 bytes"},
		{tensorFile("f64", map[string]tensor.Tensor{"emb": tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1, 2, 3, 4}))}, nil), "emb", checkpoint.ErrMismatch, "is F64"},
		{tensorFile("rank", map[string]tensor.Tensor{"emb": tensor.New(tensor.WithShape(4), tensor.WithBacking([]float32{1, 2, 3, 4}))}, nil), "emb", checkpoint.ErrMismatch, "not [rows, dim]"},
	} {
		_, err := Open(c.path, c.name)
		if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.path) && !strings.Contains(err.Error(), filepath.Base(c.path)) || !strings.Contains(err.Error(), c.want) && c.want != "truncated" {
			t.Errorf("%s: want %v naming the file and %q, got %v", c.path, c.err, c.want, err)
		}
	}
	src := tensorFile("inf", map[string]tensor.Tensor{"emb": tensor.New(tensor.WithShape(4, 4), tensor.WithBacking(nan))}, nil)
	dst := filepath.Join(dir, "inf.int4")
	err = QuantizeFile(dst, src, "emb", Int4)
	if !errors.Is(err, optim.ErrNotFinite) || !strings.Contains(err.Error(), "row 3 holds -Inf at column 1") || !strings.Contains(err.Error(), src) {
		t.Fatalf("want ErrNotFinite naming row 3 and the file, got %v", err)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Fatalf("dst after a failed QuantizeFile: %v", err)
	}
}

// FuzzOpen opens any file: an error, or a table whose every row reads.
func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	for k, fm := range []Format{Float32, Float16, BFloat16, Int8, Int4} {
		tb, err := Quantize(sines(24), 6, fm)
		if err != nil {
			f.Fatal(err)
		}
		p := filepath.Join(dir, fm.String())
		if err := tb.Save(p, "emb"); err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if k == 3 {
			f.Add(b[:len(b)-1])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "table")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		tb, err := Open(p, "emb")
		if err != nil {
			return
		}
		defer tb.Close()
		dst := make([]float32, tb.Dim())
		for id := range int64(tb.Rows()) {
			if err := tb.Lookup(dst, []int64{id}); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// An 8-bit or 4-bit table is for serving: package table opens it neither
// to map nor to train, with an error naming the file.
func TestQuantizedNotForTraining(t *testing.T) {
	tb, err := Quantize(sines(64), 8, Int8)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "emb.safetensors")
	if err := tb.Save(path, "emb.weight"); err != nil {
		t.Fatal(err)
	}
	_, err = table.Open(path, "emb")
	if !errors.Is(err, checkpoint.ErrMismatch) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "U8") {
		t.Errorf("table.Open: want ErrMismatch naming the file and U8, got %v", err)
	}
	_, err = table.OpenCached(context.Background(), path, table.CacheOptions{Budget: 1 << 20}, table.FileOptions{})
	if !errors.Is(err, checkpoint.ErrMismatch) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "U8") {
		t.Errorf("table.OpenCached: want ErrMismatch naming the file and U8, got %v", err)
	}
}
