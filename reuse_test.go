package gather

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/ref"
)

// Take and TakeAlongAxis write into a caller's buffer with
// tensor.WithReuse and add into it with tensor.WithIncr; a buffer that
// does not fit is an error, never replaced by a new tensor, and a failed
// call leaves it unchanged.
func TestReuseAndIncr(t *testing.T) {
	data := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}))
	idx := tensor.New(tensor.WithShape(2), tensor.WithBacking([]int64{2, -3}))
	out := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(2, 2))
	got, err := Take(data, idx, 0, tensor.WithReuse(out))
	require.NoError(t, err)
	assert.Same(t, out, got)
	assert.Equal(t, []float64{5, 6, 1, 2}, out.Float64s())
	got, err = Take(data, idx, 0, tensor.WithIncr(out))
	require.NoError(t, err)
	assert.Same(t, out, got)
	assert.Equal(t, []float64{10, 12, 2, 4}, out.Float64s())

	eidx := tensor.New(tensor.WithShape(3, 1), tensor.WithBacking([]int32{1, 0, -1}))
	eout := tensor.New(tensor.WithShape(3, 1), tensor.WithBacking([]float64{100, 100, 100}))
	got, err = TakeAlongAxis(data, eidx, 1, tensor.WithIncr(eout))
	require.NoError(t, err)
	assert.Same(t, eout, got)
	assert.Equal(t, []float64{102, 103, 106}, eout.Float64s())
	got, err = TakeAlongAxis(data, eidx, 1, tensor.WithReuse(eout))
	require.NoError(t, err)
	assert.Equal(t, []float64{2, 3, 6}, got.Float64s())

	ints := tensor.New(tensor.WithShape(3), tensor.WithBacking([]int32{7, 8, 9}))
	iout := tensor.New(tensor.WithShape(2), tensor.WithBacking([]int32{1, 1}))
	_, err = Take(ints, idx, 0, tensor.WithIncr(iout))
	require.NoError(t, err)
	assert.Equal(t, []int32{10, 8}, iout.Int32s())

	view, err := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(4, 2)).Slice(tensor.S(0, 2))
	require.NoError(t, err)
	strs := tensor.New(tensor.WithShape(3), tensor.WithBacking([]string{"a", "b", "c"}))
	cases := []struct {
		name string
		call func() (*tensor.Dense, error)
		want error
		msg  string
	}{
		{"shape (2, 1) for (2)", func() (*tensor.Dense, error) {
			return Take(tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{1, 2, 3})), idx, 0,
				tensor.WithReuse(tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(2, 1))))
		}, ErrShape, "gather: the output has shape (2, 1), the result (2)"},
		{"shape (1, 4) for (2, 2)", func() (*tensor.Dense, error) {
			return Take(data, idx, 0, tensor.WithReuse(tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(1, 4))))
		}, ErrShape, "gather: the output has shape (1, 4), the result (2, 2)"},
		{"dtype", func() (*tensor.Dense, error) {
			return Take(data, idx, 0, tensor.WithReuse(tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(2, 2))))
		}, ErrDtype, "gather: the output is float32, the result float64"},
		{"view", func() (*tensor.Dense, error) {
			return Take(data, idx, 0, tensor.WithReuse(view))
		}, ErrShape, "gather: the output of shape (2, 2) must be a row-major tensor that is not a view"},
		{"overlaps data", func() (*tensor.Dense, error) {
			return TakeAlongAxis(data, tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]int{0, 0, 0, 0, 0, 0})), 1, tensor.WithIncr(data))
		}, ErrShape, "gather_elements: the output of shape (3, 2) shares memory with an input"},
		{"both options", func() (*tensor.Dense, error) {
			return Take(data, idx, 0, tensor.WithReuse(out), tensor.WithIncr(out))
		}, ErrOption, "gather: tensor.WithReuse and tensor.WithIncr given together; give one"},
		{"unsafe", func() (*tensor.Dense, error) { return Take(data, idx, 0, tensor.UseUnsafe()) },
			ErrOption, "gather: only tensor.WithReuse and tensor.WithIncr apply"},
		{"incr of strings", func() (*tensor.Dense, error) {
			return Take(strs, idx, 0, tensor.WithIncr(tensor.New(tensor.Of(tensor.String), tensor.WithShape(2))))
		}, ErrDtype, "gather: cannot add string values into the output"},
		{"not a Dense", func() (*tensor.Dense, error) {
			var d *tensor.Dense
			return Take(data, idx, 0, tensor.WithReuse(d))
		}, ErrDtype, "gather: the output must be a *tensor.Dense"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.call()
			require.ErrorIs(t, err, c.want)
			assert.Contains(t, err.Error(), c.msg)
			assert.Nil(t, got)
		})
	}

	// An index out of range: the buffer is unchanged, with either option.
	bad := tensor.New(tensor.WithShape(2), tensor.WithBacking([]int64{0, 3}))
	for _, opt := range []func(tensor.Tensor) tensor.FuncOpt{tensor.WithReuse, tensor.WithIncr} {
		buf := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{-1, -1, -1, -1}))
		_, err := Take(data, bad, 0, opt(buf))
		var ie *IndexError
		require.True(t, errors.As(err, &ie))
		assert.Equal(t, []int{1}, ie.Pos)
		assert.Equal(t, []float64{-1, -1, -1, -1}, buf.Float64s())
	}
}

// The reuse and incr paths allocate nothing once the option is made.
func TestReuseAndIncrAllocateNothing(t *testing.T) {
	data := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(100, 16))
	idx := ref.CastIndices(ref.RandIndices(newRand(1), 64, 100), []int{64}, tensor.Int64)
	out := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(64, 16))
	eidx := ref.CastIndices(ref.RandIndices(newRand(2), 100*16, 16), []int{100, 16}, tensor.Int32)
	eout := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(100, 16))
	reuse, incr := tensor.WithReuse(out), tensor.WithIncr(out)
	ereuse, eincr := tensor.WithReuse(eout), tensor.WithIncr(eout)
	for name, f := range map[string]func() error{
		"Take WithReuse": func() error { _, err := Take(data, idx, 0, reuse); return err },
		"Take WithIncr":  func() error { _, err := Take(data, idx, 0, incr); return err },
		"TakeAlongAxis WithReuse": func() error {
			_, err := TakeAlongAxis(data, eidx, 1, ereuse)
			return err
		},
		"TakeAlongAxis WithIncr": func() error {
			_, err := TakeAlongAxis(data, eidx, 1, eincr)
			return err
		},
	} {
		allocs := testing.AllocsPerRun(50, func() {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		})
		assert.Zero(t, allocs, name)
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }
