package main

import (
	"context"
	"fmt"
	"time"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/cluster"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

func tableName(c config, f int) string { return fmt.Sprintf("%s.feature%d", c.name, f) }
func denseName(c config) string        { return c.name + ".dense" }

// sparseAdam is the optimiser of every table, and of the dense
// learnables on the cluster.
func sparseAdam(c config) *optim.SparseAdam { return optim.NewSparseAdam(c.lr) }

// create writes the model's tables, each row with SparseAdam's moments,
// and its dense learnables to the cluster, replacing those of an earlier
// run.
func create(c config) error {
	cols := sparseAdam(c).Columns(embDim)
	for f := range vocab {
		err := cluster.Create(context.Background(), c.redis, tableName(c, f), int64(vocab[f]), embDim, tensor.Float32,
			table.WithSeed(tableSeed(c.seed, f)), table.WithState(cols...), table.WithReplace())
		if err != nil {
			return err
		}
	}
	params := denseParams(gorgonia.NewGraph(), c.seed)
	rows, err := optim.SharedRows(params...)
	if err != nil {
		return err
	}
	err = cluster.Create(context.Background(), c.redis, denseName(c), rows, optim.SharedWidth, tensor.Float32,
		table.WithState(sparseAdam(c).Columns(optim.SharedWidth)...), table.WithReplace())
	if err != nil {
		return err
	}
	s, err := cluster.Open(context.Background(), c.redis, denseName(c))
	if err != nil {
		return err
	}
	defer s.Close()
	return optim.CreateSharedDense(context.Background(), s, params...)
}

// openDense returns the dense learnables params as the cluster holds
// them, for the worker so places.
func openDense(c config, so optim.SharedOptions, params []*gorgonia.Node) (*optim.SharedDense, error) {
	s, err := cluster.Open(context.Background(), c.redis, denseName(c))
	if err != nil {
		return nil, err
	}
	d, err := optim.OpenSharedDense(context.Background(), s, sparseAdam(c), so, params...)
	if err != nil {
		s.Close()
		return nil, err
	}
	return d, nil
}

// runWorker trains on worker w's shard of the examples (every
// c.workers-th), its tables' rows in caches in front of the cluster and
// its dense learnables read from the cluster at each step.
func runWorker(c config, w int) error {
	train := examples(c.seed, 1, c.examples)
	g := gorgonia.NewGraph()
	var tables [3]*nn.Embedding
	var stores []*cluster.Store
	for f := range tables {
		s, err := cluster.Open(context.Background(), c.redis, tableName(c, f))
		if err != nil {
			return err
		}
		stores = append(stores, s)
		cached, err := table.NewCached(context.Background(), s,
			table.CacheOptions{Budget: int64(c.cacheMB) << 20, Shared: &table.SharedOptions{MaxAge: c.maxAge}})

		if err != nil {
			return err
		}
		if tables[f], err = nn.CachedEmbedding(context.Background(), g, cached); err != nil {
			return err
		}
		defer tables[f].Close(context.Background())
		defer s.Close()
	}
	m, err := newModel(g, tables, c.batch, c.seed)
	if err != nil {
		return err
	}
	defer m.close()
	dense, err := openDense(c, optim.SharedOptions{Worker: w, Workers: c.workers, Staleness: c.staleness}, m.params)
	if err != nil {
		return err
	}
	defer dense.Close()
	opt := sparseAdam(c)
	pipelines := func() uint64 { // the pipelines of the tables' steps so far
		var n uint64
		for _, s := range stores {
			n += s.Stats().StepPipelines
		}
		return n
	}
	masters, err := stores[0].Masters(context.Background())
	if err != nil {
		return err
	}
	var stepPipes uint64 // the pipelines of the tables' steps, after the first (which loads the Function)
	steps := c.examples / c.workers / c.batch
	shard := func(step int) *batch {
		pos := make([]int, c.batch)
		for i := range pos {
			pos[i] = (step*c.batch+i)*c.workers + w
		}
		return train.slice(pos)
	}
	start, sum := time.Now(), 0.0
	next := shard(0)
	for step := range steps {
		b := next
		if step+1 < steps {
			next = shard(step + 1)
			for f, e := range tables {
				e.Home().(nn.Cache).Prefetch(next.ids[f])
			}
		}
		if err := dense.Pull(context.Background()); err != nil {
			return err
		}
		loss, err := m.run(b)
		if err != nil {
			return err
		}
		before := pipelines()
		if err := m.coll.Step(context.Background(), opt); err != nil {
			return err
		}
		if step > 0 {
			stepPipes += pipelines() - before
		}
		if err := dense.Push(context.Background()); err != nil {
			return err
		}
		sum += loss
		if (step+1)%max(1, steps/5) == 0 || step+1 == steps {
			fmt.Printf("step %d of %d: training loss %.4f, %.1f ms a step\n", step+1, steps, sum/float64(step+1), float64(time.Since(start).Microseconds())/1e3/float64(step+1))
		}
	}
	for f, e := range tables {
		st := e.Home().(nn.Cache).Cached().Stats()
		fmt.Printf("table %d: %d rows read, hit rate %.3f\n", f, st.Misses, st.HitRate())
	}
	if steps > 1 {
		fmt.Printf("the %d tables' step: %.2f round trips per master (%d masters, %.1f pipelines a step)\n",
			len(tables), float64(stepPipes)/float64(steps-1)/float64(masters), masters, float64(stepPipes)/float64(steps-1))
	}
	return nil
}

// clusterWeights reads the model the workers trained from the cluster.
func clusterWeights(c config) (*weights, error) {
	w := &weights{}
	for f := range vocab {
		s, err := cluster.Open(context.Background(), c.redis, tableName(c, f))
		if err != nil {
			return nil, err
		}
		ids := make([]int64, vocab[f])
		for i := range ids {
			ids[i] = int64(i)
		}
		v, err := table.ReadValues(context.Background(), s, ids)
		s.Close()
		if err != nil {
			return nil, err
		}
		w.tables[f] = v.Float32s()
	}
	params := denseParams(gorgonia.NewGraph(), c.seed)
	d, err := openDense(c, optim.SharedOptions{Workers: 1}, params)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if err := d.Pull(context.Background()); err != nil {
		return nil, err
	}
	for _, p := range params {
		w.dense = append(w.dense, p.Value().(*tensor.Dense).Float32s())
	}
	return w, nil
}

// trainInMemory trains the model in this process on the examples, in
// batches, tables stepped by SparseAdam and dense learnables by Adam. With
// c.half the tables hold their values in that half format (behind caches
// of all their rows), rounded stochastically after each step unless
// c.nearest.
func trainInMemory(c config, train *batch) (*weights, error) {
	g := gorgonia.NewGraph()
	var tables [3]*nn.Embedding
	var cached [3]*table.Cached
	opt := sparseAdam(c)
	for f := range tables {
		if c.half == 0 {
			var err error
			tables[f], err = nn.NewEmbedding(g, tableName(c, f), vocab[f], embDim, tensor.Float32, nn.WithSparse(), nn.WithSeed(tableSeed(c.seed, f)))
			if err != nil {
				return nil, err
			}
			continue
		}
		// The same initial values, held in half precision.
		init, err := nn.NewEmbedding(gorgonia.NewGraph(), tableName(c, f), vocab[f], embDim, tensor.Float32, nn.WithSeed(tableSeed(c.seed, f)))
		if err != nil {
			return nil, err
		}
		w0, err := init.Home().(nn.Weights).Weight()
		if err != nil {
			return nil, err
		}
		cols := opt.Columns(embDim)
		s, err := table.NewHalfMemoryStore(tableName(c, f), w0, c.half, cols...)
		if err != nil {
			return nil, err
		}
		budget := int64(vocab[f]) * int64(s.RowBytes()+2*embDim+72) // every row, as float32 in the cache
		cached[f], err = table.NewCached(context.Background(), s,
			table.CacheOptions{Budget: budget, Rounding: table.Rounding{Nearest: c.nearest, Seed: c.seed}})
		if err != nil {
			return nil, err
		}
		if tables[f], err = nn.CachedEmbedding(context.Background(), g, cached[f]); err != nil {
			return nil, err
		}
		defer tables[f].Close(context.Background())
	}
	m, err := newModel(g, tables, c.batch, c.seed)
	if err != nil {
		return nil, err
	}
	defer m.close()
	adam := optim.NewAdam(c.lr)
	var pub *publisher
	if c.deltas != "" && c.save != "" {
		if pub, err = newPublisher(c.deltas, tables, m.params); err != nil {
			return nil, err
		}
		if err := saveBase(c, tables, cached, m, pub); err != nil {
			return nil, err
		}
	}
	pos := make([]int, c.batch)
	unpublished := false // steps since the last delta
	for step := range train.len() / c.batch {
		for i := range pos {
			pos[i] = step*c.batch + i
		}
		if _, err := m.run(train.slice(pos)); err != nil {
			return nil, err
		}
		if err := m.coll.Step(context.Background(), opt); err != nil {
			return nil, err
		}
		if err := adam.Step(gorgonia.NodesToValueGrads(m.params)); err != nil {
			return nil, err
		}
		unpublished = true
		if c.saveEvery > 0 && c.save != "" && (step+1)%c.saveEvery == 0 {
			if pub != nil {
				if err := saveBase(c, tables, cached, m, pub); err != nil {
					return nil, err
				}
				unpublished = false
				continue
			}
			w, err := current(tables, cached, m)
			if err != nil {
				return nil, err
			}
			if err := save(c, w, 0); err != nil {
				return nil, err
			}
		}
		if pub != nil && (step+1)%c.deltaEvery == 0 {
			if err := pub.publish(); err != nil {
				return nil, err
			}
			unpublished = false
		}
	}
	if pub != nil && unpublished { // the last steps, so that base and deltas are the model trained
		if err := pub.publish(); err != nil {
			return nil, err
		}
	}
	return current(tables, cached, m)
}

// saveBase writes the model to c.save as a new base version (its time),
// after which pub publishes its deltas.
func saveBase(c config, tables [3]*nn.Embedding, cached [3]*table.Cached, m *model, pub *publisher) error {
	w, err := current(tables, cached, m)
	if err != nil {
		return err
	}
	base := uint64(time.Now().UnixNano())
	if err := save(c, w, base); err != nil {
		return err
	}
	return pub.rebase(base)
}

// current returns the model's weights as they are now: the tables' values
// (read from their caches, for half tables) and the dense learnables.
func current(tables [3]*nn.Embedding, cached [3]*table.Cached, m *model) (*weights, error) {
	w := &weights{}
	for f, e := range tables {
		if cached[f] == nil {
			t, err := e.Home().(nn.Weights).Weight()
			if err != nil {
				return nil, err
			}
			w.tables[f] = t.Float32s()
			continue
		}
		ids := make([]int64, vocab[f])
		for i := range ids {
			ids[i] = int64(i)
		}
		rows, err := cached[f].Read(context.Background(), ids) // values, then SparseAdam's moments
		if err != nil {
			return nil, err
		}
		width := rows.Shape()[1]
		for r := range vocab[f] {
			w.tables[f] = append(w.tables[f], rows.Float32s()[r*width:r*width+embDim]...)
		}
	}
	for _, p := range m.params {
		w.dense = append(w.dense, p.Value().(*tensor.Dense).Float32s())
	}
	return w, nil
}
