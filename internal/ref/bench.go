package ref

import (
	"runtime"
	"testing"
	"time"

	"gorgonia.org/gorgonia"
)

// Steady calls f, which allocates, until the collector has finished two
// cycles after the heap stopped growing (two cycles whose heap goal grew
// by less than an eighth), for at most two seconds, before a benchmark's
// timer starts. The timed calls then reuse memory the collector freed, as
// they do in a program that has been running for a while, rather than
// memory fresh from the operating system, whose first touch (a page fault
// per 4 KiB) a process pays once, while its heap grows to its working size.
// The PyTorch peer likewise makes a call before timing and reports a
// median, its allocator reusing the memory of the call before.
func Steady(f func()) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	deadline := time.Now().Add(2 * time.Second)
	cycles, goal, settled := ms.NumGC, ms.NextGC, uint32(0)
	for i := 0; ; i++ {
		f()
		if i%4 != 3 {
			continue
		}
		runtime.ReadMemStats(&ms)
		if ms.NumGC != cycles {
			if ms.NextGC > goal+goal/8 {
				settled = 0 // the heap is still growing
			} else {
				settled += ms.NumGC - cycles
			}
			cycles, goal = ms.NumGC, ms.NextGC
		}
		if settled >= 2 || time.Now().After(deadline) {
			return
		}
	}
}

// BenchRuns times whole runs of vm, resetting it after each, with their
// allocations, once Steady has run it.
func BenchRuns(b *testing.B, vm gorgonia.VM) {
	run := func() {
		if err := vm.RunAll(); err != nil {
			b.Fatal(err)
		}
		vm.Reset()
	}
	b.ReportAllocs()
	Steady(run)
	for b.Loop() {
		run()
	}
}
