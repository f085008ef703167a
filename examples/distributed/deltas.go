package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/nn"
)

// A publisher writes what training changed, every few steps, as deltas
// after the model file -save wrote (its "base" metadata): for delta seq,
// in dir, "<base>-<seq>-feature<f>.safetensors" (the rows of table f the
// steps since the last delta changed, checkpoint.WriteDelta), then
// "<base>-<seq>-dense.safetensors" (the dense learnables whole), then the
// empty "<base>-<seq>.ready", written last, each atomically: a server
// (examples/serve -deltas) applies seq when its .ready is there.
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
	name := func(what string) string { return filepath.Join(p.dir, fmt.Sprintf("%d-%d%s", p.base, p.seq, what)) }
	for f, e := range p.tables {
		d, err := e.Delta(context.Background(), p.base, p.seq)
		if err != nil {
			return err
		}
		d.Table = fmt.Sprintf("feature%d.weight", f)
		if err := checkpoint.WriteDelta(name(fmt.Sprintf("-feature%d.safetensors", f)), d); err != nil {
			return err
		}
	}
	ts := map[string]tensor.Tensor{}
	for k, n := range p.params {
		ts[denseNames[k]] = n.Value().(*tensor.Dense)
	}
	meta := map[string]string{"base": strconv.FormatUint(p.base, 10), "seq": strconv.FormatUint(p.seq, 10)}
	if err := checkpoint.Write(name("-dense.safetensors"), ts, meta); err != nil {
		return err
	}
	return checkpoint.Write(name(".ready"), map[string]tensor.Tensor{}, meta)
}
