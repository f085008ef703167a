package table_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/killtest"
	"github.com/gathergrad/gather/internal/tabletest"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

const (
	kVocab, kDim, kBatch, kSyncEvery = tabletest.Vocab, tabletest.Dim, tabletest.Batch, 5
)

var (
	kOpt      = tabletest.Opt
	kStep     = tabletest.Step
	kStepWith = tabletest.StepWith
	kTrained  = tabletest.Trained
)

func kOpen(path string, budget int64) (*table.Cached, error) {
	return table.OpenCached(context.Background(), path, table.CacheOptions{Budget: budget}, table.FileOptions{Depth: 4})
}

// kWant returns every row (values and state) and the step count of the
// table after steps 0 to last, computed on a cache in front of the rows in
// memory large enough to hold them all.
func kWant(t *testing.T, initial *tensor.Dense, last int) ([]byte, int64) {
	store, err := table.NewMemoryStore("t", initial, kOpt.Columns(kDim)...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := table.NewCached(context.Background(), store, table.CacheOptions{Budget: 1 << 22})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	for n := 0; n <= last; n++ {
		if err := kStep(c, n); err != nil {
			t.Fatal(err)
		}
	}
	rows, steps := kRead(t, c)
	return rows, steps
}

func kRead(t *testing.T, c *table.Cached) ([]byte, int64) {
	ids := make([]int64, kVocab)
	for i := range ids {
		ids[i] = int64(i)
	}
	rows, err := c.Read(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	return fileio.LittleEndianBytes(rows.Float32s()), c.Stats().Steps
}

// A process that trains a table file behind a small cache with SparseAdam
// and syncs every 5 steps is killed at 20 random moments: each time, the
// file reopened is, bit for bit, the table, the optimiser's moments and
// its step count of the last Sync that returned (or of the Sync under way,
// if its commit had reached the disk).
func TestKillCachedTable(t *testing.T) {
	if dir := os.Getenv("GATHER_CACHED_CHILD"); dir != "" {
		kChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("starts 20 processes")
	}
	base := t.TempDir()
	src := filepath.Join(base, "t.safetensors")
	if err := table.Create(src, "t", kVocab, kDim, tensor.Float32, table.WithSeed(3), table.WithState(kOpt.Columns(kDim)...)); err != nil {
		t.Fatal(err)
	}
	c, err := kOpen(src, 1<<22)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, kVocab)
	for i := range ids {
		ids[i] = int64(i)
	}
	all, err := c.Read(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	c.Close(context.Background())
	initial := tensor.New(tensor.WithShape(kVocab, kDim), tensor.WithBacking(make([]float32, kVocab*kDim)))
	for r := range kVocab {
		copy(initial.Float32s()[r*kDim:(r+1)*kDim], all.Float32s()[r*3*kDim:])
	}
	orig, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}

	want := map[int][]byte{}
	wantSteps := map[int]int64{}
	setup := func(dir string) {
		if err := os.WriteFile(filepath.Join(dir, "t.safetensors"), orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fresh := filepath.Join(base, "fresh.safetensors")
	if err := table.Create(fresh, "t", kVocab, kDim, tensor.Float32, table.WithSeed(4), table.WithState(kOpt.Columns(kDim)...)); err != nil {
		t.Fatal(err)
	}
	c, err = kOpen(fresh, 1<<22)
	if err != nil {
		t.Fatal(err)
	}
	freshRows, _ := kRead(t, c)
	c.Close(context.Background())
	recreated := 0
	killtest.Run(t, killtest.Config{Test: "TestKillCachedTable", Env: "GATHER_CACHED_CHILD", Kills: 20, Seed: 13, Window: "syncing"}, setup, func(k killtest.Kill) {
		if k.State == "syncing" {
			// What a user may do next: create a new table at the path,
			// which the killed table's journal must never reach.
			recreated++
			kRecreate(t, k.Dir, freshRows)
		}
		c, err := kOpen(filepath.Join(k.Dir, "t.safetensors"), 1<<22)
		if err != nil {
			t.Fatalf("kill %d: reopening: %v", k.N, err)
		}
		got, steps := kRead(t, c)
		c.Close(context.Background())
		match := func(last int) bool {
			if last < 0 {
				return steps == 0 && bytes.Equal(got, fileio.LittleEndianBytes(all.Float32s()))
			}
			if _, ok := want[last]; !ok {
				want[last], wantSteps[last] = kWant(t, initial, last)
			}
			return steps == wantSteps[last] && bytes.Equal(got, want[last])
		}
		ok := match(k.Step)
		if !ok && k.State == "syncing" {
			ok = match(k.Step - kSyncEvery)
		}
		if !ok {
			t.Fatalf("kill %d (%s %d): the reopened table (step count %d) is not the state of a completed Sync", k.N, k.State, k.Step, steps)
		}
		t.Logf("kill %d: %s %d, reopened at step count %d", k.N, k.State, k.Step, steps)
	})
	t.Logf("%d kills mid-Sync, each followed by a new table at a copy of its path, which opened fresh", recreated)
}

// kRecreate copies the table and the journal a kill left in dir to a new
// directory, creates a table of seed 4 there (WithReplace), and checks
// that it opens as a fresh table (rows freshRows, step count 0), whatever
// the old journal held.
func kRecreate(t *testing.T, dir string, freshRows []byte) {
	t.Helper()
	again := t.TempDir()
	path := filepath.Join(again, "t.safetensors")
	for _, name := range []string{"t.safetensors", "t.safetensors.journal"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(again, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := table.Create(path, "t", kVocab, kDim, tensor.Float32, table.WithSeed(4), table.WithState(kOpt.Columns(kDim)...), table.WithReplace()); err != nil {
		t.Fatal(err)
	}
	c, err := kOpen(path, 1<<22)
	if err != nil {
		t.Fatalf("opening the table created over a killed one: %v", err)
	}
	defer c.Close(context.Background())
	if got, steps := kRead(t, c); steps != 0 || !bytes.Equal(got, freshRows) {
		t.Fatalf("the table created over a killed one opened at step count %d, its rows fresh: %v", steps, bytes.Equal(got, freshRows))
	}
}

// kChild trains for ever, syncing every kSyncEvery steps, and records in
// dir/marker ("syncing N" before a Sync of the steps up to N, "synced N"
// after it) what a crash may leave.
func kChild(dir string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c, err := kOpen(filepath.Join(dir, "t.safetensors"), int64(64*(3*kDim*4+72)))
	if err != nil {
		fail(err)
	}
	mark := func(state string, n int) {
		if err := killtest.Mark(dir, state, n); err != nil {
			fail(err)
		}
	}
	for n := 0; ; n++ {
		if err := kStep(c, n); err != nil {
			fail(err)
		}
		if n%kSyncEvery == kSyncEvery-1 {
			mark("syncing", n)
			if err := c.Sync(context.Background()); err != nil {
				fail(err)
			}
			mark("synced", n)
		}
	}
}

// Hostile files: a table file of another layout, a truncated file, a
// journal of another table or with a corrupt commit are errors naming the
// file, and leave it as it was.
func TestOpenCachedBadFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.safetensors")
	cols := kOpt.Columns(kDim)
	if err := table.Create(path, "t", 100, kDim, tensor.Float32, table.WithState(cols...)); err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(path)

	if err := os.WriteFile(path, orig[:len(orig)-10], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := kOpen(path, 1<<20); !errors.Is(err, checkpoint.ErrFormat) {
		t.Fatalf("truncated: %v", err)
	}
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain.safetensors")
	if err := table.Create(plain, "t", kVocab, kDim, tensor.Float32); err != nil {
		t.Fatal(err)
	}
	pc, err := kOpen(plain, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := kStep(pc, 0); !errors.Is(err, errs.ErrOption) || !strings.Contains(err.Error(), "exp_avg") {
		t.Fatalf("a table without state, stepped by an optimiser with state: %v", err)
	}
	pc.Close(context.Background())

	// A journal of another table.
	if err := os.WriteFile(path+".journal", []byte("GGJRNL01 something else entirely"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = kOpen(path, 1<<20)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(path+".journal")) {
		t.Fatalf("a foreign journal: %v", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, orig) {
		t.Fatal("the table changed")
	}
	os.Remove(path + ".journal")

	c, err := kOpen(path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	c.Close(context.Background())
}

// A table trained in memory is exported to a table file, which
// OpenCached opens with its rows and step count and Import loads into
// another store, equal; a file of another layout or held open is refused.
func TestExportImport(t *testing.T) {
	dir := t.TempDir()
	cols := kOpt.Columns(kDim)
	store, c := kTrained(t, 12)
	want, steps := kRead(t, c)
	c.Close(context.Background())

	path := filepath.Join(dir, "t.safetensors")
	if err := table.Export(context.Background(), path, store, steps); err != nil {
		t.Fatal(err)
	}
	opened, err := kOpen(path, 1<<22)
	if err != nil {
		t.Fatal(err)
	}
	got, gotSteps := kRead(t, opened)
	if gotSteps != 12 || !bytes.Equal(got, want) {
		t.Fatalf("the exported file holds step count %d and other rows", gotSteps)
	}
	if _, err := table.Import(context.Background(), store, path); !errors.Is(err, table.ErrInUse) {
		t.Fatalf("importing a file an open table holds: %v", err)
	}
	opened.Close(context.Background())

	zero := tensor.New(tensor.WithShape(kVocab, kDim), tensor.WithBacking(make([]float32, kVocab*kDim)))
	back, err := table.NewMemoryStore("t", zero, cols...)
	if err != nil {
		t.Fatal(err)
	}
	n, err := table.Import(context.Background(), back, path)
	if err != nil || n != 12 {
		t.Fatalf("Import: step count %d, %v", n, err)
	}
	c2, err := table.NewCached(context.Background(), back, table.CacheOptions{Budget: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(context.Background())
	if got, _ := kRead(t, c2); !bytes.Equal(got, want) {
		t.Fatal("the imported rows differ")
	}
	ada, err := table.NewMemoryStore("t", zero, optim.NewSparseAdagrad(0.1).Columns(kDim)...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := table.Import(context.Background(), ada, path); !errors.Is(err, checkpoint.ErrMismatch) {
		t.Fatalf("another optimiser's state: %v", err)
	}
	other, _ := table.NewMemoryStore("t", zero)
	if _, err := table.Import(context.Background(), other, path); !errors.Is(err, checkpoint.ErrMismatch) {
		t.Fatalf("a store of other rows: %v", err)
	}
}
