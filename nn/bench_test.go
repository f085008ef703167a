package nn

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/ref"
	"github.com/gathergrad/gather/openblas"
	"github.com/gathergrad/gather/optim"
)

// With -tags openblas, the package's tests and benchmarks run Gorgonia's
// products in OpenBLAS, as a user of the tag would.
func init() { _ = openblas.Use() }

// BenchmarkTrainStep measures one training step of an embedding model, dense
// against row-sparse: a lookup of 4096 ids in a table of N rows × 64, a
// linear head to 16 classes, CrossEntropy, backward, and an SGD
// update (optim.SGD, torch.optim.SGD's peer, for everything dense;
// optim.SparseSGD for the sparse table). A dense step touches the whole table (its gradient, the
// update); a sparse step only the rows in the batch.
func BenchmarkTrainStep(b *testing.B) {
	for _, mode := range []string{"dense", "sparse"} {
		for _, rows := range []int{10_000, 100_000, 1_000_000} {
			b.Run(fmt.Sprintf("%s/rows=%d", mode, rows), func(b *testing.B) {
				ref.OnMachines(b, func(b *testing.B, m ref.Machine) { benchTrainStep(b, mode == "sparse", rows, m) })
			})
		}
	}
}

func benchTrainStep(b *testing.B, sparse bool, rows int, m ref.Machine) {
	vm, step := trainStep(b, sparse, rows, m)
	ref.BenchSteps(b, vm, step)
}

// trainStep builds BenchmarkTrainStep's model on machine m and returns
// the machine and a function that runs one step.
func trainStep(b testing.TB, sparse bool, rows int, m ref.Machine) (gorgonia.VM, func()) {
	const batch, dim, classes = 4096, 64, 16
	r := rand.New(rand.NewPCG(3, uint64(rows)))
	init := func(dt tensor.Dtype, s ...int) any {
		v := make([]float32, tensor.Shape(s).TotalSize())
		for i := range v {
			v[i] = float32(r.NormFloat64()) * 0.1
		}
		return v
	}
	g := gorgonia.NewGraph()
	var opts []NewEmbeddingOption
	if sparse {
		opts = append(opts, WithSparse())
	}
	emb, err := NewEmbedding(g, "emb", rows, dim, tensor.Float32, append(opts, WithInit(init))...)
	if err != nil {
		b.Fatal(err)
	}
	idv := make([]int, batch)
	tv := make([]int, batch)
	for i := range idv {
		idv[i], tv[i] = r.IntN(rows), r.IntN(classes)
	}
	ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(batch), gorgonia.WithName("ids"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(batch), tensor.WithBacking(idv))))
	targets := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(batch), gorgonia.WithName("y"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(batch), tensor.WithBacking(tv))))
	w := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(classes, dim), gorgonia.WithName("w"), gorgonia.WithInit(init))
	h, err := emb.Lookup(ids)
	if err != nil {
		b.Fatal(err)
	}
	logits, err := Linear(h, w, nil)
	if err != nil {
		b.Fatal(err)
	}
	loss, err := CrossEntropy(logits, targets)
	if err != nil {
		b.Fatal(err)
	}
	learn := append(emb.Learnables(), w)
	if _, err := gorgonia.Grad(loss, append(learn, emb.GradNodes()...)...); err != nil {
		b.Fatal(err)
	}
	vm, err := m.New(g, learn)
	if err != nil {
		b.Fatal(err)
	}
	solver := &optim.SGD{LearnRate: 0.1}
	sgd := &optim.SparseSGD{LearnRate: 0.1}
	step := func() {
		if err := vm.RunAll(); err != nil {
			b.Fatal(err)
		}
		if sparse {
			if err := emb.Step(context.Background(), sgd); err != nil {
				b.Fatal(err)
			}
		}
		if err := solver.Step(gorgonia.NodesToValueGrads(learn)); err != nil {
			b.Fatal(err)
		}
		vm.Reset()
	}
	return vm, step
}

// BenchmarkSkipGram measures one training step of word2vec's skip-gram
// with negative sampling: 4,096 centre words, each scored against its
// context word and 5 negatives (BatchDot of a lookup in the input table
// and one in the output table, both 100,000 × 64, row-sparse), the
// logistic loss (BCEWithLogits, label 1 for the context word, 0 for the
// negatives, mean), backward, and a optim.SparseAdam step of each table.
func BenchmarkSkipGram(b *testing.B) { ref.OnMachines(b, benchSkipGram) }

