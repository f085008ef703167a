package nn_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/optim"
)

// A checkpoint written before optimiser state moved into the tables
// (testdata/state0, made at commit 859ccc4 by this model: step3 after 3
// steps, step6 after 6) loads, and 3 more steps from it give step6's
// file to the bit: the tables, SparseAdam's moments and step count, and
// RowWiseAdagrad's sums, under the same keys.
func TestOldCheckpointResumes(t *testing.T) {
	m := newCompatModel(t)
	adam, ada := optim.NewSparseAdam(0.05), optim.NewRowWiseAdagrad(0.1)
	parts := []checkpoint.Part{m.words, m.items, optim.State(m.words.Home().(nn.Weights), adam), optim.State(m.items.Home().(nn.Weights), ada)}
	meta, err := checkpoint.Load(filepath.Join("testdata", "state0", "step3.safetensors"), parts...)
	require.NoError(t, err)
	require.Equal(t, "3", meta["step"])
	m.train(t, adam, ada, 3, 6)
	path := filepath.Join(t.TempDir(), "step6.safetensors")
	require.NoError(t, checkpoint.Save(path, map[string]string{"step": "6"}, parts...))

	want, _, err := checkpoint.Read(filepath.Join("testdata", "state0", "step6.safetensors"))
	require.NoError(t, err)
	got, _, err := checkpoint.Read(path)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for name, w := range want {
		require.Contains(t, got, name)
		assert.Equal(t, w.Shape(), got[name].Shape(), name)
		assert.Equal(t, w.Data(), got[name].Data(), name)
	}
	assert.Contains(t, want, "words.exp_avg_sq")
	assert.Contains(t, want, "items.sum")
}

// compatModel is the model of the state0 fixture: two sparse tables,
// "words" (float32, SparseAdam) and "items" (float32, RowWiseAdagrad),
// each looked up by 8 ids, the cost the sum of the lookups times fixed
// weights.
type compatModel struct {
	words, items *nn.Embedding
	wIDs, iIDs   *gorgonia.Node
	vm           gorgonia.VM
}

func newCompatModel(t *testing.T) *compatModel {
	g := gorgonia.NewGraph()
	words, err := nn.NewEmbedding(g, "words", 50, 4, tensor.Float32, nn.WithSparse(), nn.WithSeed(3))
	require.NoError(t, err)
	items, err := nn.NewEmbedding(g, "items", 40, 3, tensor.Float32, nn.WithSparse(), nn.WithSeed(4))
	require.NoError(t, err)
	m := &compatModel{words: words, items: items}
	m.wIDs = gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(8), gorgonia.WithName("wids"), gorgonia.WithValue(tensor.New(tensor.WithShape(8), tensor.Of(tensor.Int))))
	m.iIDs = gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(8), gorgonia.WithName("iids"), gorgonia.WithValue(tensor.New(tensor.WithShape(8), tensor.Of(tensor.Int))))
	wv, err := words.Lookup(m.wIDs)
	require.NoError(t, err)
	iv, err := items.Lookup(m.iIDs)
	require.NoError(t, err)
	wc := make([]float32, 32)
	for i := range wc {
		wc[i] = float32(i%5) - 1.5
	}
	ic := make([]float32, 24)
	for i := range ic {
		ic[i] = float32(i%7)*0.25 - 0.6
	}
	wcost := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(wv, gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(8, 4), tensor.WithBacking(wc)), gorgonia.WithName("wc"))))))
	icost := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(iv, gorgonia.NodeFromAny(g, tensor.New(tensor.WithShape(8, 3), tensor.WithBacking(ic)), gorgonia.WithName("ic"))))))
	_, err = gorgonia.Grad(gorgonia.Must(gorgonia.Add(wcost, icost)), append(words.GradNodes(), items.GradNodes()...)...)
	require.NoError(t, err)
	m.vm = gorgonia.NewTapeMachine(g)
	t.Cleanup(func() { m.vm.Close() })
	return m
}

// train runs steps from, from+1, ..., to-1, each with its own ids.
func (m *compatModel) train(t *testing.T, adam *optim.SparseAdam, ada *optim.RowWiseAdagrad, from, to int) {
	for s := from; s < to; s++ {
		for i := range 8 {
			m.wIDs.Value().(*tensor.Dense).Ints()[i] = (s*7 + i*3) % 50
			m.iIDs.Value().(*tensor.Dense).Ints()[i] = (s*5 + i*i) % 40
		}
		require.NoError(t, m.vm.RunAll())
		require.NoError(t, m.words.Step(context.Background(), adam))
		require.NoError(t, m.items.Step(context.Background(), ada))
		m.vm.Reset()
	}
}
