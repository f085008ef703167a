package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/nn"
)

// A publisher writes what training changed, every few steps, as deltas
// after the model file -save wrote (its "base" metadata): delta seq is
// the file "<base>-<seq>.safetensors" in dir (checkpoint.WriteDeltas),
// written atomically: the rows of each table the steps since the last
// delta changed, as "feature<f>.weight", and the dense learnables whole.
// A server (examples/serve -deltas) applies seq once the file is there.
type publisher struct {
	dir    string
	base   uint64
	seq    uint64
	tables [3]*nn.Embedding
	params []*gorgonia.Node
}

// newPublisher returns the publisher of tables and params into dir; its
// base is given by rebase.
func newPublisher(dir string, tables [3]*nn.Embedding, params []*gorgonia.Node) (*publisher, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for _, e := range tables {
		e.TrackChanges()
	}
	return &publisher{dir: dir, tables: tables, params: params}, nil
}

// rebase starts the deltas after a new model file of version base: what
// changed before it is in the file.
func (p *publisher) rebase(base uint64) error {
	p.base, p.seq = base, 0
	for _, e := range p.tables {
		if _, err := e.Delta(context.Background(), base, 1); err != nil {
			return err
		}
	}
	return nil
}

// publish writes the next delta.
func (p *publisher) publish() error {
	p.seq++
	ds := make([]*driver.Delta, len(p.tables))
	for f, e := range p.tables {
		d, err := e.Delta(context.Background(), p.base, p.seq)
		if err != nil {
			return err
		}
		d.Table = fmt.Sprintf("feature%d.weight", f)
		ds[f] = d
	}
	ts := map[string]tensor.Tensor{}
	for k, n := range p.params {
		ts[denseNames[k]] = n.Value().(*tensor.Dense)
	}
	return checkpoint.WriteDeltas(deltaPath(p.dir, p.base, p.seq), ds, ts)
}

// deltaPath returns the file of delta seq of base in dir.
func deltaPath(dir string, base, seq uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%d-%d.safetensors", base, seq))
}
