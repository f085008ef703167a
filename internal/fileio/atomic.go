// Package fileio writes the files a user keeps so that a crash never
// leaves a torn one, and maps files into memory. It holds the module's
// file-level unsafe code: views of mapped memory as typed slices.
package fileio

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tempPrefix returns the prefix of the temporary files of a write to path:
// ".<base>.tmp-", in path's directory, so that a rename over path is
// atomic and the next write to path finds the ones a killed write left.
func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// WriteAtomic writes path with write, so that path holds either its old
// contents or the new ones, whatever moment the process is killed at: write
// fills a temporary file in path's directory, which is synced, closed,
// renamed over path, and the directory synced. Temporary files that an
// earlier, killed write to path left are removed first. On error the
// temporary file is removed and path is untouched. The file is created as
// os.Create creates one: mode 0666 less the umask.
//
// A file at path that a Mapping holds (an open table, in this process or
// another) is not replaced: the error wraps errs.ErrInUse. One this
// process reads (Hold, a Mapping of it) is not replaced either, under any
// of its names: the error wraps errs.ErrSameFile and names both. The old file
// stays locked until the new one has replaced it, so that no Map can
// take it meanwhile.
func WriteAtomic(path string, write func(f *os.File) error) (err error) {
	dir := filepath.Dir(path)
	if err := Distinct(path); err != nil {
		return err
	}
	old, err := lockOld(path)
	if err != nil {
		return err
	}
	if old != nil {
		defer old.Close()
	}
	if err := RemoveStale(path); err != nil {
		return err
	}
	f, err := createTemp(dir, tempPrefix(path))
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			Remove(tmp)
		}
	}()
	if err := write(f); err != nil {
		return err
	}
	if err := Sync(f); err != nil {
		return fmt.Errorf("syncing %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// lockOld opens and locks the file at path, if there is one, or returns
// an error wrapping errs.ErrInUse if a Mapping holds it.
func lockOld(path string) (*os.File, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
		// Nothing to lock, or a file this process cannot read, which it
		// cannot have mapped either: the rename decides.
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := Lock(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// createTemp creates a new file named prefix and a random number in dir,
// as os.CreateTemp does, but with os.Create's mode (0666 less the umask)
// rather than 0600: the file becomes the user's file at path.
func createTemp(dir, prefix string) (*os.File, error) {
	for range 10000 {
		name := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if !errors.Is(err, os.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("creating a temporary file in %s: %w", dir, os.ErrExist)
}

// RemoveStale removes the temporary files a killed WriteAtomic to path
// left in its directory.
func RemoveStale(path string) error {
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	prefix := tempPrefix(path)
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), prefix) {
			if err := Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}
