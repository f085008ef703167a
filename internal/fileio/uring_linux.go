//go:build linux

package fileio

import (
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A ring is an io_uring instance: a submission queue the kernel reads
// requests from and a completion queue it answers in, both shared memory
// (io_uring(7)). One system call submits a batch of reads and waits for
// their answers, where positioned reads on goroutines cost a system call
// and a thread switch each.
type ring struct {
	fd                 int
	sqMap, cqMap, sqes []byte
	sqHead, sqTail     *uint32
	sqMask             uint32
	sqArray            []uint32
	cqHead, cqTail     *uint32
	cqMask             uint32
	cqes               []cqe
	entries            uint32
}

// params is struct io_uring_params.
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	_                                                                      [3]uint32
	sqOff                                                                  sqOffsets
	cqOff                                                                  cqOffsets
}

type sqOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, _ uint32
	_                                                           uint64
}

type cqOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, _ uint32
	_                                                           uint64
}

// sqe is struct io_uring_sqe, as a read uses it.
type sqe struct {
	opcode, flags uint8
	ioprio        uint16
	fd            int32
	off, addr     uint64
	len, rwFlags  uint32
	userData      uint64
	_             [3]uint64
}

// cqe is struct io_uring_cqe.
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

const (
	opRead          = 22 // IORING_OP_READ
	enterGetEvents  = 1  // IORING_ENTER_GETEVENTS
	offSQRing       = 0
	offCQRing       = 0x8000000
	offSQEs         = 0x10000000
	ringEntries     = 64
	sqeSize, cqSize = 64, 16
)

func newRing(entries uint32) (*ring, error) {
	var p params
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &ring{fd: int(fd), entries: p.sqEntries}
	mmap := func(off int64, n int) ([]byte, error) {
		return unix.Mmap(r.fd, off, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	}
	var err error
	if r.sqMap, err = mmap(offSQRing, int(p.sqOff.array+p.sqEntries*4)); err == nil {
		if r.cqMap, err = mmap(offCQRing, int(p.cqOff.cqes+p.cqEntries*cqSize)); err == nil {
			r.sqes, err = mmap(offSQEs, int(p.sqEntries*sqeSize))
		}
	}
	if err != nil {
		r.close()
		return nil, fmt.Errorf("io_uring mmap: %w", err)
	}
	u32 := func(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
	r.sqHead, r.sqTail, r.sqMask = u32(r.sqMap, p.sqOff.head), u32(r.sqMap, p.sqOff.tail), *u32(r.sqMap, p.sqOff.ringMask)
	r.sqArray = unsafe.Slice(u32(r.sqMap, p.sqOff.array), p.sqEntries)
	r.cqHead, r.cqTail, r.cqMask = u32(r.cqMap, p.cqOff.head), u32(r.cqMap, p.cqOff.tail), *u32(r.cqMap, p.cqOff.ringMask)
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&r.cqMap[p.cqOff.cqes])), p.cqEntries)
	return r, nil
}

func (r *ring) close() {
	for _, m := range [][]byte{r.sqes, r.cqMap, r.sqMap} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	unix.Close(r.fd)
}

