package gather

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/ref"
)

// The fuzz targets decode a case from bytes: ranks and dimensions (0 to 4,
// so zero-size tensors occur), an axis that may be out of range, an index
// dtype, and index values that are mostly near the valid range and
// sometimes extreme. The top bits of the rank byte ask for float32 data
// and for a large case: the first dimensions scaled by 48 (indices by 256)
// and the last by 16, so that rows fill the assembly's 32-byte moves, the
// row kernels prefetch and large calls run in parallel; its indices are
// drawn in range from a generator the bytes seed, with at most one out of
// range where a byte puts it. Each target checks that the call does not panic, that
// it fails exactly when the naive reference says the input is invalid and
// with the right sentinel, that otherwise it equals the reference, and that
// the inputs are unchanged.

// fuzzCase is a decoded case.
type fuzzCase struct {
	dshape, ishape []int
	axis           int
	dtype          tensor.Dtype // of the indices
	ftype          tensor.Dtype // of the data: Float64, or Float32
	idx            []int64
}

// decodeCase reads a case from b; elementsRank makes indices have the
// data's rank (GatherElements).
func decodeCase(b []byte, elementsRank bool) fuzzCase {
	next := func() byte {
		if len(b) == 0 {
			return 0
		}
		x := b[0]
		b = b[1:]
		return x
	}
	c := fuzzCase{ftype: tensor.Float64}
	head := next()
	rank := 1 + int(head&0x3f)%5
	large := head&0x40 != 0
	if head&0x80 != 0 {
		c.ftype = tensor.Float32
	}
	c.dshape = make([]int, rank)
	for d := range c.dshape {
		c.dshape[d] = int(next()) % 5
	}
	c.axis = int(int8(next())) % 7 // -6..6: some out of range
	c.dtype = indexDtypes[int(next())%len(indexDtypes)]
	qrank := int(next()) % 4
	if elementsRank {
		qrank = rank
	}
	c.ishape = make([]int, qrank)
	for d := range c.ishape {
		c.ishape[d] = int(next()) % 5
	}
	if large {
		c.scale(elementsRank)
	}
	n := tensor.Shape(c.ishape).TotalSize()
	ax := c.axis
	if ax < 0 {
		ax += rank
	}
	s := 0
	if ax >= 0 && ax < rank {
		s = c.dshape[ax]
	}
	c.idx = make([]int64, n)
	if large && s > 0 {
		seed := uint64(next())<<8 | uint64(next())
		r := rand.New(rand.NewPCG(seed, uint64(n)))
		for i := range c.idx {
			c.idx[i] = int64(r.IntN(2*s) - s)
		}
		if bad := next(); bad < 64 && n > 0 {
			c.idx[int(bad)*n/64] = int64(s + int(bad)) // one index out of range
		}
		return c
	}
	for i := range c.idx {
		switch mode := next(); {
		case mode < 200: // near the range: [-s-1, s]
			c.idx[i] = int64(int(next())%(2*s+2) - s - 1)
		case len(b) >= 8: // anything, extremes included
			c.idx[i] = int64(binary.LittleEndian.Uint64(b))
			b = b[8:]
		default:
			c.idx[i] = math.MinInt64 + int64(mode)
		}
	}
	// Int32 indices hold only int32 values.
	if c.dtype == tensor.Int32 {
		for i, v := range c.idx {
			c.idx[i] = int64(int32(v))
		}
	}
	return c
}

// scale makes c a large case (see the top of the file), unless that would
// give more than 1<<16 data or 1<<17 output elements.
func (c *fuzzCase) scale(elementsRank bool) {
	d, ix := slices.Clone(c.dshape), slices.Clone(c.ishape)
	d[0] *= 48
	d[len(d)-1] *= 16
	if elementsRank {
		ix[0] *= 48
		ix[len(ix)-1] *= 16
	} else if len(ix) > 0 {
		ix[0] *= 256
	}
	out := tensor.Shape(ix).TotalSize()
	if ax := (c.axis + len(d)) % len(d); !elementsRank && ax >= 0 {
		for k, v := range d { // Gather's output: every axis of data but ax
			if k != ax {
				out *= v
			}
		}
	}
	if tensor.Shape(d).TotalSize() > 1<<16 || out > 1<<17 {
		return
	}
	c.dshape, c.ishape = d, ix
}

