package parallel

import (
	"math/rand/v2"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every element of every call is covered exactly once and before the call
// returns, with many callers at once sharing the workers, for goroutine
// counts below, at and above GOMAXPROCS and above maxChunks;
// the ranges of RunRanges are exactly p (at most maxChunks), and Run
// returns the smallest position any chunk found.
func TestParallelRunsEachPartOnce(t *testing.T) {
	const callers, calls = 8, 200
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for k := range calls {
				p := 2 + (c+k)%7
				if k%50 == 49 {
					p = maxChunks + 36 // more goroutines than chunks
				}
				n := 50 + k
				hits := make([]int32, n)
				forOn(n, p, func(lo, hi int) {
					for i := lo; i < hi; i++ {
						atomic.AddInt32(&hits[i], 1)
					}
				})
				var ranges atomic.Int32
				run(n, p, min(n, p, maxChunks), funcTask(func(lo, hi int) int {
					ranges.Add(1)
					for i := lo; i < hi; i++ {
						atomic.AddInt32(&hits[i], 1)
					}
					return -1
				}))
				if r, want := ranges.Load(), min(n, p, maxChunks); r != int32(want) {
					t.Errorf("caller %d call %d: RunRanges made %d ranges, want %d", c, k, r, want)
					return
				}
				for i, h := range hits {
					if h != 2 {
						t.Errorf("caller %d call %d (p=%d): element %d ran %d times, want once in each", c, k, p, i, h)
						return
					}
				}
				bad := (c*31 + k) % n
				got := run(n, p, chunks(n, p), funcTask(func(lo, hi int) int {
					for i := lo; i < hi; i++ {
						if i >= bad {
							return i
						}
					}
					return -1
				}))
				if got != bad {
					t.Errorf("caller %d call %d (p=%d): Run = %d, want %d", c, k, p, got, bad)
					return
				}
			}
		})
	}
	wg.Wait()
}

// Workers exit once no part has come for idleSpin: none outlives the calls.
// A worker exits within microseconds of its last part, but on a loaded
// machine its thread may wait long for a CPU, so the test allows seconds;
// a worker that never exits (blocked on a channel) still fails it, and the
// failure shows every goroutine's stack.
func TestParallelWorkersExit(t *testing.T) {
	var seen atomic.Int32 // live workers, as a part on a worker sees them
	for range 20 {
		forOn(100, 4, func(lo, hi int) {
			if lo > 0 {
				seen.Store(live.Load())
			}
		})
	}
	require.Positive(t, seen.Load(), "parts ran on no counted worker")
	requireWorkersExit(t)
}

// requireWorkersExit fails t unless every worker has exited within 20 s
// (see TestParallelWorkersExit), showing the goroutines' stacks if not.
func requireWorkersExit(t *testing.T) {
	t.Helper()
	start := time.Now()
	for live.Load() > 0 && time.Since(start) < 20*time.Second {
		time.Sleep(time.Millisecond)
	}
	if n := live.Load(); n != 0 {
		var stacks strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
		t.Fatalf("%d workers still running %v after the last call (idleSpin %v); goroutines:\n%s",
			n, time.Since(start), idleSpin, stacks.String())
	}
	require.Zero(t, idle.Load(), "idle count without polling workers")
}

// A worker leaving (leave) while the idle count is 0 receives the part a
// caller claimed; and if a worker that starts polling meanwhile raises the
// count (and may take that part), the leaving one takes itself off the
// count and exits instead of waiting for a part that may never come.
// The test plays the caller and the second worker itself.
func TestParallelLeave(t *testing.T) {
	requireWorkersExit(t) // no worker of an earlier test touches the count
	type left struct {
		j  *job
		ok bool
	}
	start := func(t *testing.T) chan left {
		idle.Add(1) // a polling worker, about to leave
		require.True(t, idle.CompareAndSwap(1, 0), "a caller claims it")
		res := make(chan left, 1)
		go func() {
			j, ok := leave()
			res <- left{j, ok}
		}()
		time.Sleep(5 * time.Millisecond) // leave sees the count at 0
		return res
	}
	wait := func(t *testing.T, res chan left) left {
		select {
		case l := <-res:
			return l
		case <-time.After(10 * time.Second):
			parts <- &job{} // let the stuck leave return before failing
			t.Fatal("leave still waits 10 s after the count rose")
			return left{}
		}
	}

	t.Run("the claimed part comes", func(t *testing.T) {
		res := start(t)
		j := &job{}
		parts <- j
		l := wait(t, res)
		require.True(t, l.ok)
		require.Same(t, j, l.j)
		require.Zero(t, idle.Load())
	})
	t.Run("another worker takes it", func(t *testing.T) {
		res := start(t)
		idle.Add(1) // a worker starts polling
		l := wait(t, res)
		require.False(t, l.ok)
		require.Nil(t, l.j)
		// The worker that started polling receives the claimed part.
		require.Zero(t, idle.Load())
		j := &job{}
		parts <- j
		require.Same(t, j, <-parts)
	})
}

// Workers all exit once the calls stop after a churn of calls from several
// goroutines that pause for about idleSpin between calls, so that workers
// time out and leave while callers claim others and start new ones.
func TestParallelWorkersExitUnderChurn(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 9))
			for range 3000 {
				forOn(8, 2+r.IntN(3), func(lo, hi int) {})
				time.Sleep(time.Duration(r.IntN(150)) * time.Microsecond)
			}
		})
	}
	wg.Wait()
	requireWorkersExit(t)
}

// BenchmarkParallelCall measures a two-part call of about 20 µs of work,
// back to back: on the package's workers, and on a goroutine started per
// call (the baseline).
func BenchmarkParallelCall(b *testing.B) {
	work := func(lo, hi int) {
		s := 0
		for i := range 20000 {
			s += i ^ s>>3
		}
		parallelSink.Add(int64(s))
	}
	b.Run("workers", func(b *testing.B) {
		for b.Loop() {
			forOn(2, 2, work)
		}
	})
	b.Run("goroutine-per-call", func(b *testing.B) {
		for b.Loop() {
			var wg sync.WaitGroup
			wg.Go(func() { work(1, 2) })
			work(0, 1)
			wg.Wait()
		}
	})
	b.Run("serial-one-part", func(b *testing.B) {
		for b.Loop() {
			work(0, 1)
		}
	})
}

var parallelSink atomic.Int64
