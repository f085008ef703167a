package gather

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// New outputs come from memory that is not cleared. With poisonOutputs set
// it holds NaN (or -1), so every element that Take, TakeAlongAxis or the
// gradient op's Do fails to write shows up as a difference from the
// reference, serial and parallel, on every dtype newOutput hands out.
func TestNewOutputsAreFullyWritten(t *testing.T) {
	poisonOutputs = true
	t.Cleanup(func() { poisonOutputs = false })
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))

	f := fresh[float32](3)
	require.True(t, math.IsNaN(float64(f[0])) && math.IsNaN(float64(f[2])), "poisoning is off: %v", f)

	r := rand.New(rand.NewPCG(21, 22))
	cases := []struct {
		name           string
		kind           string
		dshape, ishape []int
		axis           int
	}{
		{"gather rows", opGather, []int{40, 3}, []int{7}, 0},
		{"gather rows, parallel", opGather, []int{300, 64}, []int{1024}, 0},
		{"gather middle, parallel", opGather, []int{16, 50, 32}, []int{2, 40}, 1},
		{"gather last", opGather, []int{5, 6}, []int{4}, -1},
		{"gather last, parallel", opGather, []int{600, 90}, []int{70}, 1},
		{"gather scalar index", opGather, []int{6, 4}, []int{}, 0},
		{"elements axis 1", opGatherElements, []int{5, 9}, []int{5, 4}, 1},
		{"elements axis 1, parallel, fewer rows", opGatherElements, []int{300, 100}, []int{256, 200}, 1},
		{"elements axis 0, parallel, fewer columns", opGatherElements, []int{50, 600}, []int{100, 512}, 0},
		{"elements rank 3, parallel", opGatherElements, []int{8, 40, 128}, []int{8, 50, 100}, 1},
	}
	for _, c := range cases {
		ax := (c.axis + len(c.dshape)) % len(c.dshape)
		data := randFloats(r, tensor.Shape(c.dshape).TotalSize())
		idx := randIndices(r, max(tensor.Shape(c.ishape).TotalSize(), 1), c.dshape[ax])
		indices := castIndices(idx, c.ishape, tensor.Int64)
		var oshape []int
		var wantOut []float64
		if c.kind == opGather {
			wantOut, oshape = refTake(data, c.dshape, idx, c.ishape, ax)
		} else {
			wantOut, oshape = refTakeAlong(data, c.dshape, idx, c.ishape, ax), c.ishape
		}
		up := randFloats(r, tensor.Shape(oshape).TotalSize())
		var wantGrad []float64
		if c.kind == opGather {
			wantGrad = refIndexAdd(c.dshape, idx, c.ishape, ax, up)
		} else {
			wantGrad = refScatterAdd(c.dshape, idx, c.ishape, ax, up)
		}
		for _, procs := range []int{1, 2} {
			runtime.GOMAXPROCS(procs)
			for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
				t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
					d := floatTensor(data, c.dshape, dt)
					out, err := forward(c.kind, d, indices, c.axis, nil)
					require.NoError(t, err)
					require.Equal(t, wantOut, floats(out), "GOMAXPROCS=%d: forward", procs)

					diff := &diffOp{fwd: &op{kind: c.kind, axis: ax, dataType: dt, dataShape: c.dshape, cfg: newConfig(nil)}}
					g, err := diff.Do(indices, floatTensor(up, oshape, dt))
					require.NoError(t, err)
					require.InDeltaSlice(t, wantGrad, floats(g.(*tensor.Dense)), 1e-9, "GOMAXPROCS=%d: gradient", procs)
				})
			}
			t.Run(c.name+"/int64 data", func(t *testing.T) {
				ints := make([]int64, len(data))
				for i, x := range data {
					ints[i] = int64(x * 4) // non-negative, so never the poison -1
				}
				d := tensor.New(tensor.WithShape(c.dshape...), tensor.WithBacking(ints))
				out, err := forward(c.kind, d, indices, c.axis, nil)
				require.NoError(t, err)
				for i, x := range out.Data().([]int64) {
					require.Equal(t, int64(wantOut[i]*4), x, "GOMAXPROCS=%d: forward at %d", procs, i)
				}
			})
		}
	}
}