// wantErr is the naive reference's verdict on a case: nil if valid, else
// the sentinel the operation must return, checked in the operation's order
// (axis, shapes, index values).
func (c fuzzCase) wantErr(kind operator) error {
	r := len(c.dshape)
	if c.axis < -r || c.axis >= r {
		return ErrAxisOutOfRange
	}
	ax := (c.axis + r) % r
	if kind == opGatherElements {
		if len(c.ishape) != r {
			return ErrShape
		}
		for d := range c.dshape {
			if d != ax && c.ishape[d] > c.dshape[d] {
				return ErrShape
			}
		}
	}
	s := int64(c.dshape[ax])
	for _, v := range c.idx {
		if v < -s || v >= s {
			return ErrIndexOutOfRange
		}
	}
	return nil
}

func (c fuzzCase) data() ([]float64, *tensor.Dense) {
	v := make([]float64, tensor.Shape(c.dshape).TotalSize())
	for i := range v {
		v[i] = float64(i) + 0.5 // exact in float32 too
	}
	return v, ref.FloatTensor(v, c.dshape, c.ftype)
}

func checkErr(t *testing.T, want, got error) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Fatalf("unexpected error: %v", got)
		}
		return
	}
	if !errors.Is(got, want) {
		t.Fatalf("want an error wrapping %q, got %v", want, got)
	}
}

// fuzzSeeds are cases from the table tests, encoded for decodeCase.
var fuzzSeeds = [][]byte{
	{1, 4, 0, 2, 1, 2, 0, 3, 0, 1, 0, 6},                  // vector data, vector indices
	{2, 3, 2, 0, 0, 2, 2, 2, 0, 1, 0, 0, 0, 4, 0, 2},      // matrix, 2-d indices
	{3, 2, 3, 4, 255, 1, 0, 0, 5},                         // rank 3, axis -1, scalar index
	{2, 0, 2, 0, 2, 1, 1, 0, 1},                           // empty axis, one index
	{2, 3, 2, 1, 1, 2, 2, 2, 200, 1, 2, 3, 4, 5, 6, 7, 8}, // extreme index
	{4, 2, 1, 2, 3, 250, 0, 3, 2, 1, 2, 3, 0, 1, 0, 2, 0}, // rank 4, axis out of range
	{5, 1, 2, 1, 2, 1, 4, 1, 1, 2, 1, 2, 1, 0, 3, 0, 1},   // rank 5
	// Large cases (see scale): float32 rows of 64 with 1,024 indices, one
	// out of range; float64, rank 3 on the middle axis; float32 rank 2 on
	// axis 1, every index in range.
	{0xc1, 4, 4, 0, 2, 1, 4, 7, 9, 30},
	{0x42, 2, 3, 4, 1, 1, 0, 2, 2, 2, 5, 200},
	{0xc1, 4, 4, 1, 0, 2, 4, 4, 1, 2, 255},
}

func FuzzTake(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := decodeCase(b, false)
		vals, data := c.data()
		indices := ref.CastIndices(c.idx, c.ishape, c.dtype)
		idxBefore := indices.Clone().(*tensor.Dense)
		got, err := Take(data, indices, c.axis)
		want := c.wantErr(opGather)
		checkErr(t, want, err)
		var expected []float64
		var oshape []int
		if want == nil {
			expected, oshape = ref.Take(vals, c.dshape, c.idx, c.ishape, (c.axis+len(c.dshape))%len(c.dshape))
			requireSameTensor(t, ref.FloatTensor(expected, oshape, c.ftype), got)
		} else if !errors.Is(want, ErrAxisOutOfRange) {
			ax := (c.axis + len(c.dshape)) % len(c.dshape)
			oshape = append(append(append([]int{}, c.dshape[:ax]...), c.ishape...), c.dshape[ax+1:]...)
		}
		fuzzInto(t, Take, data, indices, c.axis, want, expected, oshape)
		requireSameTensor(t, ref.FloatTensor(vals, c.dshape, c.ftype), data)
		requireSameTensor(t, idxBefore, indices)
	})
}

func FuzzTakeAlongAxis(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := decodeCase(b, len(b) > 0 && b[len(b)-1]%4 != 0) // usually the right rank
		vals, data := c.data()
		indices := ref.CastIndices(c.idx, c.ishape, c.dtype)
		idxBefore := indices.Clone().(*tensor.Dense)
		got, err := TakeAlongAxis(data, indices, c.axis)
		want := c.wantErr(opGatherElements)
		checkErr(t, want, err)
		var expected []float64
		if want == nil {
			expected = ref.TakeAlong(vals, c.dshape, c.idx, c.ishape, (c.axis+len(c.dshape))%len(c.dshape))
			requireSameTensor(t, ref.FloatTensor(expected, c.ishape, c.ftype), got)
		}
		if want == nil || errors.Is(want, ErrIndexOutOfRange) {
			fuzzInto(t, TakeAlongAxis, data, indices, c.axis, want, expected, c.ishape)
		}
		requireSameTensor(t, ref.FloatTensor(vals, c.dshape, c.ftype), data)
		requireSameTensor(t, idxBefore, indices)
	})
}

