package feed

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"

	"github.com/gathergrad/gather/internal/errs"
)

// criteoLines returns n lines of Criteo's format: a 0/1 label, 13
// integers (some empty, some negative) and 26 hexadecimal ids (some
// empty).
func criteoLines(seed uint64, n int) []string {
	r := rand.New(rand.NewPCG(seed, 1))
	lines := make([]string, n)
	for i := range lines {
		f := []string{strconv.Itoa(r.IntN(2))}
		for range 13 {
			switch r.IntN(8) {
			case 0:
				f = append(f, "")
			case 1:
				f = append(f, strconv.Itoa(-r.IntN(3)))
			default:
				f = append(f, strconv.Itoa(r.IntN(5000)))
			}
		}
		for range 26 {
			if r.IntN(10) == 0 {
				f = append(f, "")
			} else {
				f = append(f, fmt.Sprintf("%08x", r.Uint32()))
			}
		}
		lines[i] = strings.Join(f, "\t")
	}
	return lines
}

// example is one example as the tests compare them.
type example struct {
	label float32
	dense []float32
	ids   [][]int64
	wts   [][]float64
}

func (e example) key() string { return fmt.Sprint(e.label, e.dense, e.ids, e.wts) }

// criteoWant parses line as the Criteo schema says, independently of the
// package's parser.
func criteoWant(line string) example {
	f := strings.Split(line, "\t")
	var e example
	l, _ := strconv.Atoi(f[0])
	e.label = float32(l)
	for _, s := range f[1:14] {
		v := 0.0
		if s != "" {
			x, _ := strconv.Atoi(s)
			v = float64(x)
		}
		e.dense = append(e.dense, float32(math.Log1p(math.Max(v, 0))))
	}
	for _, s := range f[14:] {
		var ids []int64
		if s != "" {
			x, _ := strconv.ParseUint(s, 16, 64)
			ids = append(ids, int64(x))
		}
		e.ids = append(e.ids, ids)
	}
	return e
}

func writeFile(t testing.TB, name string, lines []string, codec string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	text := []byte(strings.Join(lines, "\n") + "\n")
	var b bytes.Buffer
	switch codec {
	case "gzip":
		z := gzip.NewWriter(&b)
		z.Write(text)
		z.Close()
		text = b.Bytes()
	case "zstd":
		z, _ := zstd.NewWriter(&b)
		z.Write(text)
		z.Close()
		text = b.Bytes()
	}
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// readAll reads every batch of r and returns the real examples in order,
// checking each batch's shape and padding.
func readAll(t testing.TB, r *Reader, batch int) []example {
	t.Helper()
	var out []example
	for {
		b, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, examplesOf(t, b, batch)...)
	}
}

// examplesOf returns the real examples of b, checking its padding.
func examplesOf(t testing.TB, b *Batch, batch int) []example {
	t.Helper()
	if len(b.Labels) != batch || len(b.Weights) != batch || len(b.Dense) != batch*b.DenseDim || len(b.Sparse.Lengths) != batch*len(b.Sparse.Keys) {
		t.Fatalf("a batch of %d labels, %d weights, %d dense, %d lengths", len(b.Labels), len(b.Weights), len(b.Dense), len(b.Sparse.Lengths))
	}
	var out []example
	starts := make([]int64, len(b.Sparse.Keys))
	at := int64(0)
	for k := range b.Sparse.Keys {
		starts[k] = at
		for _, n := range b.Sparse.Lengths[k*batch : (k+1)*batch] {
			at += n
		}
	}
	if at != int64(len(b.Sparse.Values)) {
		t.Fatalf("lengths add to %d, %d values", at, len(b.Sparse.Values))
	}
	for i := range batch {
		w := b.Weights[i]
		if (i < b.Real) != (w == 1) || (w != 0 && w != 1) {
			t.Fatalf("example %d of %d real has weight %v", i, b.Real, w)
		}
		e := example{label: b.Labels[i], dense: slices.Clone(b.Dense[i*b.DenseDim : (i+1)*b.DenseDim])}
		for k := range b.Sparse.Keys {
			n := b.Sparse.Lengths[k*batch+i]
			ids := slices.Clone(b.Sparse.Values[starts[k] : starts[k]+n])
			if len(ids) == 0 {
				ids = nil
			}
			e.ids = append(e.ids, ids)
			if b.Sparse.Weights != nil {
				e.wts = append(e.wts, slices.Clone(b.Sparse.Weights[starts[k]:starts[k]+n]))
			}
			starts[k] += n
		}
		if i >= b.Real {
			if e.label != 0 || slices.ContainsFunc(e.dense, func(v float32) bool { return v != 0 }) || slices.ContainsFunc(e.ids, func(x []int64) bool { return len(x) > 0 }) {
				t.Fatalf("padding example %d is not empty: %v", i, e)
			}
			continue
		}
		out = append(out, e)
	}
	return out
}

