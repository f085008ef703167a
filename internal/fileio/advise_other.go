//go:build !linux

package fileio

import "os"

// Random does nothing here: this system takes no access advice.
func Random(f *os.File) {}
