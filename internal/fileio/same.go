package fileio

import (
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/gathergrad/gather/internal/errs"
)

// A source is a file this process reads while it may write others: a
// Mapping's file or an open table's (Hold).
type source struct {
	path string
	info os.FileInfo
}

// sources are the files held now.
var sources struct {
	sync.Mutex
	list []*source
}

// Hold records that the file f, opened from path, is read until the
// returned release is called: a write to it by another name (WriteAtomic,
// Distinct) is refused meanwhile.
func Hold(path string, f *os.File) (release func()) {
	st, err := f.Stat()
	if err != nil {
		return func() {}
	}
	s := &source{path: path, info: st}
	sources.Lock()
	sources.list = append(sources.list, s)
	sources.Unlock()
	return func() {
		sources.Lock()
		defer sources.Unlock()
		if k := slices.Index(sources.list, s); k >= 0 {
			sources.list = slices.Delete(sources.list, k, k+1)
		}
	}
}

// Distinct returns an error wrapping errs.ErrSameFile, naming both, if
// the file at dst is one of the files srcs name (or a file Hold holds),
// by whatever name: the same path, another spelling of it, a hard link or
// a symbolic link. A dst that does not exist is distinct from them all.
func Distinct(dst string, srcs ...string) error {
	d, err := os.Stat(dst)
	if err != nil {
		return nil // no file to lose; the write itself reports a bad path
	}
	for _, src := range srcs {
		if s, err := os.Stat(src); err == nil && os.SameFile(d, s) {
			return fmt.Errorf("%s is the file %s, which it is written from; write to another file: %w", dst, src, errs.ErrSameFile)
		}
	}
	sources.Lock()
	defer sources.Unlock()
	for _, s := range sources.list {
		if os.SameFile(d, s.info) && dst == s.path {
			return fmt.Errorf("%s is held by an open table in this process; close it first or write to another file: %w: %w", dst, errs.ErrSameFile, errs.ErrInUse)
		}
		if os.SameFile(d, s.info) {
			return fmt.Errorf("%s is the file %s, which an open table reads; close it first or write to another file: %w: %w", dst, s.path, errs.ErrSameFile, errs.ErrInUse)
		}
	}
	return nil
}
