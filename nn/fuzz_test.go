package nn

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/ref"
)

var indexDtypes = []tensor.Dtype{tensor.Int, tensor.Int32, tensor.Int64}

// FuzzCrossEntropy checks the loss op and its gradient op on logits of
// rows × classes (0 to 5 each) with targets near the range and sometimes
// extreme: an error exactly when a target is out of [0, classes),
// then an *gather.IndexError naming it and the gradient buffer untouched; else the
// reference's loss and gradient; the logits unchanged either way.
func FuzzCrossEntropy(f *testing.F) {
	f.Add(uint8(3), uint8(4), uint8(0), []byte{1, 2, 3, 250, 0, 7, 9})
	f.Add(uint8(2), uint8(3), uint8(1), []byte{0, 1, 2, 3, 4, 5})
	f.Add(uint8(1), uint8(1), uint8(2), []byte{255, 255, 255, 255, 255, 255, 255, 127})
	f.Add(uint8(0), uint8(3), uint8(0), []byte{})
	f.Fuzz(func(t *testing.T, rows, classes, dtype uint8, b []byte) {
		r, c := int(rows%6), int(classes%6)
		if c == 0 {
			return // rejected when the graph is built; see TestCrossEntropyErrors
		}
		it := indexDtypes[int(dtype)%len(indexDtypes)]
		x := make([]float64, r*c)
		for i := range x {
			x[i] = float64(int8(i*37+len(b))) / 8 // a spread of values, negatives included
		}
		y := make([]int64, r)
		for i := range y {
			switch {
			case len(b) >= 8 && b[0] > 250: // anything, extremes included
				y[i] = int64(binary.LittleEndian.Uint64(b))
				b = b[8:]
			case len(b) > 0:
				y[i] = int64(int(b[0])%(2*c+2) - c - 1) // [-c-1, c]
				b = b[1:]
			}
			if it == tensor.Int32 {
				y[i] = int64(int32(y[i]))
			}
		}
		xt := ref.FloatTensor(x, []int{r, c}, tensor.Float64)
		yt := ref.CastIndices(y, []int{r}, it)
		o := newCrossEntropyOp(opCrossEntropy, tensor.Float64, it, tensor.Shape{r, c}, ReduceMean, kernel.ClassLoss{Entropy: true})
		bad := -1
		for i, v := range y {
			if v < 0 || v >= int64(c) {
				bad = i
				break
			}
		}
		loss, err := o.Do(xt, yt)
		grad := ref.FloatTensor(make([]float64, r*c), []int{r, c}, tensor.Float64)
		for i := range grad.Float64s() {
			grad.Float64s()[i] = 7
		}
		gerr := o.Grads[0].IncrDo(grad, xt, yt, loss)
		if bad >= 0 {
			var ie *gather.IndexError
			if !errors.As(err, &ie) || ie.Pos[0] != bad || ie.Value != y[bad] || ie.Size != c {
				t.Fatalf("targets %v: want an gather.IndexError at %d, got %v", y, bad, err)
			}
			if !errors.Is(gerr, gather.ErrIndexOutOfRange) {
				t.Fatalf("gradient: want gather.ErrIndexOutOfRange, got %v", gerr)
			}
			for _, g := range ref.Floats(grad) {
				if g != 7 {
					t.Fatalf("gradient buffer written on error: %v", ref.Floats(grad))
				}
			}
		} else {
			if err != nil || gerr != nil {
				t.Fatalf("targets %v: unexpected errors %v, %v", y, err, gerr)
			}
			got, _ := operand.Scalar("loss", loss)
			if r == 0 {
				if !math.IsNaN(got) {
					t.Fatalf("empty batch: loss %v, want NaN", got)
				}
			} else {
				want, wantGrad := refCrossEntropy(x, y, c)
				if math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want)) {
					t.Fatalf("loss %v, want %v", got, want)
				}
				for i, g := range ref.Floats(grad) {
					if w := 7 + got*wantGrad[i]; math.Abs(g-w) > 1e-12*math.Max(1, math.Abs(w)) {
						t.Fatalf("gradient[%d] = %v, want %v", i, g, w)
					}
				}
			}
		}
		for i, v := range ref.Floats(xt) {
			if v != x[i] {
				t.Fatalf("logits modified at %d", i)
			}
		}
	})
}

