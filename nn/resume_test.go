package nn

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gathergrad/gather/internal/vmtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/optim"
)

// resumeModel is the model of the exact-resume tests: an optim.SparseAdam
// table and an optim.SparseSGD table, their lookups summed, a dense layer
// to 4 classes under optim.Adam (its state saved by optim.DenseState),
// cross entropy.
type resumeModel struct {
	adamEmb, sgdEmb *Embedding
	w               *gorgonia.Node
	ids, targets    *tensor.Dense
	vm              gorgonia.VM
	adam            *optim.SparseAdam
	sgd             *optim.SparseSGD
	solver          *optim.Adam
}

func newResumeModel(t *testing.T, seed uint64) *resumeModel {
	const vocab, dim, batch, classes = 50, 8, 16, 4
	g := gorgonia.NewGraph()
	m := &resumeModel{adam: optim.NewSparseAdam(0.05), sgd: &optim.SparseSGD{LearnRate: 0.3, WeightDecay: 0.01},
		solver: optim.NewAdam(0.05)}
	var err error
	m.adamEmb, err = NewEmbedding(g, "adam_table", vocab, dim, tensor.Float32, WithSparse(), WithSeed(seed))
	require.NoError(t, err)
	m.sgdEmb, err = NewEmbedding(g, "sgd_table", vocab, dim, tensor.Float32, WithSparse(), WithSeed(seed+1))
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(seed, 9))
	wv := make([]float32, dim*classes)
	for i := range wv {
		wv[i] = float32(r.NormFloat64())
	}
	m.w = gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithName("w"), gorgonia.WithValue(tensor.New(tensor.WithShape(dim, classes), tensor.WithBacking(wv))))
	m.ids = tensor.New(tensor.Of(tensor.Int), tensor.WithShape(batch))
	m.targets = tensor.New(tensor.Of(tensor.Int), tensor.WithShape(batch))
	idn := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"), gorgonia.WithValue(m.ids))
	yn := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("y"), gorgonia.WithValue(m.targets))
	a, err := m.adamEmb.Lookup(idn)
	require.NoError(t, err)
	b, err := m.sgdEmb.Lookup(idn)
	require.NoError(t, err)
	h := gorgonia.Must(gorgonia.Add(a, b))
	loss, err := CrossEntropy(gorgonia.Must(gorgonia.Mul(h, m.w)), yn)
	require.NoError(t, err)
	_, err = gorgonia.Grad(loss, append(gorgonia.Nodes{m.w}, append(m.adamEmb.GradNodes(), m.sgdEmb.GradNodes()...)...)...)
	require.NoError(t, err)
	m.vm = vmtest.Bound(t, g, m.w)
	return m
}

// train runs steps [from, to): each step's batch depends on its number
// only.
func (m *resumeModel) train(t *testing.T, from, to int) {
	for k := from; k < to; k++ {
		r := rand.New(rand.NewPCG(uint64(k), 77))
		for i := range m.ids.Ints() {
			m.ids.Ints()[i] = r.IntN(50)
			m.targets.Ints()[i] = r.IntN(4)
		}
		require.NoError(t, m.vm.RunAll())
		require.NoError(t, m.adamEmb.Step(context.Background(), m.adam))
		require.NoError(t, m.sgdEmb.Step(context.Background(), m.sgd))
		require.NoError(t, m.solver.Step(gorgonia.NodesToValueGrads(gorgonia.Nodes{m.w})))
		m.vm.Reset()
	}
}

func (m *resumeModel) parts() []checkpoint.Part {
	return []checkpoint.Part{m.adamEmb, m.sgdEmb, checkpoint.Nodes(m.w),
		optim.State(m.adamEmb.Home().(Weights), m.adam), optim.State(m.sgdEmb.Home().(Weights), m.sgd), optim.DenseState("mlp", m.solver, m.w)}
}

const resumeN, resumeM = 7, 5

