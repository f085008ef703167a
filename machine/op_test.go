package machine_test

import (
	"fmt"
	"hash"
	"hash/fnv"
	"sync"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
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
