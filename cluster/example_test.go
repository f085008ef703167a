package cluster_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/cluster"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/optim"
	_ "github.com/gathergrad/gather/optim/clusterlua"
	"github.com/gathergrad/gather/table"
)

// A table on a Redis Cluster, written once and then trained by each
// worker through a Shared cache, the servers applying every worker's
// SparseAdam steps. It needs a cluster at the addresses given, so go test
// compiles it without running it; examples/distributed runs the same
// calls against a local cluster.
func ExampleCreate() {
	o := cluster.Options{Addrs: []string{"10.0.0.1:6379", "10.0.0.2:6379"}, Password: "secret",
		Retry: time.Minute, Replicas: 1}
	opt := optim.NewSparseAdam(0.01)
	cols := opt.Columns(16)
	// Once, by one process:
	if err := cluster.Create(context.Background(), o, "items", 1_000_000, 16, tensor.Float32, table.WithSeed(1), table.WithState(cols...)); err != nil {
		log.Fatal(err)
	}
	// In each worker:
	s, err := cluster.Open(context.Background(), o, "items")
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	c, err := table.NewCached(context.Background(), s, table.CacheOptions{Budget: 64 << 20, Shared: &table.SharedOptions{}})
	if err != nil {
		log.Fatal(err)
	}
	emb, err := nn.CachedEmbedding(context.Background(), gorgonia.NewGraph(), c)
	if err != nil {
		log.Fatal(err)
	}
	defer emb.Close(context.Background())
	// Each step: build and run the graph on emb's lookups, then
	// emb.Step(ctx, opt) sends the gradient to the servers.
}

// Raw ids on a Redis Cluster: the map lives on the servers beside the
// rows, shared by every worker, which maps each batch in the calls that
// read its rows. It needs a cluster at the addresses given, so go test
// compiles it without running it.
func ExampleNewIDMap() {
	ctx := context.Background()
	o := cluster.Options{Addrs: []string{"10.0.0.1:6379"}, Retry: time.Minute, Replicas: 1}
	opt := optim.NewSparseAdam(0.01)
	mo := driver.IDMapOptions{Rows: 1 << 22, AdmitAfter: 2, TTL: 100_000}
	// Once: the map's rows and the default row after them.
	if err := cluster.Create(ctx, o, "users", int64(mo.Rows)+1, 16, tensor.Float32, table.WithState(opt.Columns(16)...)); err != nil {
		log.Fatal(err)
	}
	// In each worker:
	s, err := cluster.Open(ctx, o, "users")
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	m, err := cluster.NewIDMap(ctx, s, mo, driver.RowInit{Seed: 1, Std: 0.05})
	if err != nil {
		log.Fatal(err)
	}
	c, err := table.NewCached(ctx, s, table.CacheOptions{Budget: 64 << 20, Shared: &table.SharedOptions{}})
	if err != nil {
		log.Fatal(err)
	}
	emb, err := nn.CachedEmbedding(ctx, gorgonia.NewGraph(), c, nn.WithPadding(m.Rows()))
	if err != nil {
		log.Fatal(err)
	}
	defer emb.Close(ctx)
	raw, err := nn.NewRawIDs(emb, m, m.RowInit())
	if err != nil {
		log.Fatal(err)
	}
	_ = raw
	// Each step: raw.Map(ctx, batch, ids, step) with the batch's raw ids and
	// the lookup's ids tensor, run the graph, then emb.Step(ctx, opt).
}

// A Redis Cluster of three local servers, for a test or an example on
// one machine: a table written to it and opened again. It needs
// redis-server on the PATH, so go test compiles it without running it;
// TestStartLocal runs it.
func ExampleStartLocal() {
	dir, err := os.MkdirTemp("", "redis-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := cluster.StartLocal(dir, 3)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Stop()
	ctx := context.Background()
	if err := cluster.Create(ctx, l.Options, "items", 1000, 8, tensor.Float32, table.WithSeed(1)); err != nil {
		log.Fatal(err)
	}
	s, err := cluster.Open(ctx, l.Options, "items")
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	fmt.Println(s.Schema().Rows, s.Schema().Dim)
}