// A Criteo file, plain, gzip and zstd, reads to the values of its lines
// in order, in batches whose last is padded with weight 0; several
// blocks and workers give the same.
func TestCriteo(t *testing.T) {
	lines := criteoLines(1, 1000)
	var want []example
	for _, l := range lines {
		want = append(want, criteoWant(l))
	}
	for _, codec := range []string{"plain", "gzip", "zstd"} {
		for _, bb := range []int{0, 3000} {
			t.Run(fmt.Sprintf("%s/block=%d", codec, bb), func(t *testing.T) {
				path := writeFile(t, "train.txt", lines, codec)
				r, err := Open([]string{path}, Criteo(), Options{Batch: 64, BlockBytes: bb, Workers: 3})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				got := readAll(t, r, 64)
				if len(got) != len(want) {
					t.Fatalf("%d examples, want %d", len(got), len(want))
				}
				for i := range want {
					if got[i].key() != want[i].key() {
						t.Fatalf("example %d: %v, want %v", i, got[i], want[i])
					}
				}
			})
		}
	}
}

// keys returns the examples as a sorted list of keys: a multiset.
func keys(es []example) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.key()
	}
	slices.Sort(out)
	return out
}

// Shuffled, the examples of each epoch are the file's, each once, in an
// order the seed sets (another seed, another order); three shards read
// disjoint parts that together are every example once an epoch.
func TestShuffleAndShards(t *testing.T) {
	lines := criteoLines(2, 3000)
	a := writeFile(t, "a.txt", lines[:1700], "plain")
	b := writeFile(t, "b.txt.gz", lines[1700:], "gzip")
	var want []example
	for _, l := range lines {
		want = append(want, criteoWant(l))
	}
	read := func(o Options) []example {
		r, err := Open([]string{a, b}, Criteo(), o)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		return readAll(t, r, o.Batch)
	}
	base := Options{Batch: 50, BlockBytes: 20000, Window: 3, Shuffle: true, Seed: 7, Epochs: 2}
	s1, s2 := read(base), read(base)
	if len(s1) != 2*len(want) {
		t.Fatalf("%d examples over 2 epochs of %d", len(s1), len(want))
	}
	if !slices.EqualFunc(s1, s2, func(x, y example) bool { return x.key() == y.key() }) {
		t.Fatal("two runs of one seed differ")
	}
	// The epochs' examples: each epoch every example once.
	for e := range 2 {
		if !slices.Equal(keys(s1[e*len(want):(e+1)*len(want)]), keys(want)) {
			t.Fatalf("epoch %d: not the file's examples once each", e)
		}
	}
	if slices.EqualFunc(s1[:len(want)], want, func(x, y example) bool { return x.key() == y.key() }) {
		t.Fatal("shuffled, the order is the file's")
	}
	other := base
	other.Seed = 8
	if slices.EqualFunc(read(other), s1, func(x, y example) bool { return x.key() == y.key() }) {
		t.Fatal("another seed, the same order")
	}
	var all []example
	sizes := []int{}
	for k := range 3 {
		o := base
		o.Epochs, o.Shard, o.Shards = 1, k, 3
		part := read(o)
		sizes = append(sizes, len(part))
		all = append(all, part...)
	}
	if !slices.Equal(keys(all), keys(want)) {
		t.Fatalf("the shards (%v examples) are not every example once", sizes)
	}
	for _, n := range sizes {
		if n == 0 {
			t.Fatalf("a shard of no example: %v", sizes)
		}
	}
}