var floatDtypes = []tensor.Dtype{tensor.Float64, tensor.Float32}

// FuzzEmbeddingBag checks the bag op and its two gradient ops on small
// tables, ids near the range and sometimes out of it, offsets sometimes
// bad (not starting at 0, decreasing, past the end), with or without
// weights and a padding id, in every mode: an error exactly when the input
// is invalid, with the right sentinel, the gradient buffers untouched;
// else the reference's output and gradients; the inputs unchanged.
func FuzzEmbeddingBag(f *testing.F) {
	f.Add([]byte{3, 2, 0, 1, 5, 0, 1, 2, 3, 4, 0, 2, 4})
	f.Add([]byte{4, 3, 2, 0, 6, 1, 1, 2, 2, 9, 0, 0, 3, 3})
	f.Add([]byte{2, 1, 1, 255, 3, 0, 0, 1, 0, 4})
	// float32 rows, 450 ids in two bags, the second longer than a batch.
	f.Add([]byte{4, 1, 1, 8 | 16 | 1, 200, 3, 1, 0, 100})
	// The same with padding: 505 ids in three bags, two short ones first.
	f.Add([]byte{4, 0, 0, 8 | 16 | 2, 2, 255, 9, 2, 0, 10, 11})
	// float32 rows, a few ids.
	f.Add([]byte{3, 0, 2, 8 | 1, 7, 0, 1, 2, 3, 4, 5, 6, 1, 0, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		next := func() int {
			if len(b) == 0 {
				return 0
			}
			v := int(b[0])
			b = b[1:]
			return v
		}
		vocab, dim := next()%5+1, next()%4
		mode := BagMode(next() % 3)
		flags := next()
		weights, pad := flags&1 != 0, -1
		if flags&2 != 0 {
			pad = next() % vocab
		}
		// flags&8: float32 rows of 8 or 16 (the assembly's pooling path);
		// flags&16: hundreds of ids, more than the pooling path collects
		// at once, valid and drawn from a seed.
		dt, tol := tensor.Float64, 1e-9
		if flags&8 != 0 {
			dt, tol, dim = tensor.Float32, 1e-4, 8*(dim%2+1)
		}
		var n int
		if flags&16 != 0 {
			n = 250 + next()%300
		} else {
			n = next() % 9
		}
		ids := make([]int64, n)
		seed := next()
		for i := range ids {
			if flags&16 != 0 {
				ids[i] = int64((i*31+seed*7)%(2*vocab) - vocab) // [-vocab, vocab-1]
				continue
			}
			ids[i] = int64(next()%(2*vocab+2) - vocab - 1) // [-vocab-1, vocab]
		}
		bags := next()%4 + 1
		offs := make([]int64, bags)
		valid := true
		for k := range offs {
			offs[k] = int64(next() % (n + 2))
			if k == 0 && flags&4 == 0 {
				offs[k] = 0
			}
		}
		if offs[0] != 0 {
			valid = false
		}
		for k := 1; k < bags; k++ {
			if offs[k] < offs[k-1] {
				valid = false
			}
		}
		for _, v := range offs {
			if v > int64(n) {
				valid = false
			}
		}
		badID := false
		for _, v := range ids {
			if v < 0 || v >= int64(vocab) { // nn takes ids in [0, vocab) only
				badID = true
			}
		}
		table := make([]float64, vocab*dim)
		for i := range table {
			table[i] = float64((i*7)%11) - 5 + float64(i)/64 // distinct, exact in float32
		}
		var w []float64
		if weights {
			w = make([]float64, n)
			for i := range w {
				w[i] = float64(next()%5) - 1.5
			}
		}
		g := make([]float64, bags*dim)
		for i := range g {
			g[i] = float64(i%5) - 2
		}
		o := &bagOp{mode: mode, dtype: dt, idType: tensor.Int64, offType: tensor.Int64, vocab: vocab, dim: dim, bags: bags,
			idShape: tensor.Shape{n}, hasOffsets: true, hasWeights: weights, cfg: operand.Config{GradScale: 1, HasPad: pad >= 0, Pad: pad},
			lbl: operand.Label{Op: opBag, Arg: "ids", NonNegative: true}}
		o.setOps()
		tt := ref.FloatTensor(table, []int{vocab, dim}, dt)
		it := ref.CastIndices(ids, []int{n}, tensor.Int64)
		ot := ref.CastIndices(offs, []int{bags}, tensor.Int64)
		in := []gorgonia.Value{tt, it, ot}
		if weights {
			in = append(in, ref.FloatTensor(w, []int{n}, dt))
		}
		out, err := o.Do(in...)
		gt := ref.FloatTensor(make([]float64, vocab*dim), []int{vocab, dim}, dt)
		gerr := o.Grads[0].IncrDo(gt, append(in, ref.FloatTensor(g, []int{bags, dim}, dt))...)
		switch {
		case !valid:
			if !errors.Is(err, gather.ErrShape) || !errors.Is(gerr, gather.ErrShape) {
				t.Fatalf("offsets %v of %d ids: want ErrShape, got %v and %v", offs, n, err, gerr)
			}
		case badID:
			var ie *gather.IndexError
			if !errors.As(err, &ie) || !errors.Is(gerr, gather.ErrIndexOutOfRange) {
				t.Fatalf("ids %v: want an IndexError, got %v and %v", ids, err, gerr)
			}
		default:
			if err != nil || gerr != nil {
				t.Fatalf("unexpected errors %v, %v", err, gerr)
			}
			bounds := make([]int, bags+1)
			for k, v := range offs {
				bounds[k] = int(v)
			}
			bounds[bags] = n
			want, wantT, wantW := refBag(table, vocab, dim, ids, bounds, w, pad, mode, g)
			closeTo(t, "output", want, ref.Floats(out.(*tensor.Dense)), tol)
			closeTo(t, "table gradient", wantT, ref.Floats(gt), tol)
			if weights {
				gw := ref.FloatTensor(make([]float64, n), []int{n}, dt)
				if err := o.Grads[len(o.Grads)-1].IncrDo(gw, append(in, ref.FloatTensor(g, []int{bags, dim}, dt))...); err != nil {
					t.Fatal(err)
				}
				closeTo(t, "weights gradient", wantW, ref.Floats(gw), tol)
			}
			return
		}
		for _, v := range ref.Floats(gt) {
			if v != 0 {
				t.Fatalf("gradient written on error")
			}
		}
	})
}

