//go:build unix

package fileio

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gathergrad/gather/internal/errs"
)

// A Mapping is a file mapped read-write into memory (MAP_SHARED): writes
// to it reach the file, at the latest when Sync returns. The file is
// locked (flock, exclusive) while it is mapped, so that a second Map of it
// fails rather than shares it.
type Mapping struct {
	f       *os.File
	data    []byte // the whole file
	ro      bool   // mapped by MapRead
	release func() // Hold's
}

// MapRead opens path read-only and maps it whole, read-only and shared:
// any number of processes may map one file at once, and a write to the
// slice faults. It takes no lock.
func MapRead(path string) (*Mapping, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return mapWhole(f, path, unix.PROT_READ)
}

// Map opens path read-write, locks it and maps it whole.
func Map(path string) (*Mapping, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	if err := Lock(f); err != nil {
		f.Close()
		return nil, err
	}
	return mapWhole(f, path, unix.PROT_READ|unix.PROT_WRITE)
}

// mapWhole maps the file f (opened from path) whole and shared with
// protection prot, or closes it and returns an error.
func mapWhole(f *os.File, path string, prot int) (*Mapping, error) {
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.Size() == 0 || int64(int(st.Size())) != st.Size() {
		f.Close()
		return nil, fmt.Errorf("%s: a file of %d bytes cannot be mapped", path, st.Size())
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), prot, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("mapping %s: %w", path, err)
	}
	// The rows a batch names are scattered: reading ahead of each page
	// fault would fetch pages no one asked for.
	_ = unix.Madvise(data, unix.MADV_RANDOM)
	return &Mapping{f: f, data: data, ro: prot&unix.PROT_WRITE == 0, release: Hold(path, f)}, nil
}

// Lock locks f (flock, exclusive) for as long as it is open, or returns
// an error wrapping errs.ErrInUse if a Mapping or a write holds it, in
// this process or another.
func Lock(f *os.File) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("%s is held by an open table or a write: %w", f.Name(), errs.ErrInUse)
		}
		return fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	return nil
}

// Name returns the path the file was mapped from.
func (m *Mapping) Name() string { return m.f.Name() }

// Bytes returns the mapped file.
func (m *Mapping) Bytes() []byte { return m.data }

// Sync writes every change to the mapping to the file and the file to
// its disk (msync, then fsync).
func (m *Mapping) Sync() error {
	if m.data == nil {
		return errors.New("the mapping is closed")
	}
	if m.ro {
		return nil
	}
	return fsNow().Flush(m.f, m.data)
}

// Close syncs the mapping, unlocks the file and takes the file's pages out
// of memory: private zero pages take their place at the same addresses
// (MAP_FIXED), so that a slice of the mapping that is still held reads
// zeros (and takes writes) rather than faulting. That address range stays
// reserved, though not resident, until the process ends.
func (m *Mapping) Close() error {
	if m.data == nil {
		return nil
	}
	err := m.Sync()
	prot := unix.PROT_READ | unix.PROT_WRITE
	if m.ro {
		prot = unix.PROT_READ
	}
	_, e := unix.MmapPtr(-1, 0, unsafe.Pointer(unsafe.SliceData(m.data)), uintptr(len(m.data)),
		prot, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED)
	if e != nil {
		e = unix.Munmap(m.data)
	}
	if err == nil {
		err = e
	}
	m.data = nil
	m.release()
	if e := m.f.Close(); err == nil {
		err = e
	}
	return err
}

// msync writes the changes to the shared mapping data to its file.
func msync(data []byte) error { return unix.Msync(data, unix.MS_SYNC) }

// Floats returns n values of type T starting offset bytes into b. offset
// must be a multiple of T's size and the values must lie within b.
func Floats[T float32 | float64](b []byte, offset int64, n int) ([]T, error) {
	var zero T
	size := int64(unsafe.Sizeof(zero))
	if offset < 0 || offset%size != 0 || offset+int64(n)*size > int64(len(b)) {
		return nil, fmt.Errorf("%d values at offset %d do not lie, aligned, within %d bytes", n, offset, len(b))
	}
	if n == 0 {
		return []T{}, nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[offset])), n), nil
}

// Guard runs f with faults on bad memory accesses turned into panics
// (debug.SetPanicOnFault) on the calling goroutine, and returns a fault in
// f, such as the SIGBUS of an I/O error on a mapped file, as an error. A
// fault on another goroutine is not covered: it ends the process.
func Guard(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			re, ok := r.(runtime.Error)
			if _, fault := r.(interface{ Addr() uintptr }); !ok || !fault {
				panic(r)
			}
			err = fmt.Errorf("memory fault (an I/O error on a mapped file?): %v", re)
		}
	}()
	return f()
}

// WillNeed asks the system to read the pages holding bytes [off, off+n)
// of the mapping into memory now, without waiting for them (madvise
// MADV_WILLNEED): a batch of scattered rows then comes from the disk
// together rather than one page fault at a time. Errors are ignored: it
// is a hint.
func (m *Mapping) WillNeed(off, n int64) {
	if m.data == nil || n <= 0 || off < 0 || off+n > int64(len(m.data)) {
		return
	}
	page := int64(os.Getpagesize())
	lo, hi := off/page*page, min((off+n+page-1)/page*page, int64(len(m.data)))
	_ = unix.Madvise(m.data[lo:hi], unix.MADV_WILLNEED)
}

// WillNeedMemory asks the system to bring the pages wholly inside b into
// memory now, without waiting for them (madvise MADV_WILLNEED): for b in a
// mapped file, a read of the file ahead of its use. Errors are ignored: it
// is a hint, and for other memory it changes nothing.
func WillNeedMemory(b []byte) {
	page := uintptr(os.Getpagesize())
	if uintptr(len(b)) < page {
		return
	}
	start := addr(b)
	skip := int((page - start%page) % page)
	n := (len(b) - skip) / int(page) * int(page)
	if n > 0 {
		_ = unix.Madvise(b[skip:skip+n], unix.MADV_WILLNEED)
	}
}

// PageSize is the size of the system's memory pages.
func PageSize() int { return os.Getpagesize() }

// Anonymous returns n bytes of zeroed memory mapped outside the Go heap
// (MAP_PRIVATE|MAP_ANONYMOUS), and the function that unmaps them: memory
// the garbage collector neither scans nor counts, for a cache whose size
// the user sets. The memory must not be used after the release.
func Anonymous(n int) ([]byte, func(), error) {
	if n <= 0 {
		return nil, func() {}, nil
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, nil, fmt.Errorf("mapping %d bytes of memory: %w", n, err)
	}
	return b, func() { _ = unix.Munmap(b) }, nil
}
