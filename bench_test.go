package gather

import (
	"math/rand/v2"
	"sync"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/ref"
)

// benchCase is one row of bench/bench_cases.md: float32 data,
// int64 indices drawn uniformly over [0, s), fixed seed.
type benchCase struct {
	name   string
	kind   operator
	dshape []int
	ishape []int
	axis   int
}

var benchCases = []benchCase{
	{"emb_50k_128", opGather, []int{50000, 128}, []int{16384}, 0},
	{"emb_1m_64", opGather, []int{1000000, 64}, []int{65536}, 0},
	{"axis1", opGather, []int{64, 1000, 64}, []int{512}, 1},
	{"elem_axis1", opGatherElements, []int{1024, 1024}, []int{1024, 256}, 1},
	{"elem_axis0", opGatherElements, []int{1024, 1024}, []int{256, 1024}, 0},
}

// benchData holds the tensors of a case.
type benchData struct {
	data, indices, grad *tensor.Dense
	oshape              tensor.Shape
	outBytes, idxBytes  int64 // bytes of the output and of the indices
	dataBytes           int64
}

func (c benchCase) make() benchData {
	r := rand.New(rand.NewPCG(1, uint64(len(c.name))))
	n := tensor.Shape(c.dshape).TotalSize()
	d := make([]float32, n)
	for i := range d {
		d[i] = float32(r.NormFloat64())
	}
	ni := tensor.Shape(c.ishape).TotalSize()
	idx := make([]int64, ni)
	for i := range idx {
		idx[i] = int64(r.IntN(c.dshape[c.axis]))
	}
	var oshape tensor.Shape
	if c.kind == opGather {
		oshape, _ = gatherShape("gather", nil, c.dshape, c.ishape, c.axis)
	} else {
		oshape = tensor.Shape(c.ishape).Clone()
	}
	g := make([]float32, oshape.TotalSize())
	for i := range g {
		g[i] = float32(r.NormFloat64())
	}
	return benchData{
		data:      tensor.New(tensor.WithShape(c.dshape...), tensor.WithBacking(d)),
		indices:   tensor.New(tensor.WithShape(c.ishape...), tensor.WithBacking(idx)),
		grad:      tensor.New(tensor.WithShape(oshape...), tensor.WithBacking(g)),
		oshape:    oshape,
		outBytes:  int64(4 * oshape.TotalSize()),
		idxBytes:  int64(8 * ni),
		dataBytes: int64(4 * n),
	}
}

