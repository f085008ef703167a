package ref

import (
	"runtime"
	"testing"
	"time"

	"gorgonia.org/gorgonia"

	"github.com/gathergrad/gather/machine"
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

// BenchSteps times calls of step, a whole training step, with their
// allocations, once Steady has run it, and closes vm after.
func BenchSteps(b *testing.B, vm gorgonia.VM, step func()) {
	defer vm.Close()
	b.ReportAllocs()
	Steady(step)
	for b.Loop() {
		step()
	}
}

// A Machine is one of the machines the graph benchmarks run on.
type Machine struct {
	Name string // "machine" or "tape"
	// New returns the machine for g, keeping the gradients of grads
	// (gorgonia.BindDualValues for the TapeMachine), or of every input if
	// grads is nil.
	New func(g *gorgonia.ExprGraph, grads gorgonia.Nodes) (gorgonia.VM, error)
}

// Machines are machine.Machine and Gorgonia's TapeMachine.
var Machines = []Machine{
	{"machine", func(g *gorgonia.ExprGraph, grads gorgonia.Nodes) (gorgonia.VM, error) {
		if grads != nil {
			return machine.New(g, machine.WithGrads(grads...))
		}
		return machine.New(g)
	}},
	{"tape", func(g *gorgonia.ExprGraph, grads gorgonia.Nodes) (gorgonia.VM, error) {
		if grads != nil {
			return gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(grads...)), nil
		}
		return gorgonia.NewTapeMachine(g), nil
	}},
}

// OnMachines runs bench as a sub-benchmark per machine, named by it.
func OnMachines(b *testing.B, bench func(b *testing.B, m Machine)) {
	for _, m := range Machines {
		b.Run(m.Name, func(b *testing.B) { bench(b, m) })
	}
}
