package gather

import (
	"runtime"
	"sync/atomic"
	"time"
)

// minParallelWork is the number of elements moved below which a kernel runs
// on the calling goroutine: under it, starting workers costs more than it saves.
const minParallelWork = 1 << 15

// workers returns how many goroutines to use for work elements split into at
// most parts independent pieces.
func workers(work, parts int) int {
	if work < minParallelWork {
		return 1
	}
	p := runtime.GOMAXPROCS(0)
	if per := work / (minParallelWork / 2); per < p {
		p = per
	}
	if parts < p {
		p = parts
	}
	return max(p, 1)
}

// parallelFor splits [0, n) into contiguous ranges and calls f on each,
// on the calling goroutine and p-1 workers, returning when all are done.
// With p <= 1 it calls f(0, n) on the calling goroutine.
func parallelFor(n, p int, f func(lo, hi int)) {
	if p <= 1 || n <= 1 {
		f(0, n)
		return
	}
	spread(n, p, chunks(n, p), func(_, lo, hi int) { f(lo, hi) })
}

// parallelParts is parallelFor cutting [0, n) into p ranges only, for
// functions whose every call costs a pass over something all calls share
// (such as every index, each call keeping those that fall in its range).
func parallelParts(n, p int, f func(lo, hi int)) {
	if p <= 1 || n <= 1 {
		f(0, n)
		return
	}
	spread(n, p, min(n, p), func(_, lo, hi int) { f(lo, hi) })
}

// parallelFirst is parallelFor for functions that return a position in
// [lo, hi) where they found a problem, or -1: it returns the smallest
// position any of them returned, or -1.
func parallelFirst(n, p int, f func(lo, hi int) int) int {
	if p <= 1 || n <= 1 {
		return f(0, n)
	}
	var buf [64]int
	var found []int // the first position each chunk found, or -1
	if c := chunks(n, p); c > len(buf) {
		found = make([]int, c)
	} else {
		found = buf[:c]
	}
	spread(n, p, len(found), func(k, lo, hi int) { found[k] = f(lo, hi) }) // each chunk writes its own slot
	for _, q := range found {
		if q >= 0 {
			return q
		}
	}
	return -1
}

// chunksPer is how many chunks parallelFor cuts a range into per goroutine.
const chunksPer = 4

// chunks returns how many chunks parallelFor cuts [0, n) into for p
// goroutines.
func chunks(n, p int) int { return min(n, p*chunksPer) }

// spread calls f(k, lo, hi) for the c chunks [lo, hi) of [0, n), numbered
// k from 0, on the calling goroutine and p-1 workers, and
// returns when all chunks are done. Each goroutine takes the next chunk
// until none is left, so a worker that starts late, or runs on a thread
// that the collector or another process holds for a while, takes fewer
// chunks or none, and the call does not wait for it to start: it waits
// only for the chunks taken. The caller waits by polling: parked, it would
// wake as slowly as a parked worker starts.
func spread(n, p, c int, f func(k, lo, hi int)) {
	var next, done atomic.Int64
	take := func() {
		for k := int(next.Add(1) - 1); k < c; k = int(next.Add(1) - 1) {
			f(k, n*k/c, n*(k+1)/c)
			done.Add(1)
		}
	}
	for range p - 1 {
		hand(take)
	}
	take()
	for i := 1; done.Load() != int64(c); i++ {
		if i%64 == 0 {
			runtime.Gosched()
		}
	}
}

// Workers. A goroutine started for a part does not exit when the part is
// done: it polls for another one for up to idleSpin, yielding its thread
// to other goroutines as it goes, and exits if none comes. Kernels are
// called in quick succession (a forward, its gradient, the next batch), and
// a worker that is still running starts a part in about a microsecond, where
// a goroutine woken on an idle thread can take tens of microseconds to start
// (70 µs measured on a virtual machine), a large share of a call that lasts
// a few hundred. No goroutine outlives its last part by more than idleSpin,
// and at most GOMAXPROCS-1 of them poll at once.

// idleSpin is how long a worker polls for a part before it exits: about
// what a cold start costs, so that polling costs a CPU at most what it can save.
const idleSpin = 100 * time.Microsecond

var (
	// idle counts the workers polling for a part that no caller has
	// claimed. A caller claims one by decrementing it, then sends the part
	// on parts, so that the number of polling workers always equals idle
	// plus the parts claimed but not yet received.
	idle  atomic.Int32
	parts = make(chan func(), 64)

	live atomic.Int32 // workers running, polling or not
)

// hand gives f to a polling worker, or to a new one if none polls.
func hand(f func()) {
	for {
		n := idle.Load()
		if n == 0 {
			live.Add(1)
			go work(f)
			return
		}
		if idle.CompareAndSwap(n, n-1) {
			parts <- f
			return
		}
	}
}

// work runs f, then every part it receives until it has polled idleSpin
// for one in vain.
func work(f func()) {
	defer live.Add(-1)
	for {
		f()
		var ok bool
		if f, ok = next(); !ok {
			return
		}
	}
}

// next polls for a part for up to idleSpin. It reports false when the
// worker should exit instead.
func next() (func(), bool) {
	if int(idle.Add(1)) >= runtime.GOMAXPROCS(0) {
		return leave() // enough workers poll already
	}
	deadline := time.Now().Add(idleSpin)
	for i := 1; ; i++ {
		select {
		case pt := <-parts:
			return pt, true
		default:
		}
		if i%64 == 0 {
			if time.Now().After(deadline) {
				return leave()
			}
			runtime.Gosched()
		}
	}
}

// leave takes a polling worker off the idle count and reports false, unless
// the count is already 0: then a caller has claimed this worker (or another
// polling one, which comes to the same), its part is on the way, and leave
// returns it.
func leave() (func(), bool) {
	for {
		n := idle.Load()
		if n == 0 {
			return <-parts, true
		}
		if idle.CompareAndSwap(n, n-1) {
			return nil, false
		}
	}
}
