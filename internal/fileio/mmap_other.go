//go:build !unix

package fileio

import (
	"errors"
	"os"
)

// A Mapping is a file mapped into memory; this system has none.
type Mapping struct{}

var errNoMmap = errors.New("file-backed tables need a Unix system (mmap)")

func Map(path string) (*Mapping, error)                                      { return nil, errNoMmap }
func MapRead(path string) (*Mapping, error)                                  { return nil, errNoMmap }
func Lock(f *os.File) error                                                  { return nil }
func (m *Mapping) Bytes() []byte                                             { return nil }
func (m *Mapping) Name() string                                              { return "" }
func (m *Mapping) Sync() error                                               { return errNoMmap }
func (m *Mapping) Close() error                                              { return nil }
func Guard(f func() error) error                                             { return f() }
func Floats[T float32 | float64](b []byte, offset int64, n int) ([]T, error) { return nil, errNoMmap }

func (m *Mapping) WillNeed(off, n int64) {}
func WillNeedMemory(b []byte)            {}
func PageSize() int                      { return 4096 }

// Anonymous returns n zeroed bytes from the Go heap: this system has no
// anonymous mappings here.
func Anonymous(n int) ([]byte, func(), error) { return make([]byte, n), func() {}, nil }
func msync([]byte) error                      { return errNoMmap }