// readAll runs reads on file descriptor fd, up to depth of them in flight.
// A read the kernel answers short goes on from where it stopped; one that
// reaches the end of the file is io.EOF. It returns the first error, with
// the index of its read, once no read is in flight.
func (r *ring) readAll(fd int, reads []read, depth int) (bad int, err error, reuse bool) {
	pin := new(runtime.Pinner)
	defer func() {
		if reuse {
			pin.Unpin()
		}
	}()
	for _, rd := range reads {
		if len(rd.buf) > 0 {
			pin.Pin(&rd.buf[0])
		}
	}
	depth = min(max(depth, 1), int(r.entries))
	done := make([]int, len(reads)) // bytes read so far, per read
	queue := make([]int, 0, len(reads))
	for k := range reads {
		queue = append(queue, k)
	}
	// queued counts requests in the submission queue the kernel has not
	// taken yet, inFlight those it took and has not answered.
	queued, inFlight, failed, bad := 0, 0, error(nil), -1
	for len(queue) > 0 && failed == nil || queued+inFlight > 0 {
		tail := *r.sqTail
		for failed == nil && len(queue) > 0 && queued+inFlight < depth {
			k := queue[0]
			queue = queue[1:]
			rest := reads[k].buf[done[k]:]
			i := tail & r.sqMask
			e := (*sqe)(unsafe.Pointer(&r.sqes[i*sqeSize]))
			*e = sqe{opcode: opRead, fd: int32(fd), off: uint64(reads[k].off + int64(done[k])),
				addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(rest)))), len: uint32(len(rest)), userData: uint64(k)}
			r.sqArray[i] = i
			tail++
			queued++
		}
		atomic.StoreUint32(r.sqTail, tail)
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(queued), 1, enterGetEvents, 0, 0)
		switch errno {
		case 0:
			queued -= int(n)
			inFlight += int(n)
		case unix.EINTR, unix.EAGAIN, unix.EBUSY:
			// Interrupted, or short of memory or of room for answers:
			// take the answers there are and call again.
		default:
			// The ring no longer works: no request in the submission
			// queue runs. Those the kernel took may still write into
			// their buffers, so the ring is not used again, and its
			// caller's buffers stay pinned and referenced (leaked)
			// rather than reused under a read.
			leaked.Lock()
			leaked.reads = append(leaked.reads, reads)
			leaked.pins = append(leaked.pins, pin)
			leaked.Unlock()
			return 0, fmt.Errorf("io_uring_enter: %w", errno), false
		}
		head := atomic.LoadUint32(r.cqHead)
		for ; head != atomic.LoadUint32(r.cqTail); head++ {
			c := r.cqes[head&r.cqMask]
			k := int(c.userData)
			inFlight--
			switch {
			case c.res < 0:
				if failed == nil {
					failed, bad = unix.Errno(-c.res), k
				}
			case c.res == 0 && done[k] < len(reads[k].buf):
				if failed == nil {
					failed, bad = io.EOF, k
				}
			default:
				done[k] += int(c.res)
				if done[k] < len(reads[k].buf) {
					queue = append(queue, k)
				}
			}
		}
		atomic.StoreUint32(r.cqHead, head)
	}
	return bad, failed, true
}

// leaked holds the reads of rings that failed with requests in flight.
var leaked struct {
	sync.Mutex
	reads [][]read
	pins  []*runtime.Pinner
}

// rings keeps the rings made so far for the next calls; off records that
// this kernel refuses them (errors.ErrUnsupported, or a seccomp filter).
var rings struct {
	sync.Mutex
	free []*ring
	off  bool
}

// getRing returns a ring of its own to the caller, or nil where the
// kernel makes none.
func getRing() *ring {
	rings.Lock()
	defer rings.Unlock()
	if rings.off {
		return nil
	}
	if n := len(rings.free); n > 0 {
		r := rings.free[n-1]
		rings.free = rings.free[:n-1]
		return r
	}
	r, err := newRing(ringEntries)
	if err != nil {
		rings.off = true
		return nil
	}
	return r
}

func putRing(r *ring) {
	rings.Lock()
	rings.free = append(rings.free, r)
	rings.Unlock()
}

// readRing runs the reads plan makes on file descriptor fd through a
// ring, up to depth in flight, and passes done the index of the first
// read that failed and its error. Where there is no ring to use it
// calls neither.
func readRing(fd uintptr, depth int, plan func() []read, done func(bad int, err error)) {
	if !useRing {
		return
	}
	r := getRing()
	if r == nil {
		return
	}
	bad, err, reuse := r.readAll(int(fd), plan(), depth)
	if reuse {
		putRing(r)
	}
	done(bad, err)
}

// haveRing reports whether the kernel makes rings.
func haveRing() bool {
	r := getRing()
	if r != nil {
		putRing(r)
	}
	return r != nil
}
