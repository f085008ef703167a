package main

import (
	"fmt"
	"math"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/serve"
)

// features is the number of categorical features of the click model:
// a table each, named "feature<f>.weight" in its file.
const features = 3

// A model is examples/distributed's click model, read-only: each
// feature's bag pooled (mean) from its table, the dense features through
// Linear and ReLU, all concatenated, Linear, ReLU, Linear to one logit.
type model struct {
	tables   [features]*serve.Table
	emb      int       // values per table row
	layers   [3]linear // dense, top1, top2
	format   serve.Format
	rowBytes int64 // of all tables together

	base, seq uint64 // the file's version (its "base" metadata) and the deltas applied after it
	taken     int64  // when the last delta's rows were taken from training (Unix ns), 0 for none
}

// A linear layer: out = W·in + b, W [out, in] row-major.
type linear struct {
	w, b    []float32
	in, out int
}

func (l linear) apply(out, in []float32, relu bool) {
	for o := range l.out {
		s := l.b[o]
		for j, v := range l.w[o*l.in : (o+1)*l.in] {
			s += v * in[j]
		}
		if relu {
			s = max(s, 0)
		}
		out[o] = s
	}
}

// loadModel reads the model examples/distributed -save wrote at path, its
// tables in format f.
func loadModel(path string, f serve.Format) (*model, error) {
	ts, meta, err := checkpoint.Read(path)
	if err != nil {
		return nil, err
	}
	get := func(name string, rank int) (*tensor.Dense, error) {
		t, ok := ts[name]
		if !ok || t.Dtype() != tensor.Float32 || t.Dims() != rank {
			return nil, fmt.Errorf("%s: no float32 tensor %q of rank %d (a model examples/distributed -save writes): %w", path, name, rank, checkpoint.ErrMismatch)
		}
		return t, nil
	}
	m := &model{format: f, base: parseBase(meta)}
	for k := range features {
		t, err := get(fmt.Sprintf("feature%d.weight", k), 2)
		if err != nil {
			return nil, err
		}
		if k > 0 && t.Shape()[1] != m.emb {
			return nil, fmt.Errorf("%s: table %d has rows of %d, table 0 of %d: %w", path, k, t.Shape()[1], m.emb, checkpoint.ErrMismatch)
		}
		m.emb = t.Shape()[1]
		if m.tables[k], err = serve.Quantize(t.Float32s(), m.emb, f); err != nil {
			return nil, fmt.Errorf("%s: table %d: %w", path, k, err)
		}
		m.tables[k] = m.tables[k].At(m.base).Named(fmt.Sprintf("feature%d.weight", k))
		m.rowBytes += int64(len(m.tables[k].Bytes()))
	}
	if err := m.readLayers(ts, path); err != nil {
		return nil, err
	}
	return m, nil
}

// readLayers sets m's layers from ts, the tensors of the file at path,
// and checks that they fit its tables.
func (m *model) readLayers(ts map[string]*tensor.Dense, path string) error {
	get := func(name string, rank int) (*tensor.Dense, error) {
		t, ok := ts[name]
		if !ok || t.Dtype() != tensor.Float32 || t.Dims() != rank {
			return nil, fmt.Errorf("%s: no float32 tensor %q of rank %d (a model examples/distributed -save writes): %w", path, name, rank, checkpoint.ErrMismatch)
		}
		return t, nil
	}
	for k, name := range []string{"dense", "top1", "top2"} {
		w, err := get(name+".weight", 2)
		if err != nil {
			return err
		}
		b, err := get(name+".bias", 1)
		if err != nil {
			return err
		}
		l := linear{w: w.Float32s(), b: b.Float32s(), out: w.Shape()[0], in: w.Shape()[1]}
		if b.Shape()[0] != l.out {
			return fmt.Errorf("%s: %s.bias has %d values for %d outputs: %w", path, name, b.Shape()[0], l.out, checkpoint.ErrMismatch)
		}
		m.layers[k] = l
	}
	d, t1, t2 := m.layers[0], m.layers[1], m.layers[2]
	if t1.in != features*m.emb+d.out || t2.in != t1.out || t2.out != 1 {
		return fmt.Errorf("%s: layers of %d→%d, %d→%d, %d→%d do not fit tables of %d: %w", path, d.in, d.out, t1.in, t1.out, t2.in, t2.out, m.emb, checkpoint.ErrMismatch)
	}
	return nil
}

// denseIn is the number of dense features a model takes.
func (m *model) denseIn() int { return m.layers[0].in }

// A batch is the examples of a request, flattened for the tables' bags.
type batch struct {
	n       int
	ids     [features][]int64
	offsets [features][]int64
	dense   []float32 // n·denseIn
}

// predict writes the probability of a click for each example of b into
// p. The batch's ids must lie in the tables (the handler checks them).
func (m *model) predict(p []float64, b *batch) error {
	pooled := make([][]float32, features)
	for f, t := range m.tables {
		pooled[f] = make([]float32, b.n*m.emb)
		if err := t.Bag(pooled[f], b.ids[f], b.offsets[f], serve.BagOptions{Mode: driver.BagMean}); err != nil {
			return fmt.Errorf("feature %d: %w", f, err)
		}
	}
	d, t1, t2 := m.layers[0], m.layers[1], m.layers[2]
	z := make([]float32, t1.in)
	h := make([]float32, t1.out)
	var logit [1]float32
	for i := range b.n {
		for f := range features {
			copy(z[f*m.emb:], pooled[f][i*m.emb:(i+1)*m.emb])
		}
		d.apply(z[features*m.emb:], b.dense[i*d.in:(i+1)*d.in], true)
		t1.apply(h, z, true)
		t2.apply(logit[:], h, false)
		p[i] = 1 / (1 + math.Exp(-float64(logit[0])))
	}
	return nil
}
