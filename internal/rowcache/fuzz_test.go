package rowcache

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzJournal opens a table with any bytes as its journal: never a
// panic; either an error (a bad journal is ErrJournal), or the table is
// left as it was or with committed rows applied, and the journal empty.
func FuzzJournal(f *testing.F) {
	j := &Journaled{base: &FileStore{rowBytes: jRowBytes, rows: jRows}, id: jID}
	head := j.header()
	f.Add([]byte{})
	f.Add(head)
	rec := append(bytes.Clone(head), 3, 0, 0, 0, 0, 0, 0, 0)
	rec = append(rec, bytes.Repeat([]byte{0xAA}, jRowBytes)...)
	f.Add(rec)
	trailer := make([]byte, trailerBytes)
	for i := range 8 {
		trailer[i] = 0xff
	}
	copy(trailer[20:], commitMagic)
	f.Add(append(bytes.Clone(head), trailer...))
	f.Fuzz(func(t *testing.T, journal []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "table"), initial(), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "table.journal"), journal, 0o644); err != nil {
			t.Fatal(err)
		}
		fh, jr, _, err := openTable(dir)
		if err != nil {
			if !errors.Is(err, ErrJournal) {
				t.Fatalf("an error that is not ErrJournal: %v", err)
			}
			if file, _ := os.ReadFile(filepath.Join(dir, "table")); !bytes.Equal(file, initial()) {
				t.Fatal("the table changed though the journal was refused")
			}
			return
		}
		jr.Close()
		fh.Close()
		if st, _ := os.Stat(filepath.Join(dir, "table")); st.Size() != int64(len(initial())) {
			t.Fatalf("the table is %d bytes, not %d", st.Size(), len(initial()))
		}
		if jb, _ := os.ReadFile(filepath.Join(dir, "table.journal")); !bytes.Equal(jb, head) {
			t.Fatal("the journal was not emptied")
		}
	})
}
