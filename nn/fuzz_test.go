package nn

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/dense"
)

var indexDtypes = []tensor.Dtype{tensor.Int, tensor.Int32, tensor.Int64}

// FuzzCrossEntropy checks the loss op and its gradient op on logits of
// rows × classes (0 to 5 each) with targets near the range and sometimes
// extreme: an error exactly when a target is out of [-classes, classes-1],
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
		xt := floatTensor(x, []int{r, c}, tensor.Float64)
		yt := castIndices(y, []int{r}, it)
		o := &crossEntropyOp{dtype: tensor.Float64, targetType: it, shape: tensor.Shape{r, c}}
		bad := -1
		for i, v := range y {
			if v < -int64(c) || v >= int64(c) {
				bad = i
				break
			}
		}
		loss, err := o.Do(xt, yt)
		grad := floatTensor(make([]float64, r*c), []int{r, c}, tensor.Float64)
		for i := range grad.Float64s() {
			grad.Float64s()[i] = 7
		}
		gerr := (&crossEntropyDiffOp{o}).IncrDo(grad, xt, yt, loss)
		if bad >= 0 {
			var ie *gather.IndexError
			if !errors.As(err, &ie) || ie.Pos[0] != bad || ie.Value != y[bad] || ie.Size != c {
				t.Fatalf("targets %v: want an gather.IndexError at %d, got %v", y, bad, err)
			}
			if !errors.Is(gerr, gather.ErrIndexOutOfRange) {
				t.Fatalf("gradient: want gather.ErrIndexOutOfRange, got %v", gerr)
			}
			for _, g := range floats(grad) {
				if g != 7 {
					t.Fatalf("gradient buffer written on error: %v", floats(grad))
				}
			}
		} else {
			if err != nil || gerr != nil {
				t.Fatalf("targets %v: unexpected errors %v, %v", y, err, gerr)
			}
			got, _ := dense.Scalar("loss", loss)
			if r == 0 {
				if !math.IsNaN(got) {
					t.Fatalf("empty batch: loss %v, want NaN", got)
				}
			} else {
				want, wantGrad := refCrossEntropy(x, y, c)
				if math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want)) {
					t.Fatalf("loss %v, want %v", got, want)
				}
				for i, g := range floats(grad) {
					if w := 7 + got*wantGrad[i]; math.Abs(g-w) > 1e-12*math.Max(1, math.Abs(w)) {
						t.Fatalf("gradient[%d] = %v, want %v", i, g, w)
					}
				}
			}
		}
		for i, v := range floats(xt) {
			if v != x[i] {
				t.Fatalf("logits modified at %d", i)
			}
		}
	})
}

var floatDtypes = []tensor.Dtype{tensor.Float64, tensor.Float32}
