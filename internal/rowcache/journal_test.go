package rowcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gathergrad/gather/internal/killtest"
)

const (
	jRows, jRowBytes, jSlots, jBatch, jSyncEvery = 2000, 16, 64, 48, 5
)

// initial returns the rows of the table before any step.
func initial() []byte {
	b := make([]byte, jRows*jRowBytes)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

// step changes the rows of batch number n through c: every id it names
// gets one added to one of its bytes, as many times as it is named.
func step(c *Cache, n int, slots []int32) error {
	ids := batchIDs(n)
	if err := c.Fetch(context.Background(), ids, slots); err != nil {
		return err
	}
	for k := range ids {
		c.Row(slots[k])[n%jRowBytes]++
		c.MarkDirty(slots[k])
	}
	return nil
}

func batchIDs(n int) []int64 {
	r := rand.New(rand.NewPCG(uint64(n), 99))
	ids := make([]int64, jBatch)
	for k := range ids {
		if k%2 == 0 {
			ids[k] = int64(r.IntN(20)) // hot rows, named again and again
		} else {
			ids[k] = int64(r.IntN(jRows))
		}
	}
	return ids
}

// expected returns the table after steps 0 to last, applied in memory.
func expected(last int) []byte {
	b := initial()
	for n := 0; n <= last; n++ {
		for _, id := range batchIDs(n) {
			b[int(id)*jRowBytes+n%jRowBytes]++
		}
	}
	return b
}

// jID is the identity of the tests' table.
const jID = "0123456789abcdef0123456789abcdef"

// openTable opens the table file at dir/table and its journal, with a
// cache far smaller than the rows the steps touch.
func openTable(dir string) (*os.File, *Journaled, *Cache, error) {
	return openTableID(dir, jID)
}

// openTableID is openTable for a table of identity id.
func openTableID(dir, id string) (*os.File, *Journaled, *Cache, error) {
	f, err := os.OpenFile(filepath.Join(dir, "table"), os.O_RDWR, 0)
	if err != nil {
		return nil, nil, nil, err
	}
	fs, err := NewFileStore(f, 0, jRowBytes, jRows, 8)
	if err != nil {
		return nil, nil, nil, err
	}
	j, err := OpenJournaled(fs, filepath.Join(dir, "table.journal"), id)
	if err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	c, err := New(j, jSlots, LRU)
	return f, j, c, err
}

// Rows written between syncs reach the file only at Sync; until then they
// are read back from the journal.
func TestJournaledSync(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "table"), initial(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, j, c, err := openTable(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	defer j.Close()
	slots := make([]int32, jBatch)
	for n := range 30 { // every step evicts dirty rows into the journal
		if err := step(c, n, slots); err != nil {
			t.Fatal(err)
		}
	}
	file, _ := os.ReadFile(filepath.Join(dir, "table"))
	if !bytes.Equal(file, initial()) {
		t.Fatal("the file changed before Sync")
	}
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	file, _ = os.ReadFile(filepath.Join(dir, "table"))
	if !bytes.Equal(file, expected(29)) {
		t.Fatal("after Sync the file does not hold the 30 steps")
	}
	if st, _ := os.Stat(filepath.Join(dir, "table.journal")); st.Size() != headerBytes {
		t.Fatalf("the journal holds %d bytes after Sync", st.Size())
	}
}

// Journals a crash can leave, and ones it cannot.
func TestJournalRecovery(t *testing.T) {
	rec := func(id int64, b byte) []byte {
		r := make([]byte, 8+jRowBytes)
		r[0], r[1] = byte(id), byte(id>>8)
		for i := 8; i < len(r); i++ {
			r[i] = b
		}
		return r
	}
	j := &Journaled{base: &FileStore{rowBytes: jRowBytes, rows: jRows}, id: jID}
	commit := func(recs ...[]byte) []byte {
		var crc uint32
		var body []byte
		for _, r := range recs {
			body = append(body, r...)
		}
		crc = crc32Update(crc, body)
		t := make([]byte, trailerBytes)
		for i := range 8 {
			t[i] = 0xff
		}
		t[8] = byte(len(recs))
		t[16], t[17], t[18], t[19] = byte(crc), byte(crc>>8), byte(crc>>16), byte(crc>>24)
		copy(t[20:], commitMagic)
		return append(body, t...)
	}
	head := j.header()
	r1, r2 := rec(3, 0xAA), rec(1999, 0xBB)
	committed := append(append([]byte{}, head...), commit(r1, r2)...)
	corrupt := bytes.Clone(committed)
	corrupt[headerBytes+10] ^= 1
	other := bytes.Clone(committed)
	other[8] = 99 // another row size
	stale := bytes.Clone(committed)
	copy(stale[24:], "fedcba9876543210fedcba9876543210") // another table's identity
	// A journal of the first version, without an identity, opens only for
	// a table without one (openTableID(dir, "")).
	v1 := append([]byte("GGJRNL01"), head[8:24]...)
	v1 = append(v1, commit(r1, r2)...)
	garbage := bytes.Clone(committed)
	copy(garbage, "NOTAJRNL")
	applied := func(b []byte) {
		copy(b[3*jRowBytes:4*jRowBytes], r1[8:])
		copy(b[1999*jRowBytes:], r2[8:])
	}
	for name, c := range map[string]struct {
		journal []byte
		id      string       // the table's identity, jID if ""
		want    func([]byte) // the file it leaves
		err     error
	}{
		"a header cut short":           {head[:30], "", func(b []byte) {}, nil},
		"another table's header alone": {stale[:headerBytes], "", func(b []byte) {}, nil},
		"a first version's, applied":   {v1, "-", applied, nil},
		"a first version's, refused":   {v1, "", nil, ErrJournal},
		"another table's identity":     {stale, "", nil, ErrJournal},
		"not a journal":                {garbage, "", nil, ErrJournal},
		"a header cut short, refused":  {[]byte("GGXX"), "", nil, ErrJournal},
		"empty":                        {nil, "", func(b []byte) {}, nil},
		"records, no commit":           {append(append(bytes.Clone(head), r1...), r2...), "", func(b []byte) {}, nil},
		"a record cut short":           {append(bytes.Clone(head), r1[:10]...), "", func(b []byte) {}, nil},
		"a trailer cut short":          {committed[:len(committed)-5], "", func(b []byte) {}, nil},
		"committed, not applied":       {committed, "", applied, nil},
		"committed, corrupt":           {corrupt, "", nil, ErrJournal},
		"another table's":              {other, "", nil, ErrJournal},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "table"), initial(), 0o644); err != nil {
			t.Fatal(err)
		}
		if c.journal != nil {
			if err := os.WriteFile(filepath.Join(dir, "table.journal"), c.journal, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		id := jID
		if c.id == "-" {
			id = ""
		}
		f, jr, _, err := openTableID(dir, id)
		if c.err != nil {
			if !errors.Is(err, c.err) || !strings.Contains(err.Error(), "table.journal") {
				t.Fatalf("%s: want %v naming the journal, got %v", name, c.err, err)
			}
			if file, _ := os.ReadFile(filepath.Join(dir, "table")); !bytes.Equal(file, initial()) {
				t.Fatalf("%s: the file changed", name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		jr.Close()
		f.Close()
		want := initial()
		c.want(want)
		if file, _ := os.ReadFile(filepath.Join(dir, "table")); !bytes.Equal(file, want) {
			t.Fatalf("%s: the file is not the last committed state", name)
		}
	}
}

// crc32Update is the journal's checksum, for building journals by hand.
func crc32Update(crc uint32, b []byte) uint32 { return crcOf(crc, b) }

// A process killed at random moments while it steps and syncs: every
// time, the table reopened (its journal replayed or dropped) is exactly
// the table of the last Sync that completed, or of the Sync under way if
// it had committed.
func TestKillAtRandomMoments(t *testing.T) {
	if dir := os.Getenv("GATHER_JOURNAL_CHILD"); dir != "" {
		journalChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("starts 20 processes")
	}
	kills := 0
	setup := func(dir string) {
		if err := os.WriteFile(filepath.Join(dir, "table"), initial(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	killtest.Run(t, killtest.Config{Test: "TestKillAtRandomMoments", Env: "GATHER_JOURNAL_CHILD", Kills: 20, Seed: 11, Window: "syncing"}, setup, func(k killtest.Kill) {
		kills++
		f, j, _, err := openTable(k.Dir)
		if err != nil {
			t.Fatalf("kill %d: reopening: %v", k.N, err)
		}
		j.Close()
		f.Close()
		file, _ := os.ReadFile(filepath.Join(k.Dir, "table"))
		ok := bytes.Equal(file, stateAt(k.Step))
		if k.State == "syncing" && !ok {
			ok = bytes.Equal(file, stateAt(k.Step-jSyncEvery))
		}
		if !ok {
			t.Fatalf("kill %d (%s %d): the reopened table is not the state of a completed Sync", k.N, k.State, k.Step)
		}
	})
	t.Logf("%d kills, each reopened to the state of its last Sync", kills)
}

// stateAt is the table after the steps up to last, or before any.
func stateAt(last int) []byte {
	if last < 0 {
		return initial()
	}
	return expected(last)
}

// journalChild steps for ever, syncing every jSyncEvery steps, and records
// in dir/marker ("syncing N" before a Sync of the steps up to N, "synced
// N" after it) what a crash may leave.
func journalChild(dir string) {
	f, j, c, err := openTable(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer f.Close()
	defer j.Close()
	mark := func(state string, n int) {
		if err := killtest.Mark(dir, state, n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	slots := make([]int32, jBatch)
	for n := 0; ; n++ {
		if err := step(c, n, slots); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if n%jSyncEvery == jSyncEvery-1 {
			mark("syncing", n)
			if err := c.Sync(context.Background()); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			mark("synced", n)
		}
	}
}
