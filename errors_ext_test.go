package gather_test

import (
	"testing"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/machine"
	"github.com/gathergrad/gather/metrics"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/serve"
	"github.com/gathergrad/gather/table"
)

// A sentinel exported by two packages under one name is one value, so
// that errors.Is with either finds it.
func TestSentinelsShared(t *testing.T) {
	for name, same := range map[string][]error{
		"ErrIndexOutOfRange": {gather.ErrIndexOutOfRange, serve.ErrIndexOutOfRange},
		"ErrShape":           {gather.ErrShape, serve.ErrShape},
		"ErrOption":          {gather.ErrOption, serve.ErrOption},
		"ErrClosed":          {table.ErrClosed, machine.ErrClosed, serve.ErrClosed},
		"ErrInUse":           {table.ErrInUse, checkpoint.ErrInUse},
		"ErrSameFile":        {table.ErrSameFile, checkpoint.ErrSameFile, serve.ErrSameFile},
		"ErrNotFinite":       {optim.ErrNotFinite, metrics.ErrNotFinite},
	} {
		for _, e := range same[1:] {
			if e != same[0] {
				t.Errorf("%s: %v and %v are two values", name, same[0], e)
			}
		}
	}
}
