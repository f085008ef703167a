package nn

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/ref"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// BenchmarkCachedStep is one training step of a table in a file behind a
// cache of about a third of its rows (table.OpenCached,
// CachedEmbedding): a lookup of 4096 uniform ids (the run fetches the
// rows the cache misses, evicting and journaling changed ones), the sum
// of the lookup as the cost, and SparseAdam's step of the rows and their
// moments in the cache.
func BenchmarkCachedStep(b *testing.B) { ref.OnMachines(b, benchCachedStep) }

func benchCachedStep(b *testing.B, m ref.Machine) {
	const vocab, dim, batch = 200_000, 64, 4096
	opt := optim.NewSparseAdam(0.01)
	cols := opt.Columns(dim)
	path := filepath.Join(b.TempDir(), "t.safetensors")
	if err := table.Create(path, "t", vocab, dim, tensor.Float32, table.WithSeed(1), table.WithState(cols...)); err != nil {
		b.Fatal(err)
	}
	c, err := table.OpenCached(context.Background(), path, table.CacheOptions{Budget: 64 << 20}, table.FileOptions{})
	if err != nil {
		b.Fatal(err)
	}
	g := gorgonia.NewGraph()
	emb, err := CachedEmbedding(context.Background(), g, c)
	if err != nil {
		b.Fatal(err)
	}
	defer emb.Close(context.Background())
	idv := make([]int, batch)
	ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(batch), gorgonia.WithName("ids"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(batch), tensor.WithBacking(idv))))
	v, err := emb.Lookup(ids)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := gorgonia.Grad(gorgonia.Must(gorgonia.Sum(v)), emb.GradNodes()...); err != nil {
		b.Fatal(err)
	}
	vm, err := m.New(g, emb.GradNodes())
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	ref.BenchSteps(b, vm, func() {
		for i := range idv {
			idv[i] = r.IntN(vocab)
		}
		if err := vm.RunAll(); err != nil {
			b.Fatal(err)
		}
		if err := emb.Step(context.Background(), opt); err != nil {
			b.Fatal(err)
		}
		vm.Reset()
	})
}
