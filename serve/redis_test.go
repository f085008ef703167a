package serve_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/cluster"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/localredis"
	"github.com/gathergrad/gather/optim"
	_ "github.com/gathergrad/gather/optim/clusterlua"
	"github.com/gathergrad/gather/serve"
	"github.com/gathergrad/gather/table"
)

// A table trained on raw ids on a Redis Cluster is served with its map:
// table.Export writes its rows (a row given and not yet stepped as it
// starts), cluster.IDMap.Snapshot its map, and serve.NewIDs and serve.Open
// read each id's row as the cluster holds it; an id the map does not
// hold reads the default row, zeros.
func TestServeRedisMap(t *testing.T) {
	cl := localredis.Start(t, 3, 0)
	o := cluster.Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 5 * time.Second}
	ctx := context.Background()
	const dim, rows = 4, 2 * 1024
	opt := optim.NewSparseAdam(0.1)
	if err := cluster.Create(ctx, o, "srv", rows+1, dim, tensor.Float32, table.WithPadding(rows), table.WithState(opt.Columns(dim)...)); err != nil {
		t.Fatal(err)
	}
	s, err := cluster.Open(ctx, o, "srv")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := cluster.NewIDMap(ctx, s, driver.IDMapOptions{Rows: rows}, driver.RowInit{Seed: 2, Std: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	raw := []int64{-9, 1 << 50, 77, 5}
	step := func(ids []int64, n int64, stepped int) {
		at := make([]int64, len(ids))
		if _, err := m.Map(ctx, ids, at, n, nil); err != nil {
			t.Fatal(err)
		}
		g := make([]float32, stepped*dim)
		for i := range g {
			g[i] = float32(i%3) - 1
		}
		slices.Sort(at[:stepped]) // a gradient's rows in order
		grad := &driver.RowGrad{Rows: at[:stepped], Values: tensor.New(tensor.WithShape(stepped, dim), tensor.WithBacking(g))}
		if err := s.Step(ctx, opt, grad); err != nil {
			t.Fatal(err)
		}
	}
	step(raw[:3], 0, 3)
	step([]int64{raw[0], raw[3]}, 1, 1) // raw[3] given a row, never stepped
	// Another process's store: what the cluster holds, none of what s
	// read with its last Map.
	s2, err := cluster.Open(ctx, o, "srv")
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	path := filepath.Join(t.TempDir(), "srv.safetensors")
	if err := table.Export(ctx, path, s2, s.Steps()); err != nil {
		t.Fatal(err)
	}
	state, err := m.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := table.HeldIDMap(*state)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := serve.Open(path, "srv.rows")
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	ids := serve.NewIDs(snap)
	query := append(slices.Clone(raw), 123456)
	at := make([]int64, len(query))
	if err := ids.Rows(at, query); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, len(query)*dim)
	if err := tb.Lookup(got, at); err != nil {
		t.Fatal(err)
	}
	// What the cluster holds for each id.
	held := make([]int64, len(raw))
	for k, id := range raw {
		var ok bool
		if held[k], ok = snap.Row(id); !ok {
			t.Fatalf("the snapshot lacks id %d", id)
		}
	}
	b := make([]byte, len(raw)*s.RowBytes())
	if err := s2.ReadRows(ctx, held, b); err != nil {
		t.Fatal(err)
	}
	width := s.RowBytes() / 4
	for k := range raw {
		want := fileio.Float32s(b)[k*width : k*width+dim]
		if !slices.Equal(got[k*dim:(k+1)*dim], want) {
			t.Fatalf("id %d served %v, the cluster holds %v", raw[k], got[k*dim:(k+1)*dim], want)
		}
	}
	start := make([]float32, dim)
	table.InitialRow(start, 2, raw[3])
	for i := range start {
		start[i] *= 0.5
	}
	if !slices.Equal(got[3*dim:4*dim], start) || !slices.Equal(got[4*dim:], make([]float32, dim)) {
		t.Fatalf("a row never stepped served %v (want %v), an unknown id %v", got[3*dim:4*dim], start, got[4*dim:])
	}
}
