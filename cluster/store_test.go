package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/cluster"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/localredis"
	"github.com/gathergrad/gather/internal/tabletest"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/optim"
	_ "github.com/gathergrad/gather/optim/clusterlua"
	"github.com/gathergrad/gather/table"
)

// A table written to a real Redis Cluster (3 masters, 3 replicas, a
// password) holds the rows nn.NewEmbedding draws for its seed, each with
// zero state; rows written back read back; a cache in front of it trains
// as one in front of the same rows in memory, to the bit; a value of the
// wrong length, a table of another layout and a node that is not there are
// errors naming them; an ACL user reads it, a wrong password does not.
func TestRedisStore(t *testing.T) {
	cl := localredis.Start(t, 3, 1)
	o := cluster.Options{Addrs: cl.Addrs[:1], Password: cl.Password, Timeout: 5 * time.Second}
	const vocab, dim = 5000, tabletest.Dim
	cols := tabletest.Opt.Columns(dim)
	if err := cluster.Create(context.Background(), o, "words", vocab, dim, tensor.Float32, table.WithSeed(3), table.WithState(cols...)); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Create(context.Background(), o, "words", vocab, dim, tensor.Float32); !errors.Is(err, os.ErrExist) {
		t.Fatalf("a second Create: %v", err)
	}
	s, err := cluster.Open(context.Background(), o, "words")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Rows() != vocab || s.RowBytes() != 3*dim*4 {
		t.Fatalf("rows %d of %d bytes", s.Rows(), s.RowBytes())
	}
	g := gorgonia.NewGraph()
	mem, err := nn.NewEmbedding(g, "words", vocab, dim, tensor.Float32, nn.WithSeed(3), nn.WithSparse())
	if err != nil {
		t.Fatal(err)
	}
	w, _ := mem.Home().(nn.Weights).Weight()
	ids := []int64{0, 1, 4095, 4096, 4999}
	buf := make([]byte, len(ids)*s.RowBytes())
	if err := s.ReadRows(context.Background(), ids, buf); err != nil {
		t.Fatal(err)
	}
	for k, id := range ids {
		want := fileio.LittleEndianBytes(w.Float32s()[id*dim : (id+1)*dim])
		row := buf[k*s.RowBytes() : (k+1)*s.RowBytes()]
		if !bytes.Equal(row[:dim*4], want) || !bytes.Equal(row[dim*4:], make([]byte, 2*dim*4)) {
			t.Fatalf("row %d is not NewEmbedding's with zero state", id)
		}
	}

	// Trained behind a cache of 64 rows, as the same rows in memory.
	store, err := table.NewMemoryStore("t", w, cols...)
	if err != nil {
		t.Fatal(err)
	}
	budget := int64(64 * (s.RowBytes() + 72))
	onRedis, err := table.NewCached(context.Background(), s, table.CacheOptions{Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	defer onRedis.Close(context.Background())
	inMemory, err := table.NewCached(context.Background(), store, table.CacheOptions{Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	defer inMemory.Close(context.Background())
	for n := range 30 {
		if err := tabletest.Step(onRedis, n); err != nil {
			t.Fatal(err)
		}
		if err := tabletest.Step(inMemory, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := onRedis.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	all := make([]int64, vocab)
	for i := range all {
		all[i] = int64(i)
	}
	a, err := onRedis.Read(context.Background(), all)
	if err != nil {
		t.Fatal(err)
	}
	b, err := inMemory.Read(context.Background(), all)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fileio.LittleEndianBytes(a.Float32s()), fileio.LittleEndianBytes(b.Float32s())) {
		t.Fatal("the table on Redis differs from the one in memory")
	}

	// A value of the wrong length under a row's key.
	key := "gg:words:{7}:7"
	if out, err := cl.CLI(cl.Addrs[0], "-c", "set", key, "short"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	err = s.ReadRows(context.Background(), []int64{7}, buf)
	if !errors.Is(err, checkpoint.ErrMismatch) || !strings.Contains(err.Error(), key) {
		t.Fatalf("a short value: %v", err)
	}
	if out, err := cl.CLI(cl.Addrs[0], "-c", "set", "gg:broken:meta", "weight:x;rows=1;dtype=float32"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := cluster.Open(context.Background(), o, "broken"); !errors.Is(err, checkpoint.ErrFormat) || !strings.Contains(err.Error(), "weight:x") {
		t.Fatalf("a layout that is not one: %v", err)
	}
	if _, err := cluster.Open(context.Background(), o, "nothing"); !errors.Is(err, checkpoint.ErrMismatch) || !strings.Contains(err.Error(), "gg:nothing:meta") {
		t.Fatalf("a missing table: %v", err)
	}
	// An ACL user limited to the tables' keys reads them; a wrong password
	// is refused.
	for _, addr := range cl.Addrs {
		if out, err := cl.CLI(addr, "acl", "setuser", "trainer", "on", ">trainer-pw", "~gg:*", "+@all"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	user, err := cluster.Open(context.Background(), cluster.Options{Addrs: cl.Addrs[:1], Username: "trainer", Password: "trainer-pw", Timeout: 5 * time.Second},
		"words")

	if err != nil {
		t.Fatal(err)
	}
	if err := user.ReadRows(context.Background(), ids[:2], buf); err != nil {
		t.Fatal(err)
	}
	user.Close()
	if _, err := cluster.Open(context.Background(), cluster.Options{Addrs: cl.Addrs[:1], Username: "trainer", Password: "wrong", Timeout: 5 * time.Second},
		"words"); err == nil {
		t.Fatal("a wrong password opened the table")
	}

	start := time.Now()
	_, err = cluster.Open(context.Background(), cluster.Options{Addrs: []string{"127.0.0.1:1"}, Password: cl.Password, Timeout: time.Second}, "words")
	if err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("no node: %v after %v", err, time.Since(start))
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("the error does not name the node: %v", err)
	}
}

// Row-wise Adagrad applied on the server by the library's function equals
// optim.RowWiseAdagrad's Go step to the bit, and workers stepping the same
// rows at once lose no update: with a gradient of ones each update adds
// 1 to a row's accumulator, and after 100 the accumulator is 100 such
// additions on.
func TestRedisAdagradFunction(t *testing.T) {
	const vocab, dim = 3000, 16
	opt := optim.NewRowWiseAdagrad(0.05)
	opt.WeightDecay = 0.01
	cl, s, all, raw := functionTable(t, "ada", vocab, dim, opt.Columns(dim), 5)
	// The Go reference: the same rows in memory, stepped by StepRows.
	w := tensor.New(tensor.WithShape(vocab, dim), tensor.WithBacking(make([]float32, vocab*dim)))
	sum := tensor.New(tensor.WithShape(vocab, 1), tensor.WithBacking(make([]float32, vocab)))
	vals := fileio.Float32s(raw)
	for r := range vocab {
		copy(w.Float32s()[r*dim:(r+1)*dim], vals[r*(dim+1):])
	}
	r := newRand(9)
	for step := range 20 {
		ids, ids64, grad := randomRows(r, vocab, 200, dim)
		if err := serverStep(s, opt, ids64, grad); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		g := &optim.RowGrad{Rows: ids64, Values: tensor.New(tensor.WithShape(len(ids), dim), tensor.WithBacking(grad))}
		if err := opt.StepRows(optim.Rows{Weight: w, State: []*tensor.Dense{sum}, Slots: ids64, Step: 1}, g); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ReadRows(context.Background(), all, raw); err != nil {
		t.Fatal(err)
	}
	vals = fileio.Float32s(raw)
	for row := range vocab {
		for j := range dim {
			if got, want := vals[row*(dim+1)+j], w.Float32s()[row*dim+j]; math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("row %d value %d: server %v, Go %v", row, j, got, want)
			}
		}
		if got, want := vals[row*(dim+1)+dim], sum.Float32s()[row]; math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("row %d sum: server %v, Go %v", row, got, want)
		}
	}

	// Two workers, 50 steps each, of the same 100 rows at once.
	ids := make([]int64, 100)
	ones := make([]float32, len(ids)*dim)
	for k := range ids {
		ids[k] = int64(2000 + k)
	}
	for i := range ones {
		ones[i] = 1
	}
	if err := s.ReadRows(context.Background(), ids, raw[:len(ids)*s.RowBytes()]); err != nil {
		t.Fatal(err)
	}
	before := fileio.Float32s(raw[:len(ids)*s.RowBytes()])
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Go(func() {
			for range 50 {
				if err := serverStep(s, &optim.RowWiseAdagrad{LearnRate: 0.01, Eps: 1e-8, WeightDecay: 0}, ids, ones); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := s.ReadRows(context.Background(), ids, raw[:len(ids)*s.RowBytes()]); err != nil {
		t.Fatal(err)
	}
	after := fileio.Float32s(raw[:len(ids)*s.RowBytes()])
	for k := range ids {
		want := before[k*(dim+1)+dim]
		for range 100 {
			want = float32(float64(want) + 1)
		}
		if got := after[k*(dim+1)+dim]; got != want {
			t.Fatalf("row %d: its accumulator went from %v to %v over 100 updates, not to %v", ids[k], before[k*(dim+1)+dim], got, want)
		}
	}

	// A gradient of the wrong length changes nothing.
	err := serverStep(s, &optim.RowWiseAdagrad{LearnRate: 0.01, Eps: 1e-8, WeightDecay: 0}, ids[:2], ones[:dim])
	if !errors.Is(err, gather.ErrShape) {
		t.Fatalf("a short gradient: %v", err)
	}
	// Nor does a call one of whose rows is not a row: rows 7 and 1031
	// share a hash tag, so one call takes both, 7 first, and 1031 is not
	// a row.
	pair := []int64{7, 1031}
	if err := s.ReadRows(context.Background(), pair, raw[:2*s.RowBytes()]); err != nil {
		t.Fatal(err)
	}
	before = slices.Clone(fileio.Float32s(raw[:2*s.RowBytes()]))
	if out, err := cl.CLI(cl.Addrs[0], "-c", "set", "gg:ada:{7}:1031", "short"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	err = serverStep(s, &optim.RowWiseAdagrad{LearnRate: 0.01, Eps: 1e-8, WeightDecay: 0}, pair, ones[:2*dim])
	if err == nil || !strings.Contains(err.Error(), "gg:ada:{7}:1031") {
		t.Fatalf("a short row: %v", err)
	}
	if err := s.ReadRows(context.Background(), pair[:1], raw[:s.RowBytes()]); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fileio.Float32s(raw[:s.RowBytes()]), before[:dim+1]) {
		t.Fatal("row 7 changed though its call failed")
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

// SparseAdam applied on the server equals optim.SparseAdam's float32 step
// (StepRows, the step count kept with the table) to the bit: values and
// both moments, weight decay on.
func TestRedisAdamFunction(t *testing.T) {
	const vocab, dim = 3000, 16
	opt := optim.NewSparseAdam(0.01)
	opt.WeightDecay = 0.02
	_, s, all, raw := functionTable(t, "adam", vocab, dim, opt.Columns(dim), 6)
	// The Go reference: the rows in memory, stepped by StepRows.
	w := tensor.New(tensor.WithShape(vocab, dim), tensor.WithBacking(make([]float32, vocab*dim)))
	m := tensor.New(tensor.WithShape(vocab, dim), tensor.WithBacking(make([]float32, vocab*dim)))
	v := tensor.New(tensor.WithShape(vocab, dim), tensor.WithBacking(make([]float32, vocab*dim)))
	vals := fileio.Float32s(raw)
	for r := range vocab {
		copy(w.Float32s()[r*dim:(r+1)*dim], vals[r*3*dim:])
	}
	r := newRand(10)
	var steps int64
	for step := range 20 {
		ids, ids64, grad := randomRows(r, vocab, 300, dim)
		if err := serverStep(s, opt, ids64, grad); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		g := &optim.RowGrad{Rows: ids64, Values: tensor.New(tensor.WithShape(len(ids), dim), tensor.WithBacking(grad))}
		if err := opt.StepRows(optim.Rows{Weight: w, State: []*tensor.Dense{m, v}, Slots: ids64, Step: steps + 1}, g); err != nil {
			t.Fatal(err)
		}
		steps++
	}
	if err := s.ReadRows(context.Background(), all, raw); err != nil {
		t.Fatal(err)
	}
	vals = fileio.Float32s(raw)
	for row := range vocab {
		for j := range dim {
			for c, want := range []*tensor.Dense{w, m, v} {
				got := vals[row*3*dim+c*dim+j]
				if math.Float32bits(got) != math.Float32bits(want.Float32s()[row*dim+j]) {
					t.Fatalf("row %d, part %d, value %d: server %v, Go %v", row, c, j, got, want.Float32s()[row*dim+j])
				}
			}
		}
	}
	g := &optim.RowGrad{Rows: all[:1], Values: tensor.New(tensor.WithShape(1, dim), tensor.Of(tensor.Float32))}
	if err := optim.NewSparseAdam(0.1).Check(0, g, dim); !errors.Is(err, gather.ErrOption) {
		t.Fatalf("step count 0: %v", err)
	}
}

// A table trained in memory and exported loads onto the cluster (Import)
// and comes back (Export) to the same bytes, step count included.
func TestRedisExportImport(t *testing.T) {
	cl := localredis.Start(t, 3, 0)
	o := cluster.Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 5 * time.Second}
	dir := t.TempDir()
	cols := tabletest.Opt.Columns(tabletest.Dim)
	store, c := tabletest.Trained(t, 9)
	c.Close(context.Background())
	saved, back := filepath.Join(dir, "saved.safetensors"), filepath.Join(dir, "back.safetensors")
	if err := table.Export(context.Background(), saved, store, 9); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Create(context.Background(), o, "t", tabletest.Vocab, tabletest.Dim, tensor.Float32, table.WithState(cols...)); err != nil {
		t.Fatal(err)
	}
	rs, err := cluster.Open(context.Background(), o, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	steps, err := table.Import(context.Background(), rs, saved)
	if err != nil || steps != 9 {
		t.Fatalf("Import onto the cluster: step count %d, %v", steps, err)
	}
	if err := table.Export(context.Background(), back, rs, steps); err != nil {
		t.Fatal(err)
	}
	if !sameTable(t, saved, back) {
		t.Fatal("the table exported from the cluster differs from the one imported")
	}
}

// sameTable reports whether the table files at a and b hold the same
// tensor, to the byte, and the same metadata but for their identities
// (each file written gets its own).
func sameTable(t *testing.T, a, b string) bool {
	t.Helper()
	ia, ma, err := checkpoint.Inspect(a)
	if err != nil {
		t.Fatal(err)
	}
	ib, mb, err := checkpoint.Inspect(b)
	if err != nil {
		t.Fatal(err)
	}
	if ma["gathergrad.id"] == "" || ma["gathergrad.id"] == mb["gathergrad.id"] {
		t.Fatalf("two table files share the identity %q", ma["gathergrad.id"])
	}
	delete(ma, "gathergrad.id")
	delete(mb, "gathergrad.id")
	fa, _ := os.ReadFile(a)
	fb, _ := os.ReadFile(b)
	return len(ia) == 1 && len(ib) == 1 && maps.Equal(ma, mb) && ia[0].Name == ib[0].Name &&
		slices.Equal(ia[0].Shape, ib[0].Shape) && bytes.Equal(fa[ia[0].Offset:], fb[ib[0].Offset:])
}

// A master killed (SIGKILL) under a table: a store without Retry fails
// within its timeout, naming the dead node; with Retry, its replica takes
// over and reads and writes go on; every row written before the kill
// (acknowledged with Replicas 1: on a replica) reads back as it was.
func TestRedisFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a failover")
	}
	cl := localredis.Start(t, 3, 1)
	o := cluster.Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 2 * time.Second, Retry: 60 * time.Second, Replicas: 1}
	cols := tabletest.Opt.Columns(tabletest.Dim)
	if err := cluster.Create(context.Background(), o, "f", tabletest.Vocab, tabletest.Dim, tensor.Float32, table.WithSeed(2), table.WithState(cols...)); err != nil {
		t.Fatal(err)
	}
	s, err := cluster.Open(context.Background(), o, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all := make([]int64, tabletest.Vocab)
	for i := range all {
		all[i] = int64(i)
	}
	want := make([]byte, tabletest.Vocab*s.RowBytes())
	for i := range want {
		want[i] = byte(i * 13)
	}
	if err := s.WriteRows(context.Background(), all, want); err != nil {
		t.Fatal(err)
	}
	master, _ := masterWithReplica(t, cl, rand.New(rand.NewPCG(3, 4)))
	noRetry, err := cluster.Open(context.Background(), cluster.Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 2 * time.Second}, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer noRetry.Close()
	if err := cl.Kill(master); err != nil {
		t.Fatal(err)
	}
	// Without Retry: an error within the timeout, naming the dead node.
	start := time.Now()
	err = noRetry.ReadRows(context.Background(), all, make([]byte, len(want)))
	if err == nil || !strings.Contains(err.Error(), master) || time.Since(start) > 10*time.Second {
		t.Fatalf("a read from the dead master at %s: %v after %v", master, err, time.Since(start))
	}
	start = time.Now()
	got := make([]byte, len(want))
	if err := s.ReadRows(context.Background(), all, got); err != nil {
		t.Fatalf("reading after the master at %s died: %v", master, err)
	}
	t.Logf("master %s killed: reads went on after %v", master, time.Since(start))
	if !bytes.Equal(got, want) {
		t.Fatal("rows written before the kill read back changed")
	}
	for i := range want {
		want[i] ^= 0x5a
	}
	if err := s.WriteRows(context.Background(), all, want); err != nil {
		t.Fatal(err)
	}
	if err := s.ReadRows(context.Background(), all, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after the failover, rows written read back changed (%v)", err)
	}
}

// functionTable starts a cluster of 3 masters, writes a float32 table of
// vocab rows of dim values and the state cols to it, loads the Function
// library, and returns the cluster, the table's store (closed when the
// test ends), every row id and the rows as they start.
func functionTable(t *testing.T, name string, vocab, dim int, cols []driver.Column, seed uint64) (*localredis.Cluster, *cluster.Store, []int64, []byte) {
	cl := localredis.Start(t, 3, 0)
	o := cluster.Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 5 * time.Second}
	if err := cluster.Create(context.Background(), o, name, int64(vocab), dim, tensor.Float32, table.WithSeed(seed), table.WithState(cols...)); err != nil {
		t.Fatal(err)
	}
	s, err := cluster.Open(context.Background(), o, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	all := make([]int64, vocab)
	for i := range all {
		all[i] = int64(i)
	}
	raw := make([]byte, vocab*s.RowBytes())
	if err := s.ReadRows(context.Background(), all, raw); err != nil {
		t.Fatal(err)
	}
	return cl, s, all, raw
}

// randomRows draws n distinct rows of vocab, in order (as ints and as
// int64s), and a gradient of dim values for each from N(0, 1).
func randomRows(r *rand.Rand, vocab, n, dim int) ([]int, []int64, []float32) {
	ids := r.Perm(vocab)[:n]
	slices.Sort(ids)
	ids64 := make([]int64, n)
	for k, id := range ids {
		ids64[k] = int64(id)
	}
	grad := make([]float32, n*dim)
	for i := range grad {
		grad[i] = float32(r.NormFloat64())
	}
	return ids, ids64, grad
}

// serverStep has s apply opt to the rows ids on its servers (its Step,
// which a Shared table's Step calls), each by its gradient in grad.
func serverStep(s *cluster.Store, opt optim.Sparse, ids []int64, grad []float32) error {
	dim := len(grad) / max(len(ids), 1)
	return s.Step(context.Background(), opt, &optim.RowGrad{Rows: ids, Values: tensor.New(tensor.WithShape(len(ids), dim), tensor.WithBacking(grad))})
}

// plainRule is a rule no store has an encoding of.
type plainRule struct{ optim.SparseSGD }

func (plainRule) Name() string { return "plain" }

// A rule with no encoding registered under its name and type is an
// error naming the rule, before anything reaches a cluster; optim's rules
// have theirs.
func TestRedisRuleRegistry(t *testing.T) {
	_, err := cluster.Function(&plainRule{})
	if !errors.Is(err, errs.ErrOption) || !strings.Contains(err.Error(), `"plain"`) {
		t.Fatalf("an unregistered rule: %v", err)
	}
	// A rule of another type under a registered name is not the rule.
	if _, err := cluster.Function(&sgdNamed{}); !errors.Is(err, errs.ErrOption) {
		t.Fatalf("a rule of another type named sparse_sgd: %v", err)
	}
	for _, r := range []optim.Sparse{&optim.SparseSGD{}, optim.NewSparseAdam(1), optim.NewSparseAdagrad(1), optim.NewRowWiseAdagrad(1)} {
		fn, err := cluster.Function(r)
		if err != nil || !strings.HasPrefix(fn, "gg_"+r.Name()+"_") {
			t.Fatalf("%s: %q, %v", r.Name(), fn, err)
		}
	}
}

// sgdNamed is a rule of another type under SparseSGD's name.
type sgdNamed struct{ plainRule }

func (sgdNamed) Name() string { return "sparse_sgd" }

// StartLocal starts servers a Store reaches, and Stop stops them: the
// cluster's addresses answer no more.
func TestStartLocal(t *testing.T) {
	l, err := cluster.StartLocal(t.TempDir(), 3)
	if errors.Is(err, localredis.ErrNoServer) && os.Getenv(localredis.Require) == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := cluster.Create(ctx, l.Options, "items", 1000, 8, tensor.Float32, table.WithSeed(1)); err != nil {
		t.Fatal(err)
	}
	s, err := cluster.Open(ctx, l.Options, "items")
	if err != nil {
		t.Fatal(err)
	}
	if sc := s.Schema(); sc.Rows != 1000 || sc.Dim != 8 {
		t.Fatalf("the table opens as %+v", sc)
	}
	s.Close()
	l.Stop()
	o := l.Options
	o.Timeout = time.Second
	if _, err := cluster.Open(ctx, o, "items"); err == nil {
		t.Fatal("the cluster answers after Stop")
	}
	if _, err := cluster.StartLocal(t.TempDir(), 2); !errors.Is(err, errs.ErrOption) {
		t.Fatalf("a cluster of 2 masters: %v", err)
	}
}

// A half table (table.WithHalf) is refused before the cluster is
// reached: its servers step float32 and float64 rows.
func TestCreateHalfRefused(t *testing.T) {
	err := cluster.Create(context.Background(), cluster.Options{Addrs: []string{"127.0.0.1:1"}, Timeout: time.Second}, "h", 10, 4, tensor.Float32, table.WithHalf(driver.Float16))
	if !errors.Is(err, errs.ErrOption) || !strings.Contains(err.Error(), "float16") {
		t.Fatalf("a half table: %v", err)
	}
}
