// Package parallel runs the module's loops on several goroutines: a
// range [0, n) is cut into chunks that the calling goroutine and workers
// take in turn. Run is the one entry of the kernels; it runs the loop
// inline when the work is too small to share, and allocates nothing once
// its free lists are filled.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// MinWork is the number of elements moved below which a loop runs on the
// calling goroutine: under it, starting workers costs more than it saves.
const MinWork = 1 << 15

// Workers returns how many goroutines to use for work elements split into
// at most parts independent pieces: 1 below MinWork, else at most
// GOMAXPROCS and one per MinWork/2 elements.
func Workers(work, parts int) int {
	if work < MinWork {
		return 1
	}
	p := runtime.GOMAXPROCS(0)
	if per := work / (MinWork / 2); per < p {
		p = per
	}
	if parts < p {
		p = parts
	}
	return max(p, 1)
}

// A Task is the work of a parallel call: Part does the part [lo, hi) of
// the call's range and returns a position in it where it found a problem,
// or -1. Its receiver is a value: the goroutines of one call share a copy.
type Task interface{ Part(lo, hi int) int }

// Run cuts [0, n) into chunks and runs t on each, on the calling goroutine
// and Workers(work, n)-1 workers, and returns the smallest position any
// chunk returned, or -1. With one goroutine it is t.Part(0, n), called
// inline. Otherwise the goroutines share a copy of t taken from the free
// list of t's type, so that t itself stays on the caller's stack and the
// call allocates nothing once the free lists are filled.
func Run[T Task](n, work int, t T) int {
	p := Workers(work, n)
	return run(n, p, chunks(n, p), t)
}

// RunRanges is Run cutting [0, n) into one range per goroutine (at most
// maxChunks), for tasks whose every part costs a pass over something all
// parts share (such as every index, each part keeping those that fall in
// its range).
func RunRanges[T Task](n, work int, t T) int {
	p := Workers(work, n)
	return run(n, p, min(n, p, maxChunks), t)
}

// For is Run for a function, for loops off the hot paths: the function,
// a closure, is allocated per call.
func For(n, work int, f func(lo, hi int)) {
	forOn(n, Workers(work, n), f)
}

// forOn is For on p goroutines.
func forOn(n, p int, f func(lo, hi int)) {
	run(n, p, chunks(n, p), funcTask(func(lo, hi int) int {
		f(lo, hi)
		return -1
	}))
}

// run runs t on c chunks of [0, n) on p goroutines: inline for one.
func run[T Task](n, p, c int, t T) int {
	if p <= 1 || n <= 1 {
		return t.Part(0, n)
	}
	w := newTask[T]()
	defer freeTask(w)
	*w = t
	return spread(n, p, c, ref[T]{w})
}

// ref is a Task held by pointer, which an interface holds without
// allocating.
type ref[T Task] struct{ t *T }

func (r ref[T]) Part(lo, hi int) int { return (*r.t).Part(lo, hi) }

// funcTask is a task that calls a function.
type funcTask func(lo, hi int) int

func (f funcTask) Part(lo, hi int) int { return f(lo, hi) }

// chunksPer is how many chunks Run cuts a range into per goroutine, up to
// maxChunks in all.
const (
	chunksPer = 4
	maxChunks = 64
)

// chunks returns how many chunks Run cuts [0, n) into for p goroutines.
func chunks(n, p int) int { return min(n, p*chunksPer, maxChunks) }

// A job is the state of one parallel call. Goroutines take its chunks in
// turn, so a worker that starts late, or runs on a thread that the
// collector or another process holds for a while, takes fewer chunks or
// none, and the call does not wait for it to start: it waits only for the
// chunks taken. A worker handed the job may thus still hold it after the
// call has returned; the job goes back to jobs only when every goroutine
// that held it has let go, so a late worker never sees it reused.
type job struct {
	next, done atomic.Int64 // chunks taken, chunks done
	holders    atomic.Int32 // the caller and the workers handed the job that have not let go
	n, c       int          // the range [0, n) in c chunks
	t          Task
	found      [maxChunks]int // what chunk k's run returned
}

// jobs holds jobs no goroutine holds any more (see freeList).
var jobs = NewList[job](64)

// spread runs t on the c chunks (c <= maxChunks) of [0, n) on the calling
// goroutine and p-1 workers, and returns the first position a chunk found,
// or -1. The caller waits by polling: parked, it would wake as slowly as a
// parked worker starts.
func spread(n, p, c int, t Task) int {
	j := jobs.Get()
	j.next.Store(0)
	j.done.Store(0)
	j.holders.Store(int32(p))
	j.n, j.c, j.t = n, c, t
	for range p - 1 {
		hand(j)
	}
	j.take()
	for i := 1; j.done.Load() != int64(c); i++ {
		if i%64 == 0 {
			runtime.Gosched()
		}
	}
	first := -1
	for _, q := range j.found[:c] {
		if q >= 0 {
			first = q
			break
		}
	}
	j.release()
	return first
}

