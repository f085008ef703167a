package table_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// committedJournal returns a journal, as a Sync that a crash cut after its
// commit leaves it, for the table file at path: every row set to 0x41
// bytes and the step count 1500.
func committedJournal(t *testing.T, path string, rowBytes int) []byte {
	t.Helper()
	infos, meta, err := checkpoint.Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	rows := infos[0].Shape[0]
	j := []byte("GGJRNL02")
	j = binary.LittleEndian.AppendUint64(j, uint64(rowBytes))
	j = binary.LittleEndian.AppendUint64(j, uint64(rows))
	id := make([]byte, 32)
	copy(id, meta["gathergrad.id"])
	j = append(j, id...)
	var body []byte
	for r := range rows {
		body = binary.LittleEndian.AppendUint64(body, uint64(r))
		body = append(body, bytes.Repeat([]byte{0x41}, rowBytes)...)
	}
	body = binary.LittleEndian.AppendUint64(body, ^uint64(1)) // the step count's record
	body = append(body, "00000000000000001500"...)
	j = append(j, body...)
	j = binary.LittleEndian.AppendUint64(j, ^uint64(0))
	j = binary.LittleEndian.AppendUint64(j, uint64(rows+1))
	j = binary.LittleEndian.AppendUint32(j, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	return append(j, "CMIT"...)
}

// A table created over one that a crash left with a committed journal
// never inherits that journal: Create removes it, and a journal of another
// table found beside a file (a crash between Create's rename and that
// removal) is refused with ErrJournal, naming both tables, the file
// untouched.
func TestStaleJournal(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.safetensors")
	cols := kOpt.Columns(kDim)
	const vocab = kVocab
	rowBytes := 3 * kDim * 4
	if err := table.Create(path, "t", vocab, kDim, tensor.Float32, table.WithSeed(1), table.WithState(cols...)); err != nil {
		t.Fatal(err)
	}
	stale := committedJournal(t, path, rowBytes)
	// The journal is a good one: the old table applies it.
	if err := os.WriteFile(path+".journal", stale, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := kOpen(path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Read(context.Background(), []int64{7}); err != nil || c.Stats().Steps != 1500 || got.Float32s()[0] != math.Float32frombits(0x41414141) {
		t.Fatalf("the old table did not apply its committed journal: step count %d, %v", c.Stats().Steps, err)
	}
	c.Close(context.Background())
	if err := os.WriteFile(path+".journal", stale, 0o644); err != nil {
		t.Fatal(err)
	}

	fresh := filepath.Join(dir, "fresh.safetensors")
	if err := table.Create(fresh, "t", vocab, kDim, tensor.Float32, table.WithSeed(2), table.WithState(cols...)); err != nil {
		t.Fatal(err)
	}
	want := readAll(t, fresh)

	if err := table.Create(path, "t", vocab, kDim, tensor.Float32, table.WithSeed(2), table.WithState(cols...), table.WithReplace()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".journal"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Create left the old table's journal: %v", err)
	}
	c, err = kOpen(path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	steps := c.Stats().Steps
	c.Close(context.Background())
	if got := readAll(t, path); steps != 0 || !bytes.Equal(got, want) {
		t.Fatalf("the new table opened at step count %d, its rows those of a fresh table: %v", steps, bytes.Equal(got, want))
	}

	// The old journal put back beside the new table: refused, naming both.
	if err := os.WriteFile(path+".journal", stale, 0o644); err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(path)
	_, meta, _ := checkpoint.Inspect(path)
	_, err = kOpen(path, 1<<20)
	if !errors.Is(err, table.ErrJournal) || !strings.Contains(err.Error(), path+".journal") {
		t.Fatalf("another table's journal: %v", err)
	}
	if !strings.Contains(err.Error(), meta["gathergrad.id"]) || !strings.Contains(err.Error(), string(stale[24:56])) {
		t.Fatalf("the error does not name both tables (%s, %s): %v", meta["gathergrad.id"], stale[24:56], err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, orig) {
		t.Fatal("the table changed though its journal was refused")
	}
}

// readAll returns every row, values and state, of the table file at path
// with kOpt's state.
func readAll(t *testing.T, path string) []byte {
	t.Helper()
	c, err := kOpen(path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	rows, _ := kRead(t, c)
	return rows
}

// SparseSGD, which keeps no state, trains a table file without state
// behind a cache (Create without WithState, OpenCached with no columns):
// bit for bit as behind a cache of the rows in memory, and the file,
// reopened, holds the rows of the last Sync and still opens with Open.
func TestCachedWithoutState(t *testing.T) {
	sgd := &optim.SparseSGD{LearnRate: 0.1}
	path := filepath.Join(t.TempDir(), "t.safetensors")
	if err := table.Create(path, "t", kVocab, kDim, tensor.Float32, table.WithSeed(3)); err != nil {
		t.Fatal(err)
	}
	f, err := table.Open(path, "t")
	if err != nil {
		t.Fatal(err)
	}
	w, _ := f.Weight()
	initial := w.Clone().(*tensor.Dense)
	f.Close()

	store, err := table.NewMemoryStore("t", initial)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := table.NewCached(context.Background(), store, table.CacheOptions{Budget: 1 << 22})
	if err != nil {
		t.Fatal(err)
	}
	c, err := table.OpenCached(context.Background(), path, table.CacheOptions{Budget: int64(64 * (kDim*4 + 72))}, table.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for n := range 40 {
		if err := kStepWith(mem, n, sgd); err != nil {
			t.Fatal(err)
		}
		if err := kStepWith(c, n, sgd); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := kRead(t, mem)
	if got, _ := kRead(t, c); !bytes.Equal(got, want) {
		t.Fatal("SparseSGD through the file's cache differs from the rows in memory")
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	f, err = table.Open(path, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, _ = f.Weight()
	if !bytes.Equal(fileio.LittleEndianBytes(w.Float32s()), want) {
		t.Fatal("the file reopened does not hold the trained rows")
	}
}

// The journal of a table in a file stays within FileOptions.JournalLimit
// (and one batch's evictions): past it, Fetch syncs on its own, and the
// table trains bit for bit as without a limit; with ManualSync, Fetch
// fails with ErrJournalFull until Sync.
func TestJournalLimit(t *testing.T) {
	dir := t.TempDir()
	cols := kOpt.Columns(kDim)
	rowBytes := int64(3 * kDim * 4)
	budget := 64 * (rowBytes + 72)
	const limit = 8 << 10
	open := func(name string, fo table.FileOptions) *table.Cached {
		path := filepath.Join(dir, name)
		if err := table.Create(path, "t", kVocab, kDim, tensor.Float32, table.WithSeed(3), table.WithState(cols...)); err != nil {
			t.Fatal(err)
		}
		c, err := table.OpenCached(context.Background(), path, table.CacheOptions{Budget: budget}, fo)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	bounded := open("bounded", table.FileOptions{JournalLimit: limit})
	unbounded := open("unbounded", table.FileOptions{JournalLimit: -1})
	largest, largestFree := int64(0), int64(0)
	for n := range 200 {
		if err := kStep(bounded, n); err != nil {
			t.Fatal(err)
		}
		if err := kStep(unbounded, n); err != nil {
			t.Fatal(err)
		}
		largest = max(largest, fileSize(t, filepath.Join(dir, "bounded.journal")))
		largestFree = max(largestFree, fileSize(t, filepath.Join(dir, "unbounded.journal")))
	}
	// A batch evicts at most kBatch rows of rowBytes and 8 bytes of id each.
	if slack := int64(kBatch) * (rowBytes + 8); largest > limit+slack || largestFree <= limit+slack {
		t.Fatalf("the journal reached %d bytes with a limit of %d (and %d of one batch), %d without", largest, limit, slack, largestFree)
	}
	a, sa := kRead(t, bounded)
	b, sb := kRead(t, unbounded)
	if sa != sb || !bytes.Equal(a, b) {
		t.Fatal("the table whose journal was bounded trained otherwise")
	}

	manual := open("manual", table.FileOptions{JournalLimit: limit, ManualSync: true})
	n := 0
	var err error
	for ; n < 200 && err == nil; n++ {
		err = kStep(manual, n)
	}
	if !errors.Is(err, table.ErrJournalFull) || !strings.Contains(err.Error(), "Sync") {
		t.Fatalf("past the limit with ManualSync: %v after %d steps", err, n)
	}
	if err := manual.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := kStep(manual, n); err != nil {
		t.Fatalf("after Sync: %v", err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