func benchSkipGram(b *testing.B, m ref.Machine) {
	vm, step := skipGram(b, m)
	ref.BenchSteps(b, vm, step)
}

// skipGram builds BenchmarkSkipGram's model on machine m and returns the
// machine and a function that runs one step.
func skipGram(b testing.TB, m ref.Machine) (gorgonia.VM, func()) {
	const vocab, dim, batch, k = 100_000, 64, 4096, 6
	r := rand.New(rand.NewPCG(11, 12))
	init := func(dt tensor.Dtype, s ...int) any {
		v := make([]float32, tensor.Shape(s).TotalSize())
		for i := range v {
			v[i] = float32(r.NormFloat64()) * 0.1
		}
		return v
	}
	g := gorgonia.NewGraph()
	in, err := NewEmbedding(g, "in", vocab, dim, tensor.Float32, WithSparse(), WithInit(init))
	if err != nil {
		b.Fatal(err)
	}
	out, err := NewEmbedding(g, "out", vocab, dim, tensor.Float32, WithSparse(), WithInit(init))
	if err != nil {
		b.Fatal(err)
	}
	centre, ctxWords := make([]int, batch), make([]int, batch*k)
	for i := range centre {
		centre[i] = r.IntN(vocab)
	}
	for i := range ctxWords {
		ctxWords[i] = r.IntN(vocab)
	}
	labels := make([]float32, batch*k)
	for i := 0; i < len(labels); i += k {
		labels[i] = 1
	}
	cn := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("centre"), gorgonia.WithValue(tensor.New(tensor.WithBacking(centre))))
	xn := gorgonia.NewMatrix(g, tensor.Int, gorgonia.WithName("context"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(batch, k), tensor.WithBacking(ctxWords))))
	yn := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithName("labels"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(batch, k), tensor.WithBacking(labels))))
	cv, err := in.Lookup(cn)
	if err != nil {
		b.Fatal(err)
	}
	xv, err := out.Lookup(xn)
	if err != nil {
		b.Fatal(err)
	}
	scores, err := BatchDot(cv, xv)
	if err != nil {
		b.Fatal(err)
	}
	loss, err := BCEWithLogits(scores, yn)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := gorgonia.Grad(loss, append(in.GradNodes(), out.GradNodes()...)...); err != nil {
		b.Fatal(err)
	}
	vm, err := m.New(g, nil)
	if err != nil {
		b.Fatal(err)
	}
	adamIn, adamOut := optim.NewSparseAdam(0.01), optim.NewSparseAdam(0.01)
	step := func() {
		if err := vm.RunAll(); err != nil {
			b.Fatal(err)
		}
		if err := in.Step(context.Background(), adamIn); err != nil {
			b.Fatal(err)
		}
		if err := out.Step(context.Background(), adamOut); err != nil {
			b.Fatal(err)
		}
		vm.Reset()
	}
	return vm, step
}

