package fileio

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// directAlign is the alignment O_DIRECT reads need: offsets, lengths and
// buffers in whole blocks.
const directAlign = 4096

// OpenDirect opens path for reads that bypass the system's page cache
// (O_DIRECT), for ReadRowsDirect.
func OpenDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0)
}

// ReadRowsDirect is ReadRows on a file OpenDirect opened: each row is
// read as the whole blocks that hold it, into memory of depth workers'
// own, then copied out.
func ReadRowsDirect(f *os.File, offs []int64, size int, dst []byte, depth int) error {
	if len(dst) < len(offs)*size {
		return fmt.Errorf("reading %d rows of %d bytes: a buffer of %d bytes", len(offs), size, len(dst))
	}
	depth = min(max(depth, 1), len(offs))
	span := (size + 2*directAlign - 1) &^ (directAlign - 1) // blocks a row can straddle
	mem, release, err := Anonymous(depth * span)
	if err != nil {
		return err
	}
	defer release()
	var (
		next  atomic.Int64
		first error
		mu    sync.Mutex
		wg    sync.WaitGroup
	)
	for w := range depth {
		buf := mem[w*span : (w+1)*span]
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= len(offs) {
					return
				}
				off := offs[k]
				start := off &^ (directAlign - 1)
				end := (off + int64(size) + directAlign - 1) &^ (directAlign - 1)
				b := buf[:end-start]
				n, err := f.ReadAt(b, start)
				if n >= int(off-start)+size {
					err = nil // the file ends inside the last block
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("reading the row at offset %d: %w", off, err)
					}
					mu.Unlock()
					next.Store(int64(len(offs)))
					return
				}
				copy(dst[k*size:(k+1)*size], b[off-start:])
			}
		})
	}
	wg.Wait()
	return first
}
