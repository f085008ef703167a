package fileio

import (
	"errors"
	"os"
	"syscall"
)

// Reserve makes f size bytes long with its blocks allocated on disk
// (fallocate), so that a full disk is an error here rather than a fault
// when the memory of a mapping is first written. Where the file system
// cannot allocate ahead it falls back to setting the size.
func Reserve(f *os.File, size int64) error {
	err := fallocate(f, size)
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EFBIG) {
		return err
	}
	return f.Truncate(size)
}