// BenchmarkRowGradient measures the row-sparse gradient of one lookup of
// 4096 ids into a table of 1,000,000 rows × 64.
func BenchmarkRowGradient(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	ids := make([]int, 4096)
	for i := range ids {
		ids[i] = r.IntN(1_000_000)
	}
	idsT := tensor.New(tensor.WithShape(4096), tensor.WithBacking(ids))
	gT := tensor.New(tensor.WithShape(4096, 64), tensor.WithBacking(make([]float32, 4096*64)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := optim.RowGradient(idsT, gT, 1_000_000, -1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCrossEntropy measures one run (on each machine, see ref.Machines), loss and gradient, of
// the cross-entropy of 4096 rows of 16 logits: the fused CrossEntropy
// against NLLLoss after gorgonia.LogSoftMax, which compute the same values.
func BenchmarkCrossEntropy(b *testing.B) {
	const rows, classes = 4096, 16
	r := rand.New(rand.NewPCG(4, 5))
	x := make([]float32, rows*classes)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	y := make([]int, rows)
	for i := range y {
		y[i] = r.IntN(classes)
	}
	for _, fused := range []bool{true, false} {
		name := "CrossEntropy"
		if !fused {
			name = "LogSoftmax+NLLLoss"
		}
		loss := func(x, t *gorgonia.Node) (*gorgonia.Node, error) { return CrossEntropy(x, t) }
		if !fused {
			loss = logSoftmaxNLL
		}
		b.Run(name, func(b *testing.B) {
			ref.OnMachines(b, func(b *testing.B, m ref.Machine) {
				vm := lossVM(b, m, x, rows, classes, tensor.New(tensor.WithShape(rows), tensor.WithBacking(y)), loss)
				defer vm.Close()
				ref.BenchRuns(b, vm)
			})
		})
	}
	// The loss with options, which runs the kernels of the general case:
	// one target in eight ignored, and class weights.
	yIgn := append([]int{}, y...)
	for i := 0; i < rows; i += 8 {
		yIgn[i] = -100
	}
	w := make([]float32, classes)
	for i := range w {
		w[i] = 0.5 + float32(i)/classes
	}
	for _, c := range []struct {
		name string
		y    []int
		opts []CrossEntropyOption
	}{
		{"ignore_index", yIgn, []CrossEntropyOption{WithIgnoreIndex(-100)}},
		{"class_weights", y, []CrossEntropyOption{WithClassWeights(tensor.New(tensor.WithBacking(w)))}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ref.OnMachines(b, func(b *testing.B, m ref.Machine) {
				vm := lossVM(b, m, x, rows, classes, tensor.New(tensor.WithShape(rows), tensor.WithBacking(c.y)),
					func(x, t *gorgonia.Node) (*gorgonia.Node, error) { return CrossEntropy(x, t, c.opts...) })
				defer vm.Close()
				ref.BenchRuns(b, vm)
			})
		})
	}
}

// BenchmarkBCEWithLogits measures one run (on each machine, see ref.Machines), loss and gradient,
// of BCEWithLogits on 4096 × 16 logits and soft targets (mean reduction).
func BenchmarkBCEWithLogits(b *testing.B) {
	const rows, cols = 4096, 16
	r := rand.New(rand.NewPCG(6, 7))
	x, y := make([]float32, rows*cols), make([]float32, rows*cols)
	for i := range x {
		x[i], y[i] = float32(2*r.NormFloat64()), float32(r.Float64())
	}
	b.Run("4096x16", func(b *testing.B) {
		ref.OnMachines(b, func(b *testing.B, m ref.Machine) {
			vm := lossVM(b, m, x, rows, cols, tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(y)), bce)
			defer vm.Close()
			ref.BenchRuns(b, vm)
		})
	})
}

// lossVM builds loss(x, target) and the gradient of x on a new graph, x
// being rows × cols logits, and returns machine m for it.
func lossVM(tb testing.TB, m ref.Machine, x []float32, rows, cols int, target *tensor.Dense,
	loss func(x, target *gorgonia.Node) (*gorgonia.Node, error)) gorgonia.VM {
	tb.Helper()
	g := gorgonia.NewGraph()
	xn := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(x)), gorgonia.WithName("x"))
	tn := gorgonia.NodeFromAny(g, target, gorgonia.WithName("target"))
	l, err := loss(xn, tn)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := gorgonia.Grad(l, xn); err != nil {
		tb.Fatal(err)
	}
	vm, err := m.New(g, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return vm
}

// bce is BCEWithLogits with its default options.
func bce(x, target *gorgonia.Node) (*gorgonia.Node, error) { return BCEWithLogits(x, target) }

// logSoftmaxNLL is NLLLoss after LogSoftmax over the last axis.
func logSoftmaxNLL(x, target *gorgonia.Node) (*gorgonia.Node, error) {
	lp, err := LogSoftmax(x, -1)
	if err != nil {
		return nil, err
	}
	return NLLLoss(lp, target)
}

// BenchmarkStreamStores measures the gather.Gather cases' forward with ordinary
// stores ("plain") and with the stores the forward chooses for a new
// output ("chosen": streaming ones where streams allows), in the same run:
// into a new output per call ("new"), in this benchmark's small heap,
// where the memory Go hands out was written a few calls ago; and into
// outputs taken in turn from 128 MB of buffers ("cold"), whose memory was
// last written 128 MB of writes ago, as in a program whose live heap is
// that large. Both measure memory the process already has: the first
// write to memory new to the process also waits for the system to supply
// its pages, which costs more than either kind of store.

// bagBench is one case of BenchmarkBag (bench/bench_cases.md): a float32
// table, int64 ids drawn uniformly, bags given by offsets, fixed seed.
type bagBench struct {
	name       string
	vocab, dim int
	lengths    func(r *rand.Rand) int // the length of each bag
	bags       int
	weighted   bool
	mode       BagMode
}

var bagBenches = []bagBench{
	{"bag_1m_64_sum", 1_000_000, 64, func(*rand.Rand) int { return 20 }, 2048, false, BagSum},
	{"bag_1m_64_sum_weighted", 1_000_000, 64, func(*rand.Rand) int { return 20 }, 2048, true, BagSum},
	{"bag_50k_128_mean", 50_000, 128, func(r *rand.Rand) int { return 1 + r.IntN(40) }, 4096, false, BagMean},
}

// values returns the op's inputs for the case and an upstream gradient.
func (c bagBench) values() (op *bagOp, in []gorgonia.Value, up *tensor.Dense) {
	r := rand.New(rand.NewPCG(7, uint64(c.vocab)))
	table := make([]float32, c.vocab*c.dim)
	for i := range table {
		table[i] = float32(r.NormFloat64())
	}
	offs := make([]int64, c.bags)
	var ids []int64
	for b := range offs {
		offs[b] = int64(len(ids))
		for range c.lengths(r) {
			ids = append(ids, int64(r.IntN(c.vocab)))
		}
	}
	g := gorgonia.NewGraph()
	tn := gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(c.vocab, c.dim), tensor.WithBacking(table)), gorgonia.WithName("table"))
	in = []gorgonia.Value{tn.Value(), tensor.New(tensor.WithShape(len(ids)), tensor.WithBacking(ids)),
		tensor.New(tensor.WithShape(c.bags), tensor.WithBacking(offs))}
	idn := gorgonia.NodeFromAny(g, in[1], gorgonia.WithName("ids"))
	on := gorgonia.NodeFromAny(g, in[2], gorgonia.WithName("offsets"))
	var wn *gorgonia.Node
	if c.weighted {
		w := make([]float32, len(ids))
		for i := range w {
			w[i] = r.Float32()
		}
		in = append(in, tensor.New(tensor.WithShape(len(ids)), tensor.WithBacking(w)))
		wn = gorgonia.NodeFromAny(g, in[3], gorgonia.WithName("w"))
	}
	out, err := EmbeddingBag(tn, idn, on, wn, c.mode)
	if err != nil {
		panic(err)
	}
	gv := make([]float32, c.bags*c.dim)
	for i := range gv {
		gv[i] = float32(r.NormFloat64())
	}
	return out.Op().(*bagOp), in, tensor.New(tensor.WithShape(c.bags, c.dim), tensor.WithBacking(gv))
}

