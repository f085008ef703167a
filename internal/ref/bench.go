package ref

import (
	"math/rand/v2"
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

// GemmShapes are the float32 products BenchmarkGemm times (package
// kernel's against gonum's, package openblas's with the tag): the step
// benchmarks' layers (a batch of a few hundred rows through 16 to 256
// columns, forward and both gradients; TrainStep's 4,096 rows of 64
// through 16; examples/embedding's 128 windows through the 2,000-word
// output layer) and squares of 512 and 1024.
var GemmShapes = []struct {
	Name           string
	TransA, TransB bool
	M, N, K        int
}{
	{"256x64x64", false, true, 256, 64, 64},
	{"256x256x128", false, true, 256, 256, 128},
	{"grad-x-256x128x256", false, false, 256, 128, 256},
	{"grad-w-256x128x256", true, false, 256, 128, 256},
	{"512x16x40", false, true, 512, 16, 40},
	{"step-4096x16x64", false, true, 4096, 16, 64},
	{"step-grad-x-4096x64x16", false, false, 4096, 64, 16},
	{"step-grad-w-16x64x4096", true, false, 16, 64, 4096},
	{"lm-128x2000x128", false, false, 128, 2000, 128},
	{"lm-grad-x-128x128x2000", false, true, 128, 128, 2000},
	{"lm-grad-w-128x2000x128", true, false, 128, 2000, 128},
	{"512", false, false, 512, 512, 512},
	{"1024", false, false, 1024, 1024, 1024},
}

// GemmOperands returns the row-major operands of shape s, of values from
// a fixed seed, with their leading dimensions, and its flops.
func GemmOperands(m, n, k int, transA, transB bool) (a, b, c []float32, lda, ldb int, flops float64) {
	r := rand.New(rand.NewPCG(1, 2))
	a, b, c = make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
	for i := range a {
		a[i] = float32(r.NormFloat64())
	}
	for i := range b {
		b[i] = float32(r.NormFloat64())
	}
	lda, ldb = k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	return a, b, c, lda, ldb, 2 * float64(m) * float64(n) * float64(k)
}
