package fileio

import (
	"os"
	"path/filepath"
	"testing"
)

// A file WriteAtomic writes has the mode os.Create gives a new file (0666
// less the umask), not os.CreateTemp's 0600, and holds what was written.
func TestWriteAtomicMode(t *testing.T) {
	dir := t.TempDir()
	ref, err := os.Create(filepath.Join(dir, "ref"))
	if err != nil {
		t.Fatal(err)
	}
	ref.Close()
	want, err := os.Stat(filepath.Join(dir, "ref"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "table.safetensors")
	if err := WriteAtomic(path, func(f *os.File) error { _, err := f.WriteString("x"); return err }); err != nil {
		t.Fatal(err)
	}
	got, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Mode().Perm() != want.Mode().Perm() {
		t.Errorf("WriteAtomic made mode %v, os.Create %v", got.Mode().Perm(), want.Mode().Perm())
	}
	if b, _ := os.ReadFile(path); string(b) != "x" {
		t.Errorf("contents %q, want %q", b, "x")
	}
}
