package ref

import (
	"runtime"
	"testing"
	"time"

	"gorgonia.org/gorgonia"
)

// Steady calls f, which allocates, until the collector has finished two
// cycles since Steady began (for at most two seconds), before a
// benchmark's timer starts. The timed calls then reuse memory the
// collector freed, as they do in a program that has been running for a
// while, rather than memory fresh from the operating system, whose first
// touch (a page fault per 4 KiB) a process pays once. The PyTorch peer
// likewise makes a call before timing and reports a median.
func Steady(f func()) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	start, deadline := ms.NumGC, time.Now().Add(2*time.Second)
	for i := 0; ; i++ {
		f()
		if i%4 == 3 {
			if runtime.ReadMemStats(&ms); ms.NumGC >= start+2 || time.Now().After(deadline) {
				return
			}
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