// closeTo fails t unless got[i] is within tol × max(1, |want[i]|) of want[i]
// for every i.
func closeTo(t *testing.T, what string, want, got []float64, tol float64) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Abs(want[i]-got[i]) > tol*math.Max(1, math.Abs(want[i])) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// FuzzCollection checks a collection's forward op on three features (two
// of them sharing a table of 5 rows with padding row 4, one of a table of
// 3 rows; modes from the input) and a batch of 2: values near the ranges
// and sometimes out of them, offsets sometimes bad (not starting at 0,
// decreasing, past the values): an error exactly when the input is
// invalid, with the right sentinel, the output buffer untouched; else
// the naive pooling of each feature; the inputs unchanged.
func FuzzCollection(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0, 1, 2, 3, 4, 5, 6, 1, 2, 3, 0, 4, 2})
	f.Add([]byte{2, 2, 0, 1, 1, 1, 1, 1, 1, 9, 0, 4, 4, 1, 7})
	f.Add([]byte{1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		next := func() int {
			if len(b) == 0 {
				return 0
			}
			v := int(b[0])
			b = b[1:]
			return v
		}
		modes := []BagMode{BagSum, BagMean, BagMax}
		g := gorgonia.NewGraph()
		a, _ := NewEmbedding(g, "a", 5, 2, tensor.Float64, WithSparse(), WithPadding(4), WithInit(func(dt tensor.Dtype, s ...int) any {
			v := make([]float64, 10)
			for i := range v {
				v[i] = float64(i*7%11) - 5
			}
			return v
		}))
		c3, _ := NewEmbedding(g, "c", 3, 2, tensor.Float64, WithSparse(), WithInit(func(dt tensor.Dtype, s ...int) any {
			return []float64{1, -2, 3, -4, 5, -6}
		}))
		feats := []Feature{{Key: "x", Table: a, Mode: modes[next()%3]}, {Key: "y", Table: c3, Mode: modes[next()%3]}, {Key: "z", Table: a, Mode: modes[next()%3]}}
		coll, err := NewCollection(feats, CollectionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		const batch = 2
		n := next() % 9
		values := make([]int64, n)
		for i := range values {
			values[i] = int64(next()%8) - 1 // [-1, 6]
		}
		offsets := make([]int64, 3*batch+1)
		for i := 1; i < len(offsets); i++ {
			offsets[i] = offsets[i-1] + int64(next()%3)
			if next()%17 == 0 {
				offsets[i] -= 2 // sometimes decreasing
			}
		}
		if next()%13 == 0 {
			offsets[0] = 1
		}
		vt := tensor.New(tensor.WithShape(n), tensor.WithBacking(append([]int64{}, values...)))
		ot := tensor.New(tensor.WithShape(len(offsets)), tensor.WithBacking(append([]int64{}, offsets...)))
		vn := gorgonia.NewVector(g, tensor.Int64, gorgonia.WithShape(n), gorgonia.WithName("v"), gorgonia.WithValue(vt))
		on := gorgonia.NewVector(g, tensor.Int64, gorgonia.WithShape(len(offsets)), gorgonia.WithName("o"), gorgonia.WithValue(ot))
		out, err := coll.Bag(vn, on, nil)
		if err != nil {
			t.Fatal(err)
		}
		op := out.Op().(*collectionOp)
		buf := tensor.New(tensor.WithShape(batch, 6), tensor.WithBacking([]float64{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}))
		tap := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(batch, 6))
		got, err := op.UsePreallocDo(buf, vt, ot, tap)

		// The reference: which input is bad, and the pooling.
		badOffsets := offsets[0] != 0 || offsets[len(offsets)-1] > int64(n)
		for i := 1; i < len(offsets); i++ {
			badOffsets = badOffsets || offsets[i] < offsets[i-1]
		}
		if badOffsets {
			if !errors.Is(err, gather.ErrShape) {
				t.Fatalf("offsets %v of %d values: want ErrShape, got %v", offsets, n, err)
			}
		} else {
			aw, _ := a.Home().(Weights).Weight()
			tables := [][]float64{ref.Floats(aw), {1, -2, 3, -4, 5, -6}}
			vocab := []int{5, 3}
			want := make([]float64, batch*6)
			badID := false
			for k, f := range feats {
				tab := tables[min(k%2, 1)]
				for s := range batch {
					lo, hi := offsets[k*batch+s], offsets[k*batch+s+1]
					var rows [][]float64
					for _, id := range values[lo:hi] {
						if id < 0 || id >= int64(vocab[k%2]) {
							badID = true
							continue
						}
						if k%2 == 0 && id == 4 {
							continue // padding
						}
						rows = append(rows, tab[id*2:id*2+2])
					}
					for d := range 2 {
						v := 0.0
						for r, row := range rows {
							switch {
							case f.Mode == BagMax && (r == 0 || row[d] > v):
								v = row[d]
							case f.Mode != BagMax:
								v += row[d]
							}
						}
						if f.Mode == BagMean && len(rows) > 0 {
							v *= 1 / float64(len(rows))
						}
						want[s*6+k*2+d] = v
					}
				}
			}
			var ie *gather.IndexError
			switch {
			case badID && !errors.As(err, &ie):
				t.Fatalf("values %v offsets %v: want an IndexError, got %v", values, offsets, err)
			case !badID && err != nil:
				t.Fatalf("values %v offsets %v: %v", values, offsets, err)
			case !badID:
				for i, v := range ref.Floats(got.(*tensor.Dense)) {
					if math.Abs(v-want[i]) > 1e-12 {
						t.Fatalf("values %v offsets %v: output %v, want %v", values, offsets, ref.Floats(got.(*tensor.Dense)), want)
					}
				}
			}
		}
		if err != nil {
			for _, v := range buf.Float64s() {
				if v != 7 {
					t.Fatalf("output written on error: %v", buf.Float64s())
				}
			}
		}
		if !slices.Equal(vt.Int64s(), values) || !slices.Equal(ot.Int64s(), offsets) {
			t.Fatal("inputs modified")
		}
	})
}