// A reader resumed from its State after k batches gives the batches an
// uninterrupted run gives after them, for every k, shuffled or not,
// across windows and epochs.
func TestResume(t *testing.T) {
	lines := criteoLines(3, 700)
	path := writeFile(t, "r.txt", lines, "plain")
	zpath := writeFile(t, "r.txt.zst", lines, "zstd")
	for _, c := range []struct {
		name string
		path string
		o    Options
	}{
		{"plain", path, Options{Batch: 32, BlockBytes: 9000, Epochs: 2}},
		{"shuffled", path, Options{Batch: 32, BlockBytes: 9000, Window: 2, Shuffle: true, Seed: 3, Epochs: 2}},
		{"zstd-shuffled", zpath, Options{Batch: 32, BlockBytes: 9000, Window: 2, Shuffle: true, Seed: 3, Epochs: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Open([]string{c.path}, Criteo(), c.o)
			if err != nil {
				t.Fatal(err)
			}
			full := readAll(t, r, c.o.Batch)
			r.Close()
			for k := 0; ; k += 3 {
				r, err := Open([]string{c.path}, Criteo(), c.o)
				if err != nil {
					t.Fatal(err)
				}
				var got []example
				ended := false
				for range k {
					b, err := r.Next(context.Background())
					if errors.Is(err, io.EOF) {
						ended = true
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, examplesOf(t, b, c.o.Batch)...)
				}
				st, err := r.State()
				if err != nil {
					t.Fatal(err)
				}
				r.Close()
				r2, err := Open([]string{c.path}, Criteo(), c.o)
				if err != nil {
					t.Fatal(err)
				}
				if err := r2.SetState(toDense(st)); err != nil {
					t.Fatal(err)
				}
				got = append(got, readAll(t, r2, c.o.Batch)...)
				r2.Close()
				if !slices.EqualFunc(got, full, func(x, y example) bool { return x.key() == y.key() }) {
					t.Fatalf("resumed after %d batches: %d examples, want the uninterrupted run's %d", k, len(got), len(full))
				}
				if ended {
					return
				}
			}
		})
	}
}

