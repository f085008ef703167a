package fileio

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// ReadRows reads len(offs) rows of size bytes, row k from offset offs[k]
// of f into dst[k*size:(k+1)*size], with up to depth positioned reads
// (pread) in flight at once: the disk serves scattered rows faster when it
// has several requests to order. It returns the first error, naming the
// row's offset; dst then holds the rows read before it. A depth below 1
// is 1, which reads on the calling goroutine.
func ReadRows(f *os.File, offs []int64, size int, dst []byte, depth int) error {
	return rowsAt(offs, size, dst, depth, func(b []byte, off int64) error {
		_, err := f.ReadAt(b, off)
		return err
	}, "reading")
}

// WriteRows writes len(offs) rows of size bytes, row k from
// src[k*size:(k+1)*size] to offset offs[k] of f, with up to depth
// positioned writes (pwrite) in flight at once. It returns the first
// error, naming the row's offset.
func WriteRows(f *os.File, offs []int64, size int, src []byte, depth int) error {
	return rowsAt(offs, size, src, depth, func(b []byte, off int64) error {
		_, err := f.WriteAt(b, off)
		return err
	}, "writing")
}

// rowsAt runs io on each row, depth rows at a time.
func rowsAt(offs []int64, size int, buf []byte, depth int, io func([]byte, int64) error, verb string) error {
	if len(buf) < len(offs)*size {
		return fmt.Errorf("%s %d rows of %d bytes: a buffer of %d bytes", verb, len(offs), size, len(buf))
	}
	one := func(k int) error {
		if err := io(buf[k*size:(k+1)*size], offs[k]); err != nil {
			return fmt.Errorf("%s the row at offset %d: %w", verb, offs[k], err)
		}
		return nil
	}
	depth = min(max(depth, 1), len(offs))
	if depth <= 1 {
		for k := range offs {
			if err := one(k); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		next  atomic.Int64
		first error
		mu    sync.Mutex
		wg    sync.WaitGroup
	)
	for range depth {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= len(offs) {
					return
				}
				if err := one(k); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					next.Store(int64(len(offs))) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
