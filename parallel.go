package gather

import (
	"runtime"
	"sync"
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

// parallelFor splits [0, n) into p contiguous ranges and calls f on each, on
// p goroutines, returning when all are done. With p <= 1 it calls f(0, n)
// on the calling goroutine.
func parallelFor(n, p int, f func(lo, hi int)) {
	if p <= 1 || n <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	for w := 1; w < p; w++ {
		lo, hi := n*w/p, n*(w+1)/p
		wg.Go(func() { f(lo, hi) })
	}
	f(0, n/p)
	wg.Wait()
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
	var wg sync.WaitGroup
	for w := 1; w < p; w++ {
		lo, hi := n*w/p, n*(w+1)/p
		wg.Go(func() { found[w] = f(lo, hi) }) // each worker writes its own slot
	}
	found[0] = f(0, n/p)
	wg.Wait()
	for _, q := range found {
		if q >= 0 {
			return q
		}
	}
	return -1
}