// BenchmarkCases measures the public forward (a new output per call) and
// the dense backward into a buffer shaped like data that is cleared on
// every call, as the gradient op does when Gorgonia hands it last run's
// buffer. Bytes: forward reads the gathered data and the indices and writes
// the output; backward clears data-sized memory, reads the upstream
// gradient and the indices and reads and writes the gathered destinations.
// Each sub-benchmark calls its op before the timer starts, as the PyTorch
// peer does (fwd until the collector is steady; see steady), so that no
// timed call pays for the first touch of a buffer's memory.
func BenchmarkCases(b *testing.B) {
	for _, c := range benchCases {
		// Made on first use, so that a run filtered to one case makes
		// only its data.
		get := sync.OnceValue(c.make)
		b.Run(c.name+"/fwd", func(b *testing.B) {
			d := get()
			fwd := func() {
				var err error
				if c.kind == opGather {
					_, err = Take(d.data, d.indices, c.axis)
				} else {
					_, err = TakeAlongAxis(d.data, d.indices, c.axis)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			ref.Steady(fwd)
			b.SetBytes(2*d.outBytes + d.idxBytes)
			for b.Loop() {
				fwd()
			}
		})
		// The same forward into a buffer reused from the last call
		// (tensor.WithReuse), against PyTorch's out= calls.
		b.Run(c.name+"/fwd-reuse", func(b *testing.B) {
			d := get()
			buf := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(d.oshape...))
			reuse := tensor.WithReuse(buf)
			fwd := func() {
				var err error
				if c.kind == opGather {
					_, err = Take(d.data, d.indices, c.axis, reuse)
				} else {
					_, err = TakeAlongAxis(d.data, d.indices, c.axis, reuse)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			// One untimed call first, as the PyTorch peer makes: it pays
			// for the first touch of buf's pages, which a reused buffer
			// has had long before.
			fwd()
			b.SetBytes(2*d.outBytes + d.idxBytes)
			for b.Loop() {
				fwd()
			}
		})
		b.Run(c.name+"/bwd", func(b *testing.B) {
			d := get()
			_, diff := testOps(b, c.kind, c.axis, tensor.Float32, c.dshape, d.indices.Shape())
			buf := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(c.dshape...))
			// One untimed call first, as for fwd-prealloc.
			if _, err := diff.UsePreallocDo(buf, d.data, d.indices, d.grad); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(d.dataBytes + 3*d.outBytes + d.idxBytes)
			for b.Loop() {
				if _, err := diff.UsePreallocDo(buf, d.data, d.indices, d.grad); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBaselines measures, on the same shapes in the same run: copy of
// the output's bytes (the bandwidth ceiling for the forward pass),
// Gorgonia's own ByIndices/ByIndicesB where they give correct results (the
// axis-0 embedding cases), and naive per-element loops.
func BenchmarkBaselines(b *testing.B) {
	for _, c := range benchCases {
		// Made on first use, so that a run filtered to one case makes
		// only its data.
		get := sync.OnceValue(c.make)
		// Allocating a tensor of the output's size: the floor under a
		// forward that returns a new tensor.
		b.Run(c.name+"/alloc", func(b *testing.B) {
			d := get()
			alloc := func() { allocSink = tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(d.oshape...)) }
			ref.Steady(alloc)
			for b.Loop() {
				alloc()
			}
		})
		// The output's bytes copied into new memory the runtime does not
		// clear (kernel.Uninit, as Take's new outputs are), the collector
		// steady: the floor under a forward that returns a new tensor,
		// which lies where the collector last freed, not in the cache.
		b.Run(c.name+"/new-copy", func(b *testing.B) {
			d := get()
			src := make([]float32, d.oshape.TotalSize())
			fresh := func() {
				dst := kernel.Uninit[float32](len(src))
				copy(dst, src)
				newSink = dst
			}
			ref.Steady(fresh)
			b.SetBytes(2 * d.outBytes)
			for b.Loop() {
				fresh()
			}
		})
		b.Run(c.name+"/copy", func(b *testing.B) {
			d := get()
			src := make([]float32, d.oshape.TotalSize())
			dst := make([]float32, len(src))
			copy(dst, src) // untimed, as in BenchmarkCases
			b.SetBytes(2 * d.outBytes)
			for b.Loop() {
				copy(dst, src)
			}
		})
		if c.kind == opGather && c.axis == 0 {
			intIndices := sync.OnceValue(func() *tensor.Dense {
				d := get()
				ints := make([]int, d.indices.Shape().TotalSize())
				for i, v := range d.indices.Int64s() {
					ints[i] = int(v)
				}
				return tensor.New(tensor.WithShape(len(ints)), tensor.WithBacking(ints))
			})
			b.Run(c.name+"/ByIndices", func(b *testing.B) {
				d := get()
				idx := intIndices()
				b.SetBytes(2*d.outBytes + d.idxBytes)
				for b.Loop() {
					if _, err := tensor.ByIndices(d.data, idx, c.axis); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(c.name+"/ByIndicesB", func(b *testing.B) {
				d := get()
				idx := intIndices()
				b.SetBytes(d.dataBytes + 3*d.outBytes + d.idxBytes)
				for b.Loop() {
					if _, err := tensor.ByIndicesB(d.data, d.grad, idx, c.axis); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(c.name+"/naive-fwd", func(b *testing.B) {
			d := get()
			out := make([]float32, d.oshape.TotalSize())
			naiveForward(c, d, out) // untimed, as in BenchmarkCases
			b.SetBytes(2*d.outBytes + d.idxBytes)
			for b.Loop() {
				naiveForward(c, d, out)
			}
		})
		b.Run(c.name+"/naive-bwd", func(b *testing.B) {
			d := get()
			dst := make([]float32, d.data.Shape().TotalSize())
			naiveBackward(c, d, dst) // untimed, as in BenchmarkCases
			b.SetBytes(d.dataBytes + 3*d.outBytes + d.idxBytes)
			for b.Loop() {
				clear(dst)
				naiveBackward(c, d, dst)
			}
		})
	}
}

var allocSink *tensor.Dense

// newSink keeps the last new-copy baseline's output reachable.
var newSink []float32

// naiveForward is the textbook loop over output elements, one offset
// computation per element.
func naiveForward(c benchCase, d benchData, out []float32) {
	data, idx := d.data.Float32s(), d.indices.Int64s()
	outer, s, inner := split(c.dshape, c.axis)
	if c.kind == opGather {
		n := len(idx)
		for o := 0; o < outer; o++ {
			for i := 0; i < n; i++ {
				for k := 0; k < inner; k++ {
					out[(o*n+i)*inner+k] = data[(o*s+int(idx[i]))*inner+k]
				}
			}
		}
		return
	}
	m, iinner := alongBlocks(c)
	for o := 0; o < outer; o++ {
		for i := 0; i < m; i++ {
			for k := 0; k < iinner; k++ {
				p := (o*m+i)*iinner + k
				out[p] = data[(o*s+int(idx[p]))*inner+k]
			}
		}
	}
}

// alongBlocks returns, for a GatherElements case, the indices' size on the
// axis and the product of their dimensions after it.
func alongBlocks(c benchCase) (m, iinner int) {
	iinner = 1
	for _, x := range c.ishape[c.axis+1:] {
		iinner *= x
	}
	return c.ishape[c.axis], iinner
}

// naiveBackward is the matching scatter-add loop.
func naiveBackward(c benchCase, d benchData, dst []float32) {
	grad, idx := d.grad.Float32s(), d.indices.Int64s()
	outer, s, inner := split(c.dshape, c.axis)
	if c.kind == opGather {
		n := len(idx)
		for o := 0; o < outer; o++ {
			for i := 0; i < n; i++ {
				for k := 0; k < inner; k++ {
					dst[(o*s+int(idx[i]))*inner+k] += grad[(o*n+i)*inner+k]
				}
			}
		}
		return
	}
	m, iinner := alongBlocks(c)
	for o := 0; o < outer; o++ {
		for i := 0; i < m; i++ {
			for k := 0; k < iinner; k++ {
				p := (o*m+i)*iinner + k
				dst[(o*s+int(idx[p]))*inner+k] += grad[p]
			}
		}
	}
}

// BenchmarkGraph measures one run (on each machine, see ref.Machines), forward and backward, of
// sum(Gather(table, ids)) on the emb_50k_128 shapes, with allocations.
func BenchmarkGraph(b *testing.B) {
	c := benchCases[0]
	b.Run(c.name, func(b *testing.B) {
		ref.OnMachines(b, func(b *testing.B, m ref.Machine) {
			vm := graphRun(b, c, m)
			defer vm.Close()
			ref.BenchRuns(b, vm)
		})
	})
}

// TestGraphRunAllocs checks that a run of BenchmarkGraph's graph on
// machine.Machine allocates nothing once it has run.
func TestGraphRunAllocs(t *testing.T) {
	if raceOn {
		t.Skip("the race detector's sync.Pool drops what is put back, which allocates")
	}
	vm := graphRun(t, benchCases[0], ref.Machines[0])
	defer vm.Close()
	run := func() {
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if n := testing.AllocsPerRun(5, run); n != 0 {
		t.Errorf("a run allocates %v times", n)
	}
}

// graphRun returns machine m for BenchmarkGraph's graph of case c.
func graphRun(b testing.TB, c benchCase, m ref.Machine) gorgonia.VM {
	d := c.make()
	g := gorgonia.NewGraph()
	table := gorgonia.NodeFromAny(g, d.data, gorgonia.WithName("table"))
	ids := gorgonia.NodeFromAny(g, d.indices, gorgonia.WithName("ids"))
	rows, err := Gather(table, ids, 0)
	if err != nil {
		b.Fatal(err)
	}
	cost := gorgonia.Must(gorgonia.Sum(rows))
	if _, err := gorgonia.Grad(cost, table); err != nil {
		b.Fatal(err)
	}
	vm, err := m.New(g, nil)
	if err != nil {
		b.Fatal(err)
	}
	return vm
}
