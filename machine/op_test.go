package machine_test

import (
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"strings"
	"sync"
	"testing"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/machine"
)

// waitOp is a scalar op whose Do closes started (once) and waits for
// release before it returns 1.
type waitOp struct {
	started, release chan struct{}
	once             sync.Once
}

func (o *waitOp) Arity() int    { return 1 }
func (o *waitOp) Type() hm.Type { return hm.NewFnType(tensor.Float64, tensor.Float64) }
func (o *waitOp) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return tensor.ScalarShape(), nil
}
func (o *waitOp) Do(...gorgonia.Value) (gorgonia.Value, error) {
	o.once.Do(func() { close(o.started) })
	<-o.release
	return gorgonia.NewF64(1), nil
}
func (o *waitOp) ReturnsPtr() bool      { return false }
func (o *waitOp) CallsExtern() bool     { return false }
func (o *waitOp) OverwritesInput() int  { return -1 }
func (o *waitOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "wait %p", o) }
func (o *waitOp) Hashcode() uint32 {
	h := fnv.New32a()
	o.WriteHash(h)
	return h.Sum32()
}
func (o *waitOp) String() string { return "wait" }

// A run's error names the failing node once: a node without a name of its
// own is printed as Gorgonia names it, by its op and inputs, not with its
// op a second time.
func TestErrorNamesNodeOnce(t *testing.T) {
	g := gorgonia.NewGraph()
	data := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(3, 2), gorgonia.WithName("data"), gorgonia.WithInit(gorgonia.Ones()))
	ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(2), gorgonia.WithName("ids"),
		gorgonia.WithValue(tensor.New(tensor.WithBacking([]int{0, 7}))))
	out, err := gather.Gather(data, ids, 0)
	if err != nil {
		t.Fatal(err)
	}
	gorgonia.Must(gorgonia.Sum(out))
	m, err := machine.New(g)
	if err != nil {
		t.Fatal(err)
	}
	err = m.RunAll()
	if !errors.Is(gather.Cause(err), gather.ErrIndexOutOfRange) {
		t.Fatalf("RunAll: %v, want an index error", err)
	}
	if n := strings.Count(err.Error(), out.Op().String()); n != 1 {
		t.Errorf("RunAll: %q names the op %d times, want once", err, n)
	}
}
