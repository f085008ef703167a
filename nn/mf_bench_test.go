package nn

import (
	"context"
	"math/rand/v2"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/ref"
	"github.com/gathergrad/gather/optim"
)

// BenchmarkMFStep is a step's fixed cost: biased matrix factorisation at
// batch 1 on MovieLens 100K's sizes (943 users, 1,682 items, 100 factors,
// Surprise's SVD), r̂ = pᵤ·qᵢ + bᵤ + bᵢ, squared error, SparseSGD on the
// four tables. step is the whole step: the ids and the rating written into
// their bound tensors, the graph run forward and backward, the four
// tables stepped; run is the graph's run alone (so step - run is the
// four tables' steps). On machine.Machine (Gorgonia's TapeMachine takes
// 15 times as long).
func BenchmarkMFStep(b *testing.B) {
	{
		mf := newMFStep(b, ref.Machines[0])
		defer mf.vm.Close()
		b.Run("step", func(b *testing.B) {
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				mf.next(k)
				mf.run(b)
				mf.stepTables(b)
				mf.vm.Reset()
				k++
			}
		})
		b.Run("run", func(b *testing.B) {
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				mf.next(k)
				mf.run(b)
				mf.vm.Reset()
				k++
			}
		})
	}
}

type mfStep struct {
	vm         gorgonia.VM
	tables     []*Embedding
	user, item []int
	rating     []float32
	us, is     []int
	rs         []float32
	sgd        *optim.SparseSGD
}

func newMFStep(b *testing.B, m ref.Machine) *mfStep {
	const users, items, dim, n = 943, 1682, 100, 4096
	r := rand.New(rand.NewPCG(7, 1))
	init := func(std float32) func(tensor.Dtype, ...int) any {
		return func(dt tensor.Dtype, s ...int) any {
			v := make([]float32, tensor.Shape(s).TotalSize())
			for i := range v {
				v[i] = float32(r.NormFloat64()) * std
			}
			return v
		}
	}
	g := gorgonia.NewGraph()
	mf := &mfStep{user: make([]int, 1), item: make([]int, 1), rating: make([]float32, 1), sgd: &optim.SparseSGD{LearnRate: 0.005}}
	for range n {
		mf.us, mf.is, mf.rs = append(mf.us, r.IntN(users)), append(mf.is, r.IntN(items)), append(mf.rs, float32(1+r.IntN(5)))
	}
	table := func(name string, rows, d int, std float32) *Embedding {
		e, err := NewEmbedding(g, name, rows, d, tensor.Float32, WithSparse(), WithInit(init(std)))
		if err != nil {
			b.Fatal(err)
		}
		mf.tables = append(mf.tables, e)
		return e
	}
	p, q := table("p", users, dim, 0.1), table("q", items, dim, 0.1)
	bu, bi := table("bu", users, 1, 0), table("bi", items, 1, 0)
	uid := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(1), gorgonia.WithName("u"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(1), tensor.WithBacking(mf.user))))
	iid := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(1), gorgonia.WithName("i"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(1), tensor.WithBacking(mf.item))))
	y := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(1), gorgonia.WithName("r"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(1), tensor.WithBacking(mf.rating))))
	lookup := func(e *Embedding, ids *gorgonia.Node) *gorgonia.Node {
		h, err := e.Lookup(ids)
		if err != nil {
			b.Fatal(err)
		}
		return h
	}
	pu, qi := lookup(p, uid), lookup(q, iid)
	qi3, err := gorgonia.Reshape(qi, tensor.Shape{1, 1, dim})
	if err != nil {
		b.Fatal(err)
	}
	dot, err := BatchDot(pu, qi3) // [1, 1]
	if err != nil {
		b.Fatal(err)
	}
	pred := gorgonia.Must(gorgonia.Add(gorgonia.Must(gorgonia.Add(dot, lookup(bu, uid))), lookup(bi, iid)))
	pred = gorgonia.Must(gorgonia.Reshape(pred, tensor.Shape{1}))
	loss, err := MSELoss(pred, y)
	if err != nil {
		b.Fatal(err)
	}
	var grads gorgonia.Nodes
	for _, e := range mf.tables {
		grads = append(grads, e.GradNodes()...)
	}
	if _, err := gorgonia.Grad(loss, grads...); err != nil {
		b.Fatal(err)
	}
	if mf.vm, err = m.New(g, grads); err != nil {
		b.Fatal(err)
	}
	return mf
}

// next writes example k's ids and rating into the tensors the graph reads.
func (mf *mfStep) next(k int) {
	k %= len(mf.us)
	mf.user[0], mf.item[0], mf.rating[0] = mf.us[k], mf.is[k], mf.rs[k]
}

func (mf *mfStep) run(b *testing.B) {
	if err := mf.vm.RunAll(); err != nil {
		b.Fatal(err)
	}
}

func (mf *mfStep) stepTables(b *testing.B) {
	for _, e := range mf.tables {
		if err := e.Step(context.Background(), mf.sgd); err != nil {
			b.Fatal(err)
		}
	}
}
