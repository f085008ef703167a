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

// parallelFor splits [0, n) into p contiguous ranges and calls f on each,
// the first on the calling goroutine and the others on workers, returning
// when all are done. With p <= 1 it calls f(0, n) on the calling goroutine.
func parallelFor(n, p int, f func(lo, hi int)) {
	if p <= 1 || n <= 1 {
		f(0, n)
		return
	}
	run(p, func(w int) { f(n*w/p, n*(w+1)/p) })
}

// parallelFirst is parallelFor for functions that return a position in
// [lo, hi) where they found a problem, or -1: it returns the smallest
// position any of them returned, or -1.
func parallelFirst(n, p int, f func(lo, hi int) int) int {
	if p <= 1 || n <= 1 {
		return f(0, n)
	}
	var buf [16]int
	found := buf[:0]
	if p > len(buf) {
		found = make([]int, 0, p)
	}
	found = found[:p]
	run(p, func(w int) { found[w] = f(n*w/p, n*(w+1)/p) }) // each part writes its own slot
	for _, q := range found {
		if q >= 0 {
			return q
		}
	}
	return -1
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

// part is part w of a parallel call of f.
type part struct {
	f    func(w int)
	w    int
	left *atomic.Int32 // parts of the call still running
}

var (
	// idle counts the workers polling for a part that no caller has
	// claimed. A caller claims one by decrementing it, then sends the part
	// on parts, so that the number of polling workers always equals idle
	// plus the parts claimed but not yet received.
	idle  atomic.Int32
	parts = make(chan part, 64)

	live atomic.Int32 // workers running, polling or not
)

// run calls f(0) on the calling goroutine and f(1) … f(p-1) on workers and
// returns when all have returned. The caller waits by polling too: parked, it
// would wake as slowly as a parked worker starts.
func run(p int, f func(w int)) {
	var left atomic.Int32
	left.Store(int32(p - 1))
	for w := 1; w < p; w++ {
		hand(part{f: f, w: w, left: &left})
	}
	f(0)
	for i := 1; left.Load() != 0; i++ {
		if i%64 == 0 {
			runtime.Gosched()
		}
	}
}

// hand gives pt to a polling worker, or to a new one if none polls.
func hand(pt part) {
	for {
		n := idle.Load()
		if n == 0 {
			live.Add(1)
			go work(pt)
			return
		}
		if idle.CompareAndSwap(n, n-1) {
			parts <- pt
			return
		}
	}
}

// work runs pt, then every part it receives until it has polled idleSpin
// for one in vain.
func work(pt part) {
	defer live.Add(-1)
	for {
		pt.f(pt.w)
		pt.left.Add(-1)
		var ok bool
		if pt, ok = next(); !ok {
			return
		}
	}
}

// next polls for a part for up to idleSpin. It reports false when the
// worker should exit instead.
func next() (part, bool) {
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
func leave() (part, bool) {
	for {
		n := idle.Load()
		if n == 0 {
			return <-parts, true
		}
		if idle.CompareAndSwap(n, n-1) {
			return part{}, false
		}
	}
}
