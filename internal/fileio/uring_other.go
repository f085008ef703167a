//go:build !linux

package fileio

// readRing does nothing: there is no ring to read through.
func readRing(fd uintptr, depth int, plan func() []read, done func(bad int, err error)) {}

// haveRing reports whether the kernel makes rings: not here.
func haveRing() bool { return false }