// A position of another file or other options is refused.
func TestResumeMismatch(t *testing.T) {
	path := writeFile(t, "r.txt", criteoLines(4, 50), "plain")
	r, err := Open([]string{path}, Criteo(), Options{Batch: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st, _ := r.State()
	r2, err := Open([]string{path}, Criteo(), Options{Batch: 8, Shuffle: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if err := r2.SetState(toDense(st)); !errors.Is(err, ErrMismatch) {
		t.Fatalf("another reader's position: %v", err)
	}
}

// MovieLens's u.data (tabs) and ratings.dat ("::") read to their users,
// items and ratings.
func TestMovieLens(t *testing.T) {
	for _, c := range []struct {
		s     Schema
		sep   string
		lines []string
	}{
		{MovieLens100K(), "\t", []string{"196\t242\t3\t881250949", "186\t302\t3\t891717742", "22\t377\t1\t878887116"}},
		{MovieLens1M(), "::", []string{"1::1193::5::978300760", "1::661::3::978302109", "6040::3408::4::956703932"}},
	} {
		path := writeFile(t, "ratings", c.lines, "plain")
		r, err := Open([]string{path}, c.s, Options{Batch: 2})
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, r, 2)
		r.Close()
		if len(got) != 3 {
			t.Fatalf("%d ratings", len(got))
		}
		for i, l := range c.lines {
			f := strings.Split(l, c.sep)
			u, _ := strconv.ParseInt(f[0], 10, 64)
			it, _ := strconv.ParseInt(f[1], 10, 64)
			rt, _ := strconv.ParseFloat(f[2], 32)
			if got[i].label != float32(rt) || got[i].ids[0][0] != u || got[i].ids[1][0] != it {
				t.Fatalf("rating %d: %v, want %s", i, got[i], l)
			}
		}
	}
}

// A header names the columns (read by name, in any order, the others
// skipped); a multi-valued column splits into a bag with its weights;
// hashed ids are XXH64 and a modulo bounds ids.
func TestHeaderBagsAndHash(t *testing.T) {
	lines := []string{"extra,tags,label,tagw,city,age", "x,3|9|12,1,0.5|1|2,paris,31", "y,,0,,lyon,", "z,7,1,4,paris,2"}
	path := writeFile(t, "h.csv", lines, "plain")
	s := Schema{Delimiter: ",", Header: true, Columns: []Column{
		{Name: "label", Role: Label},
		{Name: "age", Role: Dense, Fill: "-1"},
		{Name: "tags", Role: Sparse, Split: "|", Modulo: 10},
		{Name: "tagw", Role: Weight, WeightOf: "tags", Split: "|"},
		{Name: "city", Role: Sparse, IDs: Hash},
		{Name: "cityw", Role: Skip},
	}}
	// A Skip column need not be in the header; every other one must.
	r, err := Open([]string{path}, s, Options{Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, r, 4)
	r.Close()
	if len(got) != 3 {
		t.Fatalf("%d examples", len(got))
	}
	h := func(s string) int64 { return int64(xxhash.Sum64String(s)) }
	want := []example{
		{1, []float32{31}, [][]int64{{3, 9, 2}, {h("paris")}}, [][]float64{{0.5, 1, 2}, {1}}},
		{0, []float32{-1}, [][]int64{nil, {h("lyon")}}, [][]float64{{}, {1}}},
		{1, []float32{2}, [][]int64{{7}, {h("paris")}}, [][]float64{{4}, {1}}},
	}
	for i := range want {
		if got[i].key() != want[i].key() {
			t.Fatalf("example %d: %v, want %v", i, got[i], want[i])
		}
	}
	// A header without a column the schema reads.
	s.Columns = append(s.Columns, Column{Name: "missing", Role: Dense})
	if _, err := Open([]string{path}, s, Options{Batch: 4}); !errors.Is(err, errs.ErrOption) || !strings.Contains(err.Error(), `"missing"`) {
		t.Fatalf("a column not in the header: %v", err)
	}
}

// toDense returns a State's tensors as SetState takes them.
func toDense(st map[string]tensorT) map[string]*denseT {
	out := map[string]*denseT{}
	for k, v := range st {
		out[k] = v.(*denseT)
	}
	return out
}

// A malformed line is a *LineError naming the file, the line and the
// column, never a panic or a silent zero; with MaxBad the lines are
// skipped and counted up to the limit, and past it reading stops.
func TestBadInput(t *testing.T) {
	good := criteoLines(5, 5)
	f := strings.Split(good[1], "\t")
	mk := func(edit func(f []string) []string) string {
		return strings.Join(edit(slices.Clone(f)), "\t")
	}
	for _, c := range []struct {
		name string
		line string
		col  int
		has  string
	}{
		{"fields", mk(func(f []string) []string { return f[:30] }), 0, "30 fields, want 40"},
		{"not hex", mk(func(f []string) []string { f[20] = "12zz"; return f }), 21, "not hexadecimal"},
		{"hex too long", mk(func(f []string) []string { f[20] = "123456789abcdef01"; return f }), 21, "1 to 16"},
		{"label", mk(func(f []string) []string { f[0] = "yes"; return f }), 1, "not a finite number"},
		{"empty label", mk(func(f []string) []string { f[0] = ""; return f }), 1, "no Fill"},
		{"dense", mk(func(f []string) []string { f[3] = "1e400"; return f }), 4, "not a finite number"},
		{"not text", mk(func(f []string) []string { f[15] = "\xff\xfe"; return f }), 0, "not UTF-8"},
		{"overlong", mk(func(f []string) []string { f[16] = strings.Repeat("a", 3000); return f }), 0, "Options.MaxLine"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lines := []string{good[0], good[2], c.line, good[3]}
			path := writeFile(t, "bad.txt", lines, "plain")
			for _, bb := range []int{0, 300} {
				r, err := Open([]string{path}, Criteo(), Options{Batch: 2, MaxLine: 1000, BlockBytes: bb})
				if err != nil {
					t.Fatal(err)
				}
				var err2 error
				for err2 == nil {
					_, err2 = r.Next(context.Background())
				}
				r.Close()
				var le *LineError
				if !errors.As(err2, &le) || !errors.Is(err2, ErrFormat) {
					t.Fatalf("block %d: %v, want a *LineError", bb, err2)
				}
				if le.File != path || le.Line != 3 || le.Column != c.col || !strings.Contains(le.Msg, c.has) {
					t.Fatalf("block %d: %v (line %d, column %d), want line 3, column %d, %q", bb, err2, le.Line, le.Column, c.col, c.has)
				}
			}
			// Skipped and counted, with MaxBad.
			r, err := Open([]string{path}, Criteo(), Options{Batch: 2, MaxLine: 1000, MaxBad: 1})
			if err != nil {
				t.Fatal(err)
			}
			got := readAll(t, r, 2)
			if len(got) != 3 || r.Bad() != 1 {
				t.Fatalf("MaxBad 1: %d examples, %d bad", len(got), r.Bad())
			}
			r.Close()
		})
	}
	lines := []string{good[0], "x", "y", good[1]}
	path := writeFile(t, "bad2.txt", lines, "plain")
	r, _ := Open([]string{path}, Criteo(), Options{Batch: 2, MaxBad: 1})
	defer r.Close()
	var err error
	for err == nil {
		_, err = r.Next(context.Background())
	}
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "MaxBad") {
		t.Fatalf("two bad lines, MaxBad 1: %v", err)
	}
	// A truncated gzip file.
	gz := writeFile(t, "cut.gz", criteoLines(6, 2000), "gzip")
	b, _ := os.ReadFile(gz)
	os.WriteFile(gz, b[:len(b)/2], 0o644)
	r2, err := Open([]string{gz}, Criteo(), Options{Batch: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	for err == nil || !errors.Is(err, ErrFormat) && !errors.Is(err, io.EOF) {
		_, err = r2.Next(context.Background())
	}
	if !errors.Is(err, ErrFormat) {
		t.Fatalf("a truncated gzip file: %v", err)
	}
}

// Splits by bucket partition the examples: train, validation and test
// are disjoint and together every example.
func TestSplit(t *testing.T) {
	lines := criteoLines(7, 600)
	path := writeFile(t, "s.txt", lines, "plain")
	var all []example
	sizes := []int{}
	for _, sp := range []Split{{100, 0, 80}, {100, 80, 90}, {100, 90, 100}} {
		r, err := Open([]string{path}, Criteo(), Options{Batch: 16, Split: sp})
		if err != nil {
			t.Fatal(err)
		}
		part := readAll(t, r, 16)
		r.Close()
		sizes = append(sizes, len(part))
		all = append(all, part...)
	}
	var want []example
	for _, l := range lines {
		want = append(want, criteoWant(l))
	}
	if !slices.Equal(keys(all), keys(want)) || sizes[0] < 400 || sizes[2] == 0 {
		t.Fatalf("splits of %v examples are not a partition of %d", sizes, len(want))
	}
}

// Options and schemas that cannot be read are refused.
func TestOpenRefuses(t *testing.T) {
	path := writeFile(t, "o.txt", criteoLines(8, 3), "plain")
	for name, c := range map[string]struct {
		s Schema
		o Options
	}{
		"no batch":       {Criteo(), Options{}},
		"shard":          {Criteo(), Options{Batch: 1, Shard: 2, Shards: 2}},
		"split":          {Criteo(), Options{Batch: 1, Split: Split{10, 5, 5}}},
		"two labels":     {Schema{Columns: []Column{{Name: "a", Role: Label}, {Name: "b", Role: Label}}}, Options{Batch: 1}},
		"weight of none": {Schema{Columns: []Column{{Name: "a", Role: Label}, {Name: "w", Role: Weight, WeightOf: "x"}}}, Options{Batch: 1}},
	} {
		if _, err := Open([]string{path}, c.s, c.o); !errors.Is(err, errs.ErrOption) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzReader reads any bytes as a file, with a header or not, plain or
// as gzip: batches or an error, never a panic or a huge allocation.
func FuzzReader(f *testing.F) {
	f.Add([]byte(strings.Join(criteoLines(9, 3), "\n")), false)
	f.Add([]byte("label,tags,w\n1,3|4,0.5|2\n0,,\n"), true)
	f.Add([]byte("1\t\t\n"), false)
	pq := parquetSeed(f)
	f.Add(pq, false)
	f.Add(pq[:len(pq)/2], false)
	f.Add(append([]byte("PAR1"), pq[len(pq)-40:]...), false)
	f.Fuzz(func(t *testing.T, b []byte, header bool) {
		path := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		schemas := []Schema{Criteo(), {Columns: []Column{{Name: "label", Role: Label}, {Name: "tags", Role: Sparse}, {Name: "w", Role: Weight, WeightOf: "tags"}}},
			{Delimiter: ",", Header: header, Columns: []Column{
				{Name: "label", Role: Label}, {Name: "tags", Role: Sparse, Split: "|", IDs: Hash}, {Name: "w", Role: Weight, WeightOf: "tags", Split: "|"}}}}
		for _, s := range schemas {
			r, err := Open([]string{path}, s, Options{Batch: 3, BlockBytes: 64, MaxLine: 4096, MaxBad: len(b) % 3, Shuffle: header, Seed: 1})
			if err != nil {
				continue
			}
			for range 1000 {
				if _, err := r.Next(context.Background()); err != nil {
					break
				}
			}
			r.Close()
		}
	})
}

// parquetSeed returns a small Parquet file of a label, a list of tags and
// their weights, written by parquet-go.
func parquetSeed(f *testing.F) []byte { return parquetBytes(f) }

func parquetSeedT(t *testing.T) []byte { return parquetBytes(t) }

func parquetBytes(f testing.TB) []byte {
	type row struct {
		Label float64   `parquet:"label"`
		Tags  []int64   `parquet:"tags,list"`
		W     []float64 `parquet:"w,list"`
	}
	var b bytes.Buffer
	w := parquet.NewGenericWriter[row](&b, parquet.MaxRowsPerRowGroup(2))
	if _, err := w.Write([]row{{1, []int64{3, 4}, []float64{0.5, 2}}, {0, nil, nil}, {1, []int64{9}, []float64{1}}}); err != nil {
		f.Fatal(err)
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	return b.Bytes()
}

// A Parquet file parquet-go wrote (a list column and its weights, row
// groups of 2) reads to its rows; truncated, it is an error.
func TestParquet(t *testing.T) {
	b := parquetSeedT(t)
	path := filepath.Join(t.TempDir(), "x.parquet")
	os.WriteFile(path, b, 0o644)
	s := Schema{Columns: []Column{{Name: "label", Role: Label}, {Name: "tags", Role: Sparse}, {Name: "w", Role: Weight, WeightOf: "tags"}}}
	r, err := Open([]string{path}, s, Options{Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, r, 2)
	r.Close()
	want := []example{{1, []float32{}, [][]int64{{3, 4}}, [][]float64{{0.5, 2}}}, {0, []float32{}, [][]int64{nil}, [][]float64{{}}}, {1, []float32{}, [][]int64{{9}}, [][]float64{{1}}}}
	if len(got) != 3 {
		t.Fatalf("%d rows", len(got))
	}
	for i := range want {
		if got[i].key() != want[i].key() {
			t.Fatalf("row %d: %v, want %v", i, got[i], want[i])
		}
	}
	os.WriteFile(path, b[:len(b)-10], 0o644)
	if _, err := Open([]string{path}, s, Options{Batch: 2}); !errors.Is(err, ErrFormat) {
		t.Fatalf("a truncated Parquet file: %v", err)
	}
}

// A bag's values are split by its separator: an empty value (a trailing,
// doubled or leading separator) is a malformed line; an empty field is
// an empty bag.
func TestBagValues(t *testing.T) {
	s := Schema{Delimiter: ",", Columns: []Column{{Name: "label", Role: Label}, {Name: "tags", Role: Sparse, Split: "|"}}}
	for _, line := range []string{"1,3|", "1,3||4", "1,|3"} {
		r, err := Open([]string{writeFile(t, "t", []string{line}, "plain")}, s, Options{Batch: 1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Next(context.Background())
		r.Close()
		var le *LineError
		if !errors.As(err, &le) || le.Column != 2 {
			t.Fatalf("%q: %v, want a *LineError of column 2", line, err)
		}
	}
	r, err := Open([]string{writeFile(t, "t", []string{"1,3|4", "0,"}, "plain")}, s, Options{Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := r.Next(context.Background())
	if err != nil || !slices.Equal(b.Sparse.Values, []int64{3, 4}) || !slices.Equal(b.Sparse.Lengths, []int64{2, 0}) {
		t.Fatalf("%v, %v", b, err)
	}
}

// Every physical type a column reads from (BOOLEAN, INT32, INT64, FLOAT,
// DOUBLE, BYTE_ARRAY text), plain and dictionary-encoded, required and
// optional, reads to the values written: nulls to the Fill or to an
// empty bag, hashed integers as their decimal text hashes.
func TestParquetKinds(t *testing.T) {
	type row struct {
		Label bool     `parquet:"label"`
		A     *int32   `parquet:"a,optional"`
		B     float32  `parquet:"b"`
		C     string   `parquet:"c"`
		D     float64  `parquet:"d,dict"`
		E     string   `parquet:"e,dict"`
		F     *int64   `parquet:"f,optional"`
		G     int32    `parquet:"g,dict"`
		H     []string `parquet:"h,list"`
	}
	i32 := func(v int32) *int32 { return &v }
	i64 := func(v int64) *int64 { return &v }
	rows := []row{
		{true, i32(-3), 1.5, "7", 2.25, "x", i64(10), 5, []string{"a", "b"}},
		{false, nil, -2, "-1e3", 2.25, "y", nil, 5, nil},
		{true, i32(9), 0, "0.5", -1, "x", i64(-4), 6, []string{"b"}},
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[row](&buf, parquet.MaxRowsPerRowGroup(2), parquet.Compression(&parquet.Zstd))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "k.parquet")
	os.WriteFile(path, buf.Bytes(), 0o644)
	s := Schema{Columns: []Column{{Name: "label", Role: Label}, {Name: "a", Role: Dense, Fill: "100"},
		{Name: "b", Role: Dense}, {Name: "c", Role: Dense}, {Name: "d", Role: Dense, Transform: Log1p},
		{Name: "e", Role: Sparse, IDs: Hash}, {Name: "f", Role: Sparse, IDs: Hash}, {Name: "g", Role: Sparse},
		{Name: "h", Role: Sparse, IDs: Hash}}}
	r, err := Open([]string{path}, s, Options{Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, r, 4)
	r.Close()
	h := func(s string) int64 { return int64(xxhash.Sum64String(s)) }
	l1p := func(x float64) float32 { return float32(math.Log1p(max(x, 0))) }
	want := []example{
		{1, []float32{-3, 1.5, 7, l1p(2.25)}, [][]int64{{h("x")}, {h("10")}, {5}, {h("a"), h("b")}}, nil},
		{0, []float32{100, -2, -1000, l1p(2.25)}, [][]int64{{h("y")}, nil, {5}, nil}, nil},
		{1, []float32{9, 0, 0.5, l1p(-1)}, [][]int64{{h("x")}, {h("-4")}, {6}, {h("b")}}, nil},
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].key() != want[i].key() {
			t.Errorf("row %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// A Parquet file whose footer claims more bytes than the file holds is
// ErrFormat before any of them is allocated (parquet-go would allocate
// the claimed 4 GB first).
func TestParquetFooterTooLong(t *testing.T) {
	b := []byte("PAR1arquet-go/parquet-go\x19<\x1c\x00\x00\x1c\x00\x00\x1c\x00\x00\x00\xe3\x02\x00\xefPAR1")
	path := filepath.Join(t.TempDir(), "x.parquet")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Open([]string{path}, Criteo(), Options{Batch: 2})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrFormat) {
		t.Fatalf("a footer longer than the file: %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("opening it allocated %d bytes", n)
	}
}
