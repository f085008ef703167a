//go:build !linux

package fileio

import (
	"errors"
	"os"
)

func fallocate(f *os.File, size int64) error { return errors.ErrUnsupported }
