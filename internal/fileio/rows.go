package fileio

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
)

// Reads of scattered rows: rows in the same page of the file or in
// adjacent pages go in one read of at most readSpan bytes, the bytes
// between them read and dropped. Such a read reads no page that holds
// none of its rows.
const (
	readPage = 4 << 10
	readSpan = 128 << 10
)

// useRing makes ReadRows submit its reads through an io_uring ring where
// the kernel has one; tests and benchmarks turn it off to run the
// positioned reads on goroutines, the path of kernels without one.
var useRing = true

// ReadRows reads len(offs) rows of size bytes, row k from offset offs[k]
// of f into dst[k*size:(k+1)*size], with up to depth reads in flight at
// once: the disk serves scattered rows faster when it has several
// requests to order. Where the kernel has io_uring, the reads go through
// one ring (one system call for a batch of them), rows in the same or
// adjacent pages of the file in one read; elsewhere each row is a
// positioned read (pread) on one of depth goroutines. It returns the first
// error, naming the offset; dst may then hold some of the rows. A depth
// below 1 is 1.
func ReadRows(f *os.File, offs []int64, size int, dst []byte, depth int) error {
	if len(dst) < len(offs)*size {
		return fmt.Errorf("reading %d rows of %d bytes: a buffer of %d bytes", len(offs), size, len(dst))
	}
	if len(offs) == 0 {
		return nil
	}
	var (
		p   readPlan
		bad int
		err error
		ok  bool
	)
	if rc, cerr := f.SyscallConn(); cerr == nil {
		// Control keeps the descriptor open while the ring uses it.
		cerr = rc.Control(func(fd uintptr) {
			readRing(fd, depth, func() []read {
				p = planReads(offs, size, dst)
				return p.reads
			}, func(b int, e error) { bad, err, ok = b, e, true })
		})
		if cerr != nil {
			return fmt.Errorf("reading rows of %s: %w", f.Name(), cerr)
		}
	}
	if !ok {
		bad, err = inParallel(len(offs), depth, func(k int) error {
			_, err := f.ReadAt(dst[k*size:(k+1)*size], offs[k])
			return err
		})
		if err != nil {
			return fmt.Errorf("reading the row at offset %d of %s: %w", offs[bad], f.Name(), err)
		}
		return nil
	}
	if err != nil {
		at := p.reads[bad].off
		if p.rows[bad] == 1 {
			return fmt.Errorf("reading the row at offset %d of %s: %w", at, f.Name(), err)
		}
		return fmt.Errorf("reading %d rows at offsets %d to %d of %s: %w", p.rows[bad], at, at+int64(len(p.reads[bad].buf)-size), f.Name(), err)
	}
	for _, c := range p.copies {
		copy(dst[c.row*size:(c.row+1)*size], p.scratch[c.at:c.at+size])
	}
	return nil
}

// A read is one positioned read: len(buf) bytes at off.
type read struct {
	buf []byte
	off int64
}

// A readPlan is the reads of a ReadRows call: each into dst where its
// rows lie there as in the file, else into scratch, copied out after.
type readPlan struct {
	reads   []read
	rows    []int // rows per read
	scratch []byte
	copies  []struct{ row, at int }
}

func planReads(offs []int64, size int, dst []byte) readPlan {
	order := make([]int32, len(offs))
	for k := range order {
		order[k] = int32(k)
	}
	slices.SortFunc(order, func(a, b int32) int { return cmp.Compare(offs[a], offs[b]) })
	var p readPlan
	type span struct {
		lo, hi  int // of order
		scratch int // the span's place in scratch, or -1 for dst
	}
	var spans []span
	var scratch int
	for lo := 0; lo < len(order); {
		first := offs[order[lo]]
		inPlace := true // rows adjacent in the file and in dst, in order
		hi := lo + 1
		for ; hi < len(order); hi++ {
			off, prev := offs[order[hi]], offs[order[hi-1]]
			if off/readPage > (prev+int64(size)-1)/readPage+1 || off+int64(size)-first > readSpan {
				break
			}
			inPlace = inPlace && off == prev+int64(size) && order[hi] == order[hi-1]+1
		}
		s := span{lo, hi, -1}
		if !inPlace {
			s.scratch = scratch
			scratch += int(offs[order[hi-1]] + int64(size) - first)
		}
		spans = append(spans, s)
		lo = hi
	}
	p.scratch = make([]byte, scratch)
	for _, s := range spans {
		first, last := offs[order[s.lo]], offs[order[s.hi-1]]
		n := int(last - first + int64(size))
		var buf []byte
		if s.scratch < 0 {
			k := int(order[s.lo])
			buf = dst[k*size : k*size+n]
		} else {
			buf = p.scratch[s.scratch : s.scratch+n]
			for _, k := range order[s.lo:s.hi] {
				p.copies = append(p.copies, struct{ row, at int }{int(k), s.scratch + int(offs[k]-first)})
			}
		}
		p.reads = append(p.reads, read{buf: buf, off: first})
		p.rows = append(p.rows, s.hi-s.lo)
	}
	return p
}

// WriteRows writes len(offs) rows of size bytes, row k from
// src[k*size:(k+1)*size] to offset offs[k] of f, with up to depth
// positioned writes (pwrite) in flight at once. It returns the first
// error, naming the row's offset.
func WriteRows(f *os.File, offs []int64, size int, src []byte, depth int) error {
	if len(src) < len(offs)*size {
		return fmt.Errorf("writing %d rows of %d bytes: a buffer of %d bytes", len(offs), size, len(src))
	}
	bad, err := inParallel(len(offs), depth, func(k int) error {
		_, err := WriteAt(f, src[k*size:(k+1)*size], offs[k])
		return err
	})
	if err != nil {
		return fmt.Errorf("writing the row at offset %d of %s: %w", offs[bad], f.Name(), err)
	}
	return nil
}

// inParallel runs io(k) for k in [0, n), on up to depth goroutines (on the
// calling one when depth is 1 or less). It returns the first error and
// its k.
func inParallel(n, depth int, io func(k int) error) (int, error) {
	depth = min(max(depth, 1), n)
	if depth <= 1 {
		for k := range n {
			if err := io(k); err != nil {
				return k, err
			}
		}
		return 0, nil
	}
	var (
		next  atomic.Int64
		first error
		bad   int
		mu    sync.Mutex
		wg    sync.WaitGroup
	)
	for range depth {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= n {
					return
				}
				if err := io(k); err != nil {
					mu.Lock()
					if first == nil {
						first, bad = err, k
					}
					mu.Unlock()
					next.Store(int64(n)) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
	return bad, first
}