// Train N steps, save, build the model again in a new process with other
// seeds, load, train M steps: the tables and the dense layer are
// bit-identical to N+M steps without the break.
func TestExactResume(t *testing.T) {
	dir := t.TempDir()
	ckpt, final := filepath.Join(dir, "n.safetensors"), filepath.Join(dir, "final.safetensors")

	whole := newResumeModel(t, 1)
	whole.train(t, 0, resumeN+resumeM)

	first := newResumeModel(t, 1)
	first.train(t, 0, resumeN)
	require.NoError(t, checkpoint.Save(ckpt, map[string]string{"step": strconv.Itoa(resumeN)}, first.parts()...))

	cmd := exec.Command(os.Args[0], "-test.run", "^TestExactResumeChild$", "-test.count", "1")
	cmd.Env = append(os.Environ(), "GATHER_RESUME_FROM="+ckpt, "GATHER_RESUME_TO="+final)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	got, meta, err := checkpoint.Read(final)
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(resumeN+resumeM), meta["step"])
	want, err := wholeState(whole)
	require.NoError(t, err)
	for name, w := range want {
		g, ok := got[name]
		require.True(t, ok, name)
		assert.Equal(t, w.Header.Raw, g.Header.Raw, "%s differs from the run without a break", name)
	}
	assert.Equal(t, int64(resumeN+resumeM), got["adam_table.step"].Data())
}

func wholeState(m *resumeModel) (map[string]*tensor.Dense, error) {
	out := map[string]*tensor.Dense{}
	for _, p := range m.parts() {
		st, err := p.State()
		if err != nil {
			return nil, err
		}
		for k, v := range st {
			out[k] = v.(*tensor.Dense)
		}
	}
	return out, nil
}

// TestExactResumeChild is the second process of TestExactResume.
func TestExactResumeChild(t *testing.T) {
	from, to := os.Getenv("GATHER_RESUME_FROM"), os.Getenv("GATHER_RESUME_TO")
	if from == "" {
		t.Skip("run by TestExactResume in a process of its own")
	}
	m := newResumeModel(t, 1234) // other seeds: every value must come from the file
	meta, err := checkpoint.Load(from, m.parts()...)
	require.NoError(t, err)
	n, err := strconv.Atoi(meta["step"])
	require.NoError(t, err)
	m.train(t, n, n+resumeM)
	require.NoError(t, checkpoint.Save(to, map[string]string{"step": strconv.Itoa(n + resumeM)}, m.parts()...))
}

// The optimiser's state belongs to the table: Load restores it, step
// count included, into another model's table whatever SparseAdam value
// is given; an optimiser that keeps other state is refused before
// anything changes.
func TestOptimizerStateBinding(t *testing.T) {
	dir := t.TempDir()
	m := newResumeModel(t, 1)
	m.train(t, 0, 2)
	path := filepath.Join(dir, "a.safetensors")
	require.NoError(t, checkpoint.Save(path, nil, m.adamEmb, optim.State(m.adamEmb.Home().(Weights), m.adam)))

	other := newResumeModel(t, 2)
	other.train(t, 0, 1) // its table now keeps SparseAdam's state
	before := append([]float32{}, other.adamEmb.Table.Value().(*tensor.Dense).Float32s()...)
	_, err := checkpoint.Load(path, other.adamEmb, optim.State(other.adamEmb.Home().(Weights), optim.NewRowWiseAdagrad(0.1)))
	require.ErrorIs(t, err, gather.ErrOption)
	assert.Equal(t, before, other.adamEmb.Table.Value().(*tensor.Dense).Float32s())

	fresh := optim.NewSparseAdam(0.05)
	_, err = checkpoint.Load(path, other.adamEmb, optim.State(other.adamEmb.Home().(Weights), fresh))
	require.NoError(t, err)
	st, err := optim.State(other.adamEmb.Home().(Weights), fresh).State()
	require.NoError(t, err)
	assert.Equal(t, int64(2), st[other.adamEmb.Name()+".step"].Data(), "the step count loaded")
	require.NoError(t, other.vm.RunAll())
	require.NoError(t, other.adamEmb.Step(context.Background(), fresh), "bound to the table it was loaded for")
	other.vm.Reset()

	type custom struct{ optim.SparseSGD }
	_, err = checkpoint.Load(path, other.adamEmb, optim.State(other.adamEmb.Home().(Weights), &custom{}))
	require.Error(t, err)
}
