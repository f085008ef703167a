package gather_test

import (
	"testing"

	"github.com/gathergrad/gather"
)

// Gather's own options are GatherOptions and not Options, so that
// GatherElements does not take them (the call does not compile); the
// options of both ops are both.
func TestOptionTypes(t *testing.T) {
	for name, o := range map[string]gather.GatherOption{
		"WithPaddingIndex":    gather.WithPaddingIndex(0),
		"WithScaleGradByFreq": gather.WithScaleGradByFreq(),
	} {
		if _, ok := o.(gather.Option); ok {
			t.Errorf("%s is an Option: GatherElements would take it", name)
		}
	}
	for name, o := range map[string]gather.GatherOption{
		"WithGradScale": gather.WithGradScale(2),
		"WithoutGrad":   gather.WithoutGrad(),
		"WithName":      gather.WithName("n"),
	} {
		if _, ok := o.(gather.Option); !ok {
			t.Errorf("%s is not an Option: GatherElements would not take it", name)
		}
	}
}