// take runs chunks of j until none is left.
func (j *job) take() {
	for k := int(j.next.Add(1) - 1); k < j.c; k = int(j.next.Add(1) - 1) {
		j.found[k] = j.t.Part(j.n*k/j.c, j.n*(k+1)/j.c)
		j.done.Add(1)
	}
}

// release lets go of j; the last goroutine to do so puts it back in jobs.
func (j *job) release() {
	if j.holders.Add(-1) == 0 {
		j.t = nil
		jobs.Put(j)
	}
}

// Free lists. The jobs and tasks of parallel calls are kept in channels
// for reuse, not in sync.Pools: a sync.Pool keeps what a thread puts back
// where other threads do not look first, and the goroutine that lets go of
// a job or task (a worker, or a caller that waited on another thread) is
// often on another thread than the next caller, which would then allocate.

// A List is a free list of *T: Get takes one, Put gives one back.
type List[T any] chan *T

// NewList returns an empty List that keeps up to n values.
func NewList[T any](n int) List[T] { return make(List[T], n) }

// Get returns a free *T from list, or a new one if list is empty.
func (list List[T]) Get() *T {
	select {
	case t := <-list:
		return t
	default:
		return new(T)
	}
}

// Put puts t on list, or drops it if list is full.
func (list List[T]) Put(t *T) {
	select {
	case list <- t:
	default:
	}
}

// taskLists holds a free list for each type of task, keyed by a nil
// pointer of that type, so that a parallel call describes its work
// without allocating.
var taskLists sync.Map

// newTask returns a *T from its free list; freeTask puts it back.
func newTask[T any]() *T { return taskList[T]().Get() }

// freeTask clears t, so that the list holds no references to the caller's
// data, and puts it back on its free list.
func freeTask[T any](t *T) {
	var zero T
	*t = zero
	taskList[T]().Put(t)
}

func taskList[T any]() List[T] {
	key := any((*T)(nil))
	l, ok := taskLists.Load(key)
	if !ok {
		l, _ = taskLists.LoadOrStore(key, NewList[T](16))
	}
	return l.(List[T])
}

// Workers. A goroutine started for a part does not exit when the part is
// done: it polls for another one for up to idleSpin, yielding its thread
// to other goroutines as it goes, and exits if none comes. Kernels are
// called in quick succession (a forward, its gradient, the next batch), and
// a worker that is still running starts a part in about a microsecond, where
// a goroutine woken on an idle thread can take tens of microseconds to start,
// a large share of a call that lasts a few hundred. No goroutine outlives
// its last part by more than idleSpin, and at most GOMAXPROCS-1 of them
// poll at once.

// idleSpin is how long a worker polls for a part before it exits: about
// what a cold start costs, so that polling costs a CPU at most what it can save.
const idleSpin = 100 * time.Microsecond

var (
	// idle counts the workers polling for a part that no caller has
	// claimed. A caller claims one by decrementing it, then sends the part
	// on parts, so that the number of polling workers always equals idle
	// plus the parts claimed but not yet received.
	idle  atomic.Int32
	parts = make(chan *job, 64)

	live atomic.Int32 // workers running, polling or not
)

// hand gives j to a polling worker, or to a new one if none polls.
func hand(j *job) {
	for {
		n := idle.Load()
		if n == 0 {
			live.Add(1)
			go work()
			starts <- j
			return
		}
		if idle.CompareAndSwap(n, n-1) {
			parts <- j
			return
		}
	}
}

// starts hands each new worker its first job: one job is sent for each
// worker started, so every new worker receives one, and a go statement
// without arguments allocates no closure to pass it.
var starts = make(chan *job, 64)

// work takes chunks of its first job, then of every job it receives, until
// it has polled idleSpin for one in vain.
func work() {
	defer live.Add(-1)
	j := <-starts
	for {
		j.take()
		j.release()
		var ok bool
		if j, ok = next(); !ok {
			return
		}
	}
}

// next polls for a part for up to idleSpin. It reports false when the
// worker should exit instead.
func next() (*job, bool) {
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

// leave takes a polling worker off the idle count and reports false. While
// the count is 0, a caller has claimed this worker (or another polling one,
// which comes to the same) and its part is on the way: leave waits for a
// part and returns it, unless the count rises again meanwhile (a worker
// that started polling took the part), and then it takes itself off.
func leave() (*job, bool) {
	for i := 1; ; i++ {
		if n := idle.Load(); n > 0 {
			if idle.CompareAndSwap(n, n-1) {
				return nil, false
			}
			continue
		}
		select {
		case pt := <-parts:
			return pt, true
		default:
		}
		if i%64 == 0 {
			runtime.Gosched()
		}
	}
}
