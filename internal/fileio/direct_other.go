//go:build !linux

package fileio

import (
	"errors"
	"os"
)

// OpenDirect is not available here: reads go through the page cache.
func OpenDirect(path string) (*os.File, error) { return nil, errors.ErrUnsupported }

// ReadRowsDirect is ReadRows.
func ReadRowsDirect(f *os.File, offs []int64, size int, dst []byte, depth int) error {
	return ReadRows(f, offs, size, dst, depth)
}
