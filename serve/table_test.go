package serve

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gathergrad/gather/table/driver"

	"github.com/x448/float16"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// fixtures reads testdata/quant.safetensors, which testdata/quant.py makes
// with PyTorch's FBGEMM ops.
func fixtures(t *testing.T) map[string]*tensor.Dense {
	t.Helper()
	ts, _, err := checkpoint.Read("testdata/quant.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

var tags = []struct {
	name      string
	rows, dim int
}{{"300x16", 300, 16}, {"200x64", 200, 64}, {"100x7", 100, 7}, {"100x6", 100, 6}, {"50x1", 50, 1}}

// Quantize's rows are PyTorch's prepacked rows byte for byte: random rows,
// constant ones, zeros, two distinct values, wide and narrow ranges.
func TestQuantizeTorch(t *testing.T) {
	ts := fixtures(t)
	for _, tag := range tags {
		w := ts[tag.name+".weight"].Data().([]float32)
		for _, f := range []Format{Int8, Int4} {
			want, ok := ts[fmt.Sprintf("%s.%s", tag.name, f.String()[:4])]
			if !ok {
				continue // PyTorch packs 4-bit rows of an even dim only
			}
			q, err := Quantize(w, tag.dim, f)
			if err != nil {
				t.Fatal(err)
			}
			wb := want.Data().([]uint8)
			if q.Rows() != tag.rows || !bytes.Equal(q.Bytes(), wb) {
				rb := f.RowBytes(tag.dim)
				for r := range tag.rows {
					if g, wr := q.Bytes()[r*rb:(r+1)*rb], wb[r*rb:(r+1)*rb]; !bytes.Equal(g, wr) {
						t.Fatalf("%s %v: row %d (%v):\n got %v\nwant %v", tag.name, f, r, w[r*tag.dim:(r+1)*tag.dim], g, wr)
					}
				}
			}
		}
	}
}

// Bags of PyTorch's prepacked rows are its *_rowwise_offsets results to
// float32 rounding: sums and means, with and without weights, offsets
// with and without the last one, empty bags.
func TestBagTorch(t *testing.T) {
	ts := fixtures(t)
	for _, tag := range tags {
		ids := ts[tag.name+".ids"].Data().([]int64)
		offs := ts[tag.name+".offsets"].Data().([]int64)
		weights := ts[tag.name+".weights"].Data().([]float32)
		for _, f := range []Format{Int8, Int4} {
			packed, ok := ts[fmt.Sprintf("%s.%s", tag.name, f.String()[:4])]
			if !ok {
				continue
			}
			tb, err := FromBytes(f, tag.dim, packed.Data().([]uint8))
			if err != nil {
				t.Fatal(err)
			}
			bags := len(offs) - 1
			for _, mode := range []driver.BagMode{driver.BagSum, driver.BagMean} {
				for _, weighted := range []bool{false, true} {
					name := fmt.Sprintf("%s.%s.%s", tag.name, f.String()[:4], [...]string{"sum", "mean"}[mode])
					o := BagOptions{Mode: mode}
					if weighted {
						name += ".weighted"
						o.Weights = weights
					}
					want := ts[name].Data().([]float32)
					for _, last := range []bool{true, false} {
						o.IncludeLastOffset = last
						off := offs
						if !last {
							off = offs[:bags]
						}
						got := make([]float32, bags*tag.dim)
						if err := tb.Bag(got, ids, off, o); err != nil {
							t.Fatal(err)
						}
						for b := range bags {
							n := offs[b+1] - offs[b]
							// Σ|w|·(|value|+2|bias|) bounds the terms each
							// rounding is relative to.
							bound := make([]float32, tag.dim)
							row := make([]float32, tag.dim)
							for i := offs[b]; i < offs[b+1]; i++ {
								if err := tb.Lookup(row, ids[i:i+1]); err != nil {
									t.Fatal(err)
								}
								w := float32(1)
								if weighted {
									w = weights[i]
								}
								bias := biasOf(tb, ids[i])
								for j, v := range row {
									bound[j] += float32(math.Abs(float64(w)) * (math.Abs(float64(v)) + 2*math.Abs(float64(bias))))
								}
							}
							for j := range tag.dim {
								wv := want[b*tag.dim+j]
								if mode == driver.BagMean && n > 0 {
									// PyTorch 1.13's quantized ops return the sum for mode 1.
									wv /= float32(n)
									bound[j] /= float32(n)
								}
								if d := math.Abs(float64(got[b*tag.dim+j] - wv)); d > 4e-7*float64(bound[j])*float64(n+1)+1e-30 {
									t.Fatalf("%s last=%v: bag %d column %d: %v, PyTorch %v", name, last, b, j, got[b*tag.dim+j], wv)
								}
							}
						}
					}
				}
			}
		}
	}
}

// biasOf returns the bias of row id of an Int8 or Int4 table.
func biasOf(tb *Table, id int64) float32 {
	row := tb.row(id)
	if tb.Format() == Int8 {
		return math.Float32frombits(binary.LittleEndian.Uint32(row[len(row)-4:]))
	}
	return float16.Frombits(binary.LittleEndian.Uint16(row[len(row)-2:])).Float32()
}

// Every format's lookups are its rows' values: Float32 exactly, Float16
// and BFloat16 to their precision (values below 5 here), Int8 and Int4 to half their step.
func TestFormats(t *testing.T) {
	const rows, dim = 40, 10
	w := make([]float32, rows*dim)
	for i := range w {
		w[i] = float32(math.Sin(float64(i)*0.7)) * float32(1+i%5)
	}
	ids := []int64{3, 0, 39, 3}
	for _, f := range []Format{Float32, Float16, BFloat16, Int8, Int4} {
		tb, err := Quantize(w, dim, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(tb.Bytes()) != rows*f.RowBytes(dim) {
			t.Fatalf("%v: %d bytes", f, len(tb.Bytes()))
		}
		got := make([]float32, len(ids)*dim)
		if err := tb.Lookup(got, ids); err != nil {
			t.Fatal(err)
		}
		for k, id := range ids {
			x := w[id*dim : (id+1)*dim]
			lo, hi := x[0], x[0]
			for _, v := range x {
				lo, hi = min(lo, v), max(hi, v)
			}
			tol := map[Format]float64{Float32: 0, Float16: 1.0 / 1024 * 5, BFloat16: 1.0 / 256 * 5, Int8: float64(hi-lo) / 255 / 2 * 1.01, Int4: float64(hi-lo)/15/2*1.01 + 0.01}[f]
			for j, v := range x {
				if d := math.Abs(float64(got[k*dim+j] - v)); d > tol {
					t.Fatalf("%v: row %d column %d: %v, want %v within %v", f, id, j, got[k*dim+j], v, tol)
				}
			}
		}
	}
}

// Padding is skipped and not counted; a bag of padding pools to zeros.
func TestBagPadding(t *testing.T) {
	w := []float32{1, 2, 3, 4, 5, 6} // three rows of 2
	tb, err := Quantize(w, 2, Float32)
	if err != nil {
		t.Fatal(err)
	}
	pad := int64(1)
	got := make([]float32, 6)
	err = tb.Bag(got, []int64{0, 1, 2, 1, 1}, []int64{0, 3, 3}, BagOptions{Mode: driver.BagMean, Padding: &pad})
	if err != nil {
		t.Fatal(err)
	}
	if want := []float32{3, 4, 0, 0, 0, 0}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// Bad input is an error naming the value, and the output is unchanged.
func TestBadInput(t *testing.T) {
	tb, err := Quantize([]float32{1, 2, 3, 4}, 2, Int8)
	if err != nil {
		t.Fatal(err)
	}
	dst := []float32{7, 7, 7, 7}
	for _, c := range []struct {
		err  error
		want string
		call func() error
	}{
		{optim.ErrNotFinite, "row 1 holds NaN at column 0", func() error {
			_, err := Quantize([]float32{1, 2, float32(math.NaN()), 0}, 2, Int4)
			return err
		}},
		{optim.ErrNotFinite, "row 1 holds -70000 at column 1, beyond float16's largest value, 65504", func() error {
			_, err := Quantize([]float32{1, 2, 3, -70000}, 2, Float16)
			return err
		}},
		{optim.ErrNotFinite, "row 0 spans", func() error {
			_, err := Quantize([]float32{-3e38, 3e38}, 2, Int8)
			return err
		}},
		{ErrIndexOutOfRange, "ids[1] = 2 is outside the table's 2 rows", func() error { return tb.Lookup(dst, []int64{0, 2}) }},
		{ErrIndexOutOfRange, "ids[0] = -1", func() error { return tb.Bag(dst[:2], []int64{-1}, []int64{0}, BagOptions{}) }},
		{ErrIndexOutOfRange, "offsets[1] = 3", func() error { return tb.Bag(dst, []int64{0, 1}, []int64{0, 3}, BagOptions{}) }},
		{ErrIndexOutOfRange, "offsets[0] = 1", func() error { return tb.Bag(dst, []int64{0, 1}, []int64{1, 2}, BagOptions{}) }},
		{ErrIndexOutOfRange, "the last offset is 1", func() error {
			return tb.Bag(dst[:2], []int64{0, 1}, []int64{0, 1}, BagOptions{IncludeLastOffset: true})
		}},
		{ErrShape, "1 weights for 2 ids", func() error {
			return tb.Bag(dst[:2], []int64{0, 1}, []int64{0}, BagOptions{Weights: []float32{1}})
		}},
		{ErrShape, "2 bags of 2 values into 3", func() error { return tb.Bag(dst[:3], []int64{0}, []int64{0, 1}, BagOptions{}) }},
		{ErrShape, "not rows of 2 values in int8-rowwise", func() error { _, err := FromBytes(Int8, 2, make([]byte, 11)); return err }},
	} {
		err := c.call()
		if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want %v naming %q, got %v", c.err, c.want, err)
		}
		if fmt.Sprint(dst) != "[7 7 7 7]" {
			t.Fatalf("%q: the output changed: %v", c.want, dst)
		}
	}
}

// Lookups and bags allocate nothing, and many goroutines may call them at
// once (run with -race).
func TestNoAllocsConcurrent(t *testing.T) {
	const rows, dim = 1000, 32
	w := make([]float32, rows*dim)
	for i := range w {
		w[i] = float32(math.Cos(float64(i)))
	}
	tb, err := Quantize(w, dim, Int4)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, 4096*5)
	for i := range ids {
		ids[i] = int64(i*7919) % rows
	}
	offsets := make([]int64, 4096)
	for b := range offsets {
		offsets[b] = int64(5 * b)
	}
	out := make([]float32, 4096*dim)
	o := BagOptions{Mode: driver.BagMean}
	if err := tb.Bag(out, ids, offsets, o); err != nil { // fills the runner's free lists
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(20, func() { tb.Bag(out, ids, offsets, o) }); a != 0 {
		t.Fatalf("Bag: %v allocations a call", a)
	}
	row := make([]float32, 3*dim)
	if a := testing.AllocsPerRun(20, func() { tb.Lookup(row, ids[:3]) }); a != 0 {
		t.Fatalf("Lookup: %v allocations a call", a)
	}
	want := slices.Clone(out)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			mine := make([]float32, len(out))
			for range 5 {
				if err := tb.Bag(mine, ids, offsets, o); err != nil || !slices.Equal(mine, want) {
					t.Errorf("a concurrent Bag: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// Int4 rows whose float16 bias or scale would overflow are refused, at
// the edges: -65504 (float16's largest magnitude) is a bias that fits,
// -65520 (which float16 rounds to -Inf) is not; a range whose scale,
// (max - bias)/15, rounds to 65504 fits, one that rounds to Inf does not.
// Every row that is accepted reads back finite, and within one step of
// the scale of its values. QuantizeFile of a refused table leaves no file.
func TestInt4Range(t *testing.T) {
	const big = 65504 * 15 // a scale of exactly 65504 from a bias of 0
	for _, c := range []struct {
		name string
		row  []float32
		want string // "" for a row that fits
	}{
		{"bias -65504", []float32{-65504, 0}, ""},
		{"bias just above -65520", []float32{-65519.99, 0}, ""},
		{"bias -65520", []float32{-65520, 0}, "row 0 holds -65520 at column 0: int4's float16 bias"},
		{"bias -1e6", []float32{3, -1e6}, "row 0 holds -1e+06 at column 1: int4's float16 bias"},
		{"scale 65504", []float32{0, big}, ""},
		{"scale just below 65520", []float32{0, 65519.99 * 15}, ""},
		{"scale 65520", []float32{0, 65520 * 15}, "row 0 spans 0 to 982800: int4's float16 scale"},
		{"range above 15 x 65504 from a negative bias", []float32{-60000, 1e6}, "row 0 spans -60000 to 1e+06"},
		{"large but fine", []float32{-60000, 60000}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb, err := Quantize(c.row, 2, Int4)
			if c.want != "" {
				if !errors.Is(err, optim.ErrNotFinite) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("Quantize: %v, want ErrNotFinite naming %q", err, c.want)
				}
				dir := t.TempDir()
				src, dst := filepath.Join(dir, "t.safetensors"), filepath.Join(dir, "q.safetensors")
				if err := checkpoint.Write(src, map[string]tensor.Tensor{"w": tensor.New(tensor.WithShape(1, 2), tensor.WithBacking(c.row))}, nil); err != nil {
					t.Fatal(err)
				}
				if err := QuantizeFile(dst, src, "w", Int4); !errors.Is(err, optim.ErrNotFinite) {
					t.Fatalf("QuantizeFile: %v, want ErrNotFinite", err)
				}
				if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("QuantizeFile left %s: %v", dst, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := make([]float32, 2)
			if err := tb.Lookup(got, []int64{0}); err != nil {
				t.Fatal(err)
			}
			_, scale, _ := kernel.Row4Fits(min(c.row[0], c.row[1]), max(c.row[0], c.row[1]))
			for j, v := range got {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || math.Abs(float64(v-c.row[j])) > float64(scale) {
					t.Errorf("value %d reads %v, was %v (scale %v)", j, v, c.row[j], scale)
				}
			}
		})
	}
}

// BFloat16 rows read back as table.RoundValues rounds the float32 values
// (to nearest even, as PyTorch's Tensor.bfloat16 rounds), a value beyond
// bfloat16's largest is refused naming its row, and a mean of BFloat16
// bags is the mean of the rounded rows.
func TestBFloat16(t *testing.T) {
	w := []float32{1, 1.0 / 3, -2.5, 1000.1, 0, 3e-5, 65504, -1e30}
	tb, err := Quantize(w, 4, BFloat16)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(w)
	table.RoundValues(driver.BFloat16, want)
	got := make([]float32, len(w))
	if err := tb.Lookup(got, []int64{0, 1}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("lookup %v, want %v", got, want)
	}
	bag := make([]float32, 4)
	if err := tb.Bag(bag, []int64{0, 1}, []int64{0}, BagOptions{Mode: driver.BagMean}); err != nil {
		t.Fatal(err)
	}
	for j := range bag {
		if m := (want[j] + want[4+j]) * 0.5; bag[j] != m {
			t.Fatalf("bag column %d: %v, want %v", j, bag[j], m)
		}
	}
	_, err = Quantize([]float32{1, 2, math.MaxFloat32, 0}, 2, BFloat16)
	if !errors.Is(err, errs.ErrNotFinite) || !strings.Contains(err.Error(), "row 1") {
		t.Fatalf("a value beyond bfloat16's largest: %v", err)
	}
	if err := tb.Bag(bag, []int64{0}, []int64{0}, BagOptions{Mode: driver.BagMax}); !errors.Is(err, errs.ErrOption) {
		t.Fatalf("a bag by the maximum: %v", err)
	}
}
