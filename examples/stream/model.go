package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/machine"
	"github.com/gathergrad/gather/metrics"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// initStd is the spread of the tables' first values: every row of the
// hashed tables, each row as an id gets it in the others.
const initStd = 0.05

// A kind is how a model gives raw ids rows.
type kind int

const (
	dynamic   kind = iota // an IDMap of a fixed number of rows: admits, evicts
	hashed                // the hashing trick: row = id mod rows
	unbounded             // an IDMap with a row for every id of the stream
)

func (k kind) String() string { return [...]string{"dynamic", "hashed", "unbounded"}[k] }

// A model is the click model on one kind of table: the user's and the
// item's embeddings, each through a linear map to a logit, summed, and the
// logistic loss. SparseAdam steps the tables, Adam the linear maps.
type model struct {
	kind   kind
	rows   [2]int
	maps   [2]*table.IDMap
	raw    [2]*nn.RawIDs
	embs   [2]*nn.Embedding
	ids    [2]*tensor.Dense
	clicks *tensor.Dense
	logits *gorgonia.Node
	dense  gorgonia.Nodes
	vm     gorgonia.VM
	sparse optim.Sparse
	solver gorgonia.Solver
	metric *metrics.Binary
	probs  []float32

	mapTime, stepTime time.Duration
}

// newModel returns a model of kind k whose tables have rows rows (the
// users' half of them) of dim values, window the examples its windowed
// metrics cover.
func newModel(k kind, batch, dim int, rows [2]int, admitAfter, window int) (*model, error) {
	m := &model{kind: k, rows: rows, sparse: optim.NewSparseAdam(0.01), solver: gorgonia.NewAdamSolver(gorgonia.WithLearnRate(0.01)),
		probs: make([]float32, batch)}
	g := gorgonia.NewGraph()
	var sum *gorgonia.Node
	for f, name := range []string{"user", "item"} {
		var opts []nn.NewEmbeddingOption
		vocab := rows[f]
		if k != hashed {
			o := driver.IDMapOptions{Rows: rows[f], AdmitAfter: admitAfter}
			var err error
			if m.maps[f], err = table.NewIDMap(name, o); err != nil {
				return nil, err
			}
			vocab, opts = rows[f]+1, []nn.NewEmbeddingOption{nn.WithPadding(rows[f])}
		}
		emb, err := nn.NewEmbedding(g, name, vocab, dim, tensor.Float32, append(opts, nn.WithSparse())...)
		if err != nil {
			return nil, err
		}
		if k == hashed { // each row as if an id of its number had it
			w, err := emb.Home().(nn.Weights).Weight()
			if err != nil {
				return nil, err
			}
			all := make([]driver.Assignment, vocab)
			for r := range all {
				all[r] = driver.Assignment{Row: int64(r), ID: int64(r)}
			}
			if err := table.InitialRows(w, nil, nil, all, driver.RowInit{Seed: 7, Std: initStd}); err != nil {
				return nil, err
			}
		}
		if k != hashed {
			if m.raw[f], err = nn.NewRawIDs(emb, m.maps[f], driver.RowInit{Seed: 7, Std: initStd}); err != nil {
				return nil, err
			}
		}
		m.embs[f] = emb
		m.ids[f] = tensor.New(tensor.WithShape(batch), tensor.Of(tensor.Int))
		ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(batch), gorgonia.WithName(name+"_ids"), gorgonia.WithValue(m.ids[f]))
		h, err := emb.Lookup(ids)
		if err != nil {
			return nil, err
		}
		w := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(dim, 1), gorgonia.WithName(name+"_w"), gorgonia.WithInit(gorgonia.Zeroes()))
		m.dense = append(m.dense, w)
		z := gorgonia.Must(gorgonia.Mul(h, w))
		if sum == nil {
			sum = z
		} else {
			sum = gorgonia.Must(gorgonia.Add(sum, z))
		}
	}
	m.logits = gorgonia.Must(gorgonia.Reshape(sum, tensor.Shape{batch}))
	m.clicks = tensor.New(tensor.WithShape(batch), tensor.Of(tensor.Float32))
	y := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(batch), gorgonia.WithName("clicks"), gorgonia.WithValue(m.clicks))
	loss, err := nn.BCEWithLogits(m.logits, y)
	if err != nil {
		return nil, err
	}
	learn := append(append(gorgonia.Nodes{}, m.dense...), m.embs[0].GradNodes()...)
	learn = append(learn, m.embs[1].GradNodes()...)
	if _, err := gorgonia.Grad(loss, learn...); err != nil {
		return nil, err
	}
	if m.vm, err = machine.New(g, machine.WithGrads(learn...)); err != nil {
		return nil, err
	}
	if m.metric, err = metrics.NewBinary(metrics.Options{Window: window}); err != nil {
		return nil, err
	}
	return m, nil
}

// step trains on one batch: the predictions of the batch, before it
// trains on them, go to the metrics (progressive validation).
func (m *model) step(step int64, ids [2][]int64, clicks []float32) error {
	start := time.Now()
	for f := range ids {
		if m.kind == hashed {
			for k, id := range ids[f] {
				m.ids[f].Ints()[k] = int(uint64(id) % uint64(m.rows[f]))
			}
		} else if err := m.raw[f].Map(context.Background(), ids[f], m.ids[f], step); err != nil {
			return err
		}
	}
	mapped := time.Now()
	copy(m.clicks.Float32s(), clicks)
	if err := m.vm.RunAll(); err != nil {
		return err
	}
	for k, x := range m.logits.Value().Data().([]float32) {
		m.probs[k] = float32(1 / (1 + math.Exp(-float64(x))))
	}
	for _, e := range m.embs {
		if err := e.Step(context.Background(), m.sparse); err != nil {
			return err
		}
	}
	if err := m.solver.Step(gorgonia.NodesToValueGrads(m.dense)); err != nil {
		return err
	}
	m.vm.Reset()
	m.mapTime += mapped.Sub(start)
	m.stepTime += time.Since(mapped)
	return m.metric.Update(m.probs, clicks)
}

// stats returns the id maps' counts, "" for the hashing trick.
func (m *model) stats() string {
	if m.kind == hashed {
		return ""
	}
	var used int
	var admitted, evicted uint64
	for _, im := range m.maps {
		s, _ := im.Stats(context.Background()) // a map in memory: never an error
		used, admitted, evicted = used+s.Used, admitted+s.Admitted, evicted+s.Evicted
	}
	return fmt.Sprintf(" rows used %d admitted %d evicted %d", used, admitted, evicted)
}

func (m *model) close() { m.vm.Close() }
