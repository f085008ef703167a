package fileio

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
)

// An FS is the file operations through which every write path of the
// module's files goes: a table file and its journal, a mapped table's
// flush, a checkpoint, a serve file, word vectors. Reads go to the files
// directly. The package's own is the operating system's; a test sets one
// that records the operations (SetFS), to rebuild what a power cut at
// each of them would leave.
type FS interface {
	// OpenFile opens a file for writing, as os.OpenFile does.
	OpenFile(name string, flag int, perm os.FileMode) (*os.File, error)
	// WriteAt writes b at offset off of f (pwrite).
	WriteAt(f *os.File, b []byte, off int64) (int, error)
	// Truncate sets f's size; Allocate sets it with its blocks
	// allocated (fallocate), or returns an error if the system cannot.
	Truncate(f *os.File, size int64) error
	Allocate(f *os.File, size int64) error
	// Sync makes f's contents durable (fsync).
	Sync(f *os.File) error
	// Flush makes data, the whole of a shared mapping of f, durable in
	// f (msync, then fsync).
	Flush(f *os.File, data []byte) error
	// Rename, Remove and SyncDir change and make durable a directory's
	// entries.
	Rename(oldpath, newpath string) error
	Remove(name string) error
	SyncDir(dir string) error
}

var current = struct {
	sync.RWMutex
	fs FS
}{fs: OS}

// OS is the operating system's FS.
var OS FS = osFS{}

// SetFS makes fs the FS of every write path until restore is called, for
// a test. No write may be in flight when it is called.
func SetFS(fs FS) (restore func()) {
	current.Lock()
	old := current.fs
	current.fs = fs
	current.Unlock()
	return func() {
		current.Lock()
		current.fs = old
		current.Unlock()
	}
}

func fsNow() FS {
	current.RLock()
	defer current.RUnlock()
	return current.fs
}

// OpenFile opens a file to write, through the FS.
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return fsNow().OpenFile(name, flag, perm)
}

// WriteAt writes b at offset off of f, through the FS.
func WriteAt(f *os.File, b []byte, off int64) (int, error) { return fsNow().WriteAt(f, b, off) }

// Truncate sets f's size, through the FS.
func Truncate(f *os.File, size int64) error { return fsNow().Truncate(f, size) }

// Sync makes f's contents durable, through the FS.
func Sync(f *os.File) error { return fsNow().Sync(f) }

// Rename renames a file, through the FS.
func Rename(oldpath, newpath string) error { return fsNow().Rename(oldpath, newpath) }

// Remove removes a file, through the FS.
func Remove(name string) error { return fsNow().Remove(name) }

// Writer returns f as an io.Writer whose writes go through the FS, each
// at the end of the last (f's offset is not used).
func Writer(f *os.File) io.Writer {
	st, err := f.Stat()
	w := &writer{f: f}
	if err == nil {
		w.at = st.Size()
	}
	return w
}

type writer struct {
	f  *os.File
	at int64
}

func (w *writer) Write(b []byte) (int, error) {
	n, err := WriteAt(w.f, b, w.at)
	w.at += int64(n)
	return n, err
}

// Reserve makes f size bytes long with its blocks allocated on disk
// (fallocate), so that a full disk is an error here rather than a fault
// when the memory of a mapping is first written. Where the file system
// cannot allocate ahead it falls back to setting the size.
func Reserve(f *os.File, size int64) error {
	fs := fsNow()
	err := fs.Allocate(f, size)
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EFBIG) {
		return err
	}
	return fs.Truncate(f, size)
}

// SyncDir syncs the directory dir, so that a rename or a new file in it
// survives a crash.
func SyncDir(dir string) error { return fsNow().SyncDir(dir) }

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}
func (osFS) WriteAt(f *os.File, b []byte, off int64) (int, error) { return f.WriteAt(b, off) }
func (osFS) Truncate(f *os.File, size int64) error                { return f.Truncate(size) }
func (osFS) Allocate(f *os.File, size int64) error                { return fallocate(f, size) }
func (osFS) Sync(f *os.File) error                                { return f.Sync() }
func (osFS) Flush(f *os.File, data []byte) error {
	if err := msync(data); err != nil {
		return fmt.Errorf("msync %s: %w", f.Name(), err)
	}
	return f.Sync()
}
func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error             { return os.Remove(name) }
func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}
