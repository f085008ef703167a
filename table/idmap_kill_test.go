package table_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/killtest"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// The map of the kill test: 60 rows, ids admitted at their second
// sighting, LRU; its table has the map's rows past the padding row.
var (
	rmOpts = driver.IDMapOptions{Rows: 60, AdmitAfter: 2, SketchWidth: 256}
	rmInit = driver.RowInit{Seed: 7, Std: 0.1}
)

const rmBatch = 24

// rmStep runs training step n on raw ids: a batch drawn from n out of
// 200 ids that drift with n, mapped by m, new rows started, then
// SparseAdam on the rows the batch holds.
func rmStep(c *table.Cached, m *table.IDMap, n int) error {
	r := rand.New(rand.NewPCG(uint64(n), 9))
	raw := make([]int64, rmBatch)
	for k := range raw {
		raw[k] = int64(n/4+r.IntN(40)) * -7919
	}
	rows := make([]int64, rmBatch)
	fresh, err := m.Map(context.Background(), raw, rows, int64(n), nil)
	if err != nil {
		return err
	}
	if err := c.Reset(context.Background(), fresh, rmInit); err != nil {
		return err
	}
	held := slices.DeleteFunc(slices.Clone(rows), func(r int64) bool { return r == int64(rmOpts.Rows) })
	slices.Sort(held)
	held = slices.Compact(held)
	c.NewBatch()
	if err := c.Fetch(context.Background(), held, make([]int32, len(held))); err != nil {
		return err
	}
	vals := make([]float32, len(held)*kDim)
	for i := range vals {
		vals[i] = float32(r.NormFloat64())
	}
	g := &optim.RowGrad{Rows: held, Values: tensor.New(tensor.WithShape(len(held), kDim), tensor.WithBacking(vals))}
	return c.Step(context.Background(), kOpt, g)
}

// rmState returns the rows 0 to Rows (values and state), the step count
// and the map's state, as bytes to compare.
func rmState(t *testing.T, c *table.Cached, m *table.IDMap) []byte {
	t.Helper()
	ids := make([]int64, rmOpts.Rows+1)
	for i := range ids {
		ids[i] = int64(i)
	}
	rows, err := c.Read(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	state, err := m.State()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.Write(fileio.LittleEndianBytes(rows.Float32s()))
	fmt.Fprintln(&b, c.Stats().Steps)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range state {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintln(&b, k)
		b.Write(state[k].(*tensor.Dense).Header.Raw)
	}
	return b.Bytes()
}

// A process that trains raw ids through an IDMap kept in its table
// file's rows (FileOptions.IDMap), syncing every 5 steps, is killed at 16
// random moments: each time the file reopens with the map and the rows
// of one Sync (the last that returned, or the one under way if its
// commit reached the disk), bit for bit as a replay in memory of the
// same steps leaves them.
func TestKillKeepIDMap(t *testing.T) {
	if dir := os.Getenv("GATHER_IDMAP_CHILD"); dir != "" {
		rmChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("starts 16 processes")
	}
	extra, err := table.IDMapRows(rmOpts, 3*kDim*4)
	if err != nil {
		t.Fatal(err)
	}
	vocab := int64(rmOpts.Rows+1) + extra
	src := filepath.Join(t.TempDir(), "t.safetensors")
	if err := table.Create(src, "t", int(vocab), kDim, tensor.Float32, table.WithState(kOpt.Columns(kDim)...)); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	// want[n]: the state after steps 0 to n, replayed on a copy.
	want := map[int][]byte{}
	wantAt := func(last int) []byte {
		if w, ok := want[last]; ok {
			return w
		}
		path := filepath.Join(t.TempDir(), "t.safetensors")
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		c, m := rmOpen(path)
		defer c.Close(context.Background())
		for n := 0; n <= last; n++ {
			if err := rmStep(c, m, n); err != nil {
				t.Fatal(err)
			}
		}
		want[last] = rmState(t, c, m)
		return want[last]
	}
	setup := func(dir string) {
		if err := os.WriteFile(filepath.Join(dir, "t.safetensors"), orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	killtest.Run(t, killtest.Config{Test: "TestKillKeepIDMap", Env: "GATHER_IDMAP_CHILD", Kills: 16, Seed: 21, Window: "syncing"}, setup, func(k killtest.Kill) {
		c, m := rmOpen(filepath.Join(k.Dir, "t.safetensors"))
		got := rmState(t, c, m)
		st, _ := m.Stats(context.Background())
		used := st.Used
		c.Close(context.Background())
		ok := bytes.Equal(got, wantAt(k.Step))
		if !ok && k.State == "syncing" {
			ok = k.Step-kSyncEvery < 0 && used == 0 || k.Step-kSyncEvery >= 0 && bytes.Equal(got, wantAt(k.Step-kSyncEvery))
		}
		if !ok {
			t.Fatalf("kill %d (%s %d): the reopened map and rows are not those of a completed Sync", k.N, k.State, k.Step)
		}
		t.Logf("kill %d: %s %d, reopened with %d ids held", k.N, k.State, k.Step, used)
	})
}

// rmOpen opens the table file at path with its map.
func rmOpen(path string) (*table.Cached, *table.IDMap) {
	m, err := table.NewIDMap("t", rmOpts)
	if err != nil {
		panic(err)
	}
	c, err := table.OpenCached(context.Background(), path, table.CacheOptions{Budget: int64(32 * (3*kDim*4 + 72))}, table.FileOptions{Depth: 4, IDMap: m, IDMapRow: int64(rmOpts.Rows + 1)})
	if err != nil {
		panic(err)
	}
	return c, m
}

// rmChild trains for ever, syncing every kSyncEvery steps, marking in
// dir what a crash may leave ("syncing N", "synced N").
func rmChild(dir string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c, m := rmOpen(filepath.Join(dir, "t.safetensors"))
	for n := 0; ; n++ {
		if err := rmStep(c, m, n); err != nil {
			fail(err)
		}
		if n%kSyncEvery == kSyncEvery-1 {
			if err := killtest.Mark(dir, "syncing", n); err != nil {
				fail(err)
			}
			if err := c.Sync(context.Background()); err != nil {
				fail(err)
			}
			if err := killtest.Mark(dir, "synced", n); err != nil {
				fail(err)
			}
		}
	}
}