// BenchmarkBag measures EmbeddingBag's forward (the op's Do, a new output
// per call) and the dense gradient of the table into a reused buffer that
// the gradient op clears (UsePreallocDo), against F.embedding_bag and its
// backward in bench/torch_peer.py; and the forward into a reused output
// (UsePreallocDo, as a TapeMachine run again without Reset calls it), for
// which PyTorch has no peer: F.embedding_bag takes no out=.
func BenchmarkBag(b *testing.B) {
	for _, c := range bagBenches {
		get := sync.OnceValues(func() (*bagOp, []gorgonia.Value) { o, in, up := c.values(); return o, append(in, up) })
		b.Run(c.name+"/fwd", func(b *testing.B) {
			o, in := get()
			in = in[:len(in)-1]
			runtime.GC() // the collection the 256 MB table started ends before the timer starts
			fwd := func() {
				if _, err := o.Do(in...); err != nil {
					b.Fatal(err)
				}
			}
			ref.Steady(fwd)
			for b.Loop() {
				fwd()
			}
		})
		b.Run(c.name+"/fwd-reuse", func(b *testing.B) {
			o, in := get()
			in = in[:len(in)-1]
			runtime.GC()
			buf := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(o.bags, o.dim))
			fwd := func() {
				if _, err := o.UsePreallocDo(buf, in...); err != nil {
					b.Fatal(err)
				}
			}
			fwd() // untimed: the first touch of buf's pages
			for b.Loop() {
				fwd()
			}
		})
		b.Run(c.name+"/bwd", func(b *testing.B) {
			o, in := get()
			runtime.GC()
			d := o.Grads[0]
			buf := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(c.vocab, c.dim))
			if _, err := d.UsePreallocDo(buf, in...); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := d.UsePreallocDo(buf, in...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
