package main

import (
	"fmt"
	"log"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
)

// A publisher stands in for training beside the server: it serves a copy
// of the model as version 1 of its base and writes deltas after it as
// examples/distributed -deltas does ("<base>-<seq>.safetensors" in dir,
// checkpoint.WriteDeltas): rows rows of each table drawn afresh, and the
// dense layers whole.
type publisher struct {
	model, dir string
	vocab      []int64
	dim        int
	rows       int
	dense      map[string]tensor.Tensor
	seq        uint64 // the last delta published
	r          *rand.Rand
}

// newPublisher copies the model at src to model, with its base version
// 1, and returns the publisher of its deltas into dir.
func newPublisher(src, model, dir string, rows int) (*publisher, error) {
	ts, meta, err := checkpoint.Read(src)
	if err != nil {
		return nil, err
	}
	p := &publisher{model: model, dir: dir, rows: rows, dense: map[string]tensor.Tensor{}, r: rand.New(rand.NewPCG(3, 4))}
	for f := 0; ; f++ {
		w, ok := ts[fmt.Sprintf("feature%d.weight", f)]
		if !ok {
			break
		}
		p.vocab, p.dim = append(p.vocab, int64(w.Shape()[0])), w.Shape()[1]
	}
	if len(p.vocab) == 0 {
		return nil, fmt.Errorf("%s: no feature0.weight: not a model examples/distributed -save writes", src)
	}
	all := map[string]tensor.Tensor{}
	for name, t := range ts {
		all[name] = t
		if !strings.HasPrefix(name, "feature") {
			p.dense[name] = t
		}
	}
	if meta == nil {
		meta = map[string]string{}
	}
	meta["base"] = "1"
	if err := checkpoint.Write(model, all, meta); err != nil {
		return nil, err
	}
	return p, os.MkdirAll(dir, 0o755)
}

// delta returns the bytes of delta seq (checkpoint.EncodeDeltas).
func (p *publisher) delta(seq uint64) ([]byte, error) {
	ds := make([]*driver.Delta, len(p.vocab))
	for f, v := range p.vocab {
		n := min(int64(p.rows), v)
		pick := map[int64]bool{}
		for int64(len(pick)) < n {
			pick[p.r.Int64N(v)] = true
		}
		d := &driver.Delta{Table: fmt.Sprintf("feature%d.weight", f), Base: 1, Seq: seq, Dim: p.dim, Time: time.Now().UnixNano(),
			Rows: slices.Sorted(maps.Keys(pick))}
		d.Values = make([]float32, len(d.Rows)*p.dim)
		for k := range d.Values {
			d.Values[k] = float32(p.r.NormFloat64() * 0.05)
		}
		ds[f] = d
	}
	return checkpoint.EncodeDeltas(ds, p.dense)
}

// everySecond returns a function that publishes n deltas, made now, one
// a second until stop: while requests go out, the client's processor
// spends only each file's write and rename (atomic, as
// checkpoint.WriteDeltas writes) on them.
func (p *publisher) everySecond(n int) func(stop <-chan struct{}) {
	var ahead [][]byte
	for k := range n {
		b, err := p.delta(p.seq + 1 + uint64(k))
		if err != nil {
			log.Fatal(err)
		}
		ahead = append(ahead, b)
	}
	return func(stop <-chan struct{}) {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for _, b := range ahead {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			p.seq++
			path := filepath.Join(p.dir, fmt.Sprintf("1-%d.safetensors", p.seq))
			if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
				log.Fatal(err)
			}
			if err := os.Rename(path+".tmp", path); err != nil {
				log.Fatal(err)
			}
		}
	}
}
