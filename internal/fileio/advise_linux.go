package fileio

import (
	"os"

	"golang.org/x/sys/unix"
)

// Random tells the system that f is read at scattered offsets
// (POSIX_FADV_RANDOM), so that a read of a row does not also read the
// pages after it.
func Random(f *os.File) { _ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM) }