// fuzzInto runs take (Take or TakeAlongAxis) into a caller's buffer of
// the output's shape oshape (nil when no shape is valid): with
// tensor.WithReuse into a buffer of NaN, with tensor.WithIncr into one of
// 1s. It must fail exactly as the new-output call did (want), leaving the
// buffer unchanged, or give expected (WithReuse) and expected+1 (WithIncr).
func fuzzInto(t *testing.T, take func(data, indices tensor.Tensor, axis int, opts ...tensor.FuncOpt) (*tensor.Dense, error),
	data, indices *tensor.Dense, axis int, want error, expected []float64, oshape []int) {
	t.Helper()
	if oshape == nil {
		return
	}
	n := tensor.Shape(oshape).TotalSize()
	for _, incr := range []bool{false, true} {
		fill, opt := math.NaN(), tensor.WithReuse
		if incr {
			fill, opt = 1, tensor.WithIncr
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = fill
		}
		out := ref.FloatTensor(v, oshape, data.Dtype())
		before := out.Clone().(*tensor.Dense)
		got, err := take(data, indices, axis, opt(out))
		checkErr(t, want, err)
		if want != nil {
			was := ref.Floats(before)
			for i, x := range ref.Floats(out) {
				if y := was[i]; x != y && !(math.IsNaN(x) && math.IsNaN(y)) {
					t.Fatalf("incr=%v: buffer written at %d on error", incr, i)
				}
			}
			continue
		}
		if got != out {
			t.Fatalf("incr=%v: the result is not the buffer", incr)
		}
		for i, x := range ref.Floats(out) {
			w := expected[i]
			if incr {
				w++
			}
			if x != w {
				t.Fatalf("incr=%v: element %d is %v, want %v", incr, i, x, w)
			}
		}
	}
}

// fuzzBackward runs IndexAdd or ScatterAdd into a destination holding 1s,
// with an upstream gradient of small integers (so sums are exact), and
// compares with the reference; on error the destination must be unchanged.
func fuzzBackward(t *testing.T, kind operator, b []byte, elementsRank bool) {
	c := decodeCase(b, elementsRank)
	want := c.wantErr(kind)
	r := len(c.dshape)
	oshape := tensor.Shape(c.ishape)
	if kind == opGather && !errors.Is(want, ErrAxisOutOfRange) {
		oshape, _ = gatherShape("gather", nil, c.dshape, c.ishape, (c.axis+r)%r)
	}
	up := make([]float64, tensor.Shape(oshape).TotalSize())
	for i := range up {
		up[i] = float64(i%7 - 3)
	}
	src := ref.FloatTensor(up, oshape, c.ftype)
	ones := make([]float64, tensor.Shape(c.dshape).TotalSize())
	for i := range ones {
		ones[i] = 1
	}
	dst := ref.FloatTensor(ones, c.dshape, c.ftype)
	indices := ref.CastIndices(c.idx, c.ishape, c.dtype)
	idxBefore, srcBefore := indices.Clone().(*tensor.Dense), src.Clone().(*tensor.Dense)
	var err error
	if kind == opGather {
		err = IndexAdd(dst, indices, src, c.axis)
	} else {
		err = ScatterAdd(dst, indices, src, c.axis)
	}
	checkErr(t, want, err)
	got := ref.Floats(dst)
	if want != nil {
		for i, v := range got {
			if v != 1 {
				t.Fatalf("a failed call changed the destination at %d: %v", i, v)
			}
		}
	} else {
		var expected []float64
		if kind == opGather {
			expected = ref.IndexAdd(c.dshape, c.idx, c.ishape, (c.axis+r)%r, up)
		} else {
			expected = ref.ScatterAdd(c.dshape, c.idx, c.ishape, (c.axis+r)%r, up)
		}
		for i := range expected {
			if got[i] != expected[i]+1 {
				t.Fatalf("element %d: got %v, want %v", i, got[i], expected[i]+1)
			}
		}
	}
	requireSameTensor(t, idxBefore, indices)
	requireSameTensor(t, srcBefore, src)
}

func FuzzIndexAdd(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) { fuzzBackward(t, opGather, b, false) })
}

func FuzzScatterAdd(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) { fuzzBackward(t, opGatherElements, b, len(b) > 0 && b[len(b)-1]%4 != 0) })
}
