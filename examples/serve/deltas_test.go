package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/serve"
)

// The server applies each delta as it is ready (-deltas): its tables'
// changed rows and its dense layers, its version naming the delta; a
// delta that does not follow the served model (another base) makes it
// reload the model file.
func TestFollowDeltas(t *testing.T) {
	path, vals := writeModel(t)
	ts := map[string]tensor.Tensor{}
	for name, v := range vals {
		shape := map[string][]int{"dense.weight": {16, 4}, "dense.bias": {16}, "top1.weight": {32, 40}, "top1.bias": {32}, "top2.weight": {1, 32}, "top2.bias": {1}}[name]
		if shape == nil {
			f := int(name[len("feature")] - '0')
			shape = []int{testVocab[f], 8}
		}
		ts[name] = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
	}
	const base = 42
	if err := checkpoint.Write(path, ts, map[string]string{"base": strconv.Itoa(base)}); err != nil {
		t.Fatal(err)
	}
	s := newTestServer(t, path, serve.Float32, options{})
	dir := t.TempDir()
	publish := func(seq, deltaBase uint64) {
		var ds []*driver.Delta
		for f := range features {
			d := &driver.Delta{Table: fmt.Sprintf("feature%d.weight", f), Base: deltaBase, Seq: seq, Dim: 8, Time: time.Now().UnixNano()}
			if f == 0 {
				d.Rows = []int64{int64(seq), 100 + int64(seq)}
				for range 2 * 8 {
					d.Values = append(d.Values, float32(seq))
				}
			}
			ds = append(ds, d)
		}
		dense := map[string]tensor.Tensor{}
		for _, name := range []string{"dense.weight", "dense.bias", "top1.weight", "top1.bias", "top2.weight", "top2.bias"} {
			dense[name] = ts[name]
		}
		if err := checkpoint.WriteDeltas(deltaPath(dir, base, seq), ds, dense); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var logged []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.followDeltas(ctx, dir, 2*time.Millisecond, func(format string, args ...any) {
			mu.Lock()
			logged = append(logged, fmt.Sprintf(format, args...))
			mu.Unlock()
		})
	}()
	wait := func(what string, ok func() bool) {
		for end := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				mu.Lock()
				t.Fatalf("waiting for %s: version %s, logged %q", what, s.Version(), logged)
			}
		}
	}
	for seq := uint64(1); seq <= 3; seq++ {
		publish(seq, base)
	}
	wait("delta 3", func() bool { return s.Current().Model.seq == 3 })
	m := s.Current().Model
	row := make([]float32, 3*8)
	if err := m.tables[0].Lookup(row, []int64{1, 103, 0}); err != nil {
		t.Fatal(err)
	}
	for j := range 8 {
		if row[j] != 1 || row[8+j] != 3 || row[16+j] != vals["feature0.weight"][j] {
			t.Fatalf("rows after 3 deltas: %v", row)
		}
	}
	if v := s.Version(); v[len(v)-2:] != "+3" {
		t.Fatalf("version %s does not name delta 3", v)
	}
	if applied, refused := s.Updates(); applied != 3 || refused != 0 {
		t.Fatalf("%d deltas applied, %d refused", applied, refused)
	}
	if lag := s.lags.p99(); lag <= 0 || lag > 10*time.Second {
		t.Fatalf("the deltas' lag p99 %v", lag)
	}
	// A delta of another base: refused, and the file reloaded.
	publish(4, base+1)
	wait("the reload", func() bool { ok, _ := s.Reloads(); return ok == 1 })
	time.Sleep(50 * time.Millisecond) // the same file again: its deltas are not applied again
	if ok, _ := s.Reloads(); ok != 1 {
		t.Fatalf("%d reloads: the deltas of a file that does not follow them were applied again", ok)
	}
	if m := s.Current().Model; m.seq != 0 || m.base != base {
		t.Fatalf("after the reload: base %d, delta %d", m.base, m.seq)
	}
	cancel()
	<-done
}
