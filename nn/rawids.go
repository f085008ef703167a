package nn

import (
	"context"
	"fmt"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// RawIDs feeds an Embedding raw 64-bit ids (user ids, item ids, hashed
// feature crosses: any int64, negative included) through a driver.Mapper,
// which gives each id a row of the table as it comes and takes rows
// back as ids fade (TorchRec's managed collision tables, TFRA's dynamic
// embeddings):
//
//	m, _ := table.NewIDMap("item", driver.IDMapOptions{Rows: 1 << 20, AdmitAfter: 2})
//	emb, _ := nn.NewEmbedding(g, "item", m.Rows()+1, 16, tensor.Float32, nn.WithSparse(), nn.WithPadding(m.Rows()))
//	raw, _ := nn.NewRawIDs(emb, m, driver.RowInit{Seed: 1, Std: 0.05})
//	for step, batch := range batches {
//		raw.Map(ctx, batch, ids, int64(step)) // ids: the tensor the lookup's node holds
//		vm.RunAll()
//		emb.Step(adam)
//		vm.Reset()
//	}
//
// The table has one row more than the map hands out: its padding row,
// which ids not yet admitted read (zeros) and whose gradient is dropped.
// A row given to an id starts afresh, in values (driver.RowInit's: random
// draws of the seed and the id, the same on every worker and after a
// restart) and in optimiser state (each column's Init), whichever id
// held it before.
//
// A dense table (no WithSparse), stepped by a dense optimiser
// (optim.Adam, SGD, Adagrad), keeps that optimiser's state by row:
// NewRawIDs needs the optimiser (WithDenseOptimizer) to start a row's
// state afresh, and refuses a dense table without it.
//
// Tables in the heap, in a mapped file and in a cache (CachedEmbedding)
// work alike with a map in memory (table.IDMap, a checkpoint.Part: keep
// it with the table). A map that lives beside its store's rows
// (driver.StoreMapper, such as cluster.IDMap, shared by every worker)
// maps a Shared cached table of that store: its Map maps each batch where
// the rows live and reads them in the same calls, and the rows start
// there.
type RawIDs struct {
	emb   *Embedding
	m     driver.Mapper
	init  driver.RowInit
	dense optim.Dense // a dense table's optimiser, whose state by row Map starts afresh
	rows  []int64
	fresh []driver.Assignment
	read  []int64 // the rows a StoreMapper's MapRead read
}

// A RawOption configures NewRawIDs.
type RawOption func(*RawIDs)

// WithDenseOptimizer names the dense optimiser that steps a dense
// table's weight: Map starts the state it keeps for each row given to a
// new id at zeros (optim.StartRows), as a new learnable's.
func WithDenseOptimizer(opt optim.Dense) RawOption { return func(r *RawIDs) { r.dense = opt } }

// NewRawIDs returns the raw ids of emb, a table of m.Rows()+1 rows whose
// padding row is m.Rows(), mapped by m, new rows started by init. (A
// table file may have more rows: those table.FileOptions.IDMap keeps the
// map in.) A smaller table or another padding row is an error wrapping
// gather.ErrOption, as is a dense table (trained, not WithSparse)
// without WithDenseOptimizer: its optimiser's state of a row could not
// be started afresh. A driver.StoreMapper maps only a Shared cached table
// of its store (table.CheckMapper), with init its RowInit; a map in
// memory maps any table but a Shared one.
func NewRawIDs(emb *Embedding, m driver.Mapper, init driver.RowInit, opts ...RawOption) (*RawIDs, error) {
	if emb == nil || m == nil {
		return nil, fmt.Errorf("embedding: NewRawIDs needs an embedding and an id map: %w", gather.ErrOption)
	}
	if emb.home.Vocab() < m.Rows()+1 || emb.padding() != m.Rows() {
		return nil, fmt.Errorf("embedding %q: raw ids through the map %q of %d rows need a table of at least %d rows with padding row %d (nn.WithPadding), not %d rows with padding %d: %w",
			emb.Name(), m.Name(), m.Rows(), m.Rows()+1, m.Rows(), emb.home.Vocab(), emb.padding(), gather.ErrOption)
	}
	if err := init.Check(); err != nil {
		return nil, fmt.Errorf("embedding %q: %w", emb.Name(), err)
	}
	c := emb.home.cache()
	cached := c != nil
	if cached {
		if err := table.CheckMapper(c, m); err != nil {
			return nil, fmt.Errorf("embedding %q: %w", emb.Name(), err)
		}
	}
	if sm, ok := m.(driver.StoreMapper); ok {
		if !cached {
			return nil, fmt.Errorf("embedding %q: the map %q starts its rows on its store: it maps a Shared cached table of that store: %w", emb.Name(), m.Name(), gather.ErrOption)
		}
		if sm.RowInit() != init {
			return nil, fmt.Errorf("embedding %q: the map %q starts its rows as %+v, not %+v: %w", emb.Name(), m.Name(), sm.RowInit(), init, gather.ErrOption)
		}
	}
	r := &RawIDs{emb: emb, m: m, init: init}
	for _, o := range opts {
		o(r)
	}
	if dense := !emb.cfg.sparse && !emb.cfg.frozen; dense != (r.dense != nil) {
		if dense {
			return nil, fmt.Errorf("embedding %q is dense: the dense optimiser that steps it keeps state by row, which a row given to a new id must start afresh: pass it (nn.WithDenseOptimizer), or make the table sparse (nn.WithSparse): %w",
				emb.Name(), gather.ErrOption)
		}
		return nil, fmt.Errorf("embedding %q is sparse or frozen: a dense optimiser (nn.WithDenseOptimizer) does not step it: %w", emb.Name(), gather.ErrOption)
	}
	return r, nil
}

// Map sets dst, the ids tensor of a lookup or bag of the embedding (Int,
// Int32 or Int64, as many elements as raw), to the rows the map gives
// raw (an Int64 tensor, or []int64) at step, and starts the rows it gave
// new ids afresh. A step that looks the table up several times maps each
// lookup's ids with the same step; steps must not decrease. An error of
// the ids or the map (a dst of another size, the map's ErrCapacity)
// changes nothing: not the map, the table or dst. When a cached table's
// store fails to give the new rows (its fetch's error), the map forgets
// the ids it had just given rows (driver.Mapper's Forget), so that they
// get rows, started afresh, at a later Map; dst is unchanged. With a map
// on a Redis Cluster (cluster.IDMap), an error wrapping
// cluster.ErrUnknownOutcome may leave the map changed in part: the same
// Map again applies the rest, exactly once.
func (r *RawIDs) Map(ctx context.Context, raw any, dst *tensor.Dense, step int64) error {
	var ids []int64
	switch v := raw.(type) {
	case []int64:
		ids = v
	case *tensor.Dense:
		if v.Dtype() != tensor.Int64 {
			return fmt.Errorf("embedding %q: raw ids are Int64, not %v: %w", r.emb.Name(), v.Dtype(), gather.ErrDtype)
		}
		ids = v.Int64s()
	default:
		return fmt.Errorf("embedding %q: raw ids are an Int64 tensor or []int64, not %T: %w", r.emb.Name(), raw, gather.ErrDtype)
	}
	if dst == nil || dst.Shape().TotalSize() != len(ids) {
		return fmt.Errorf("embedding %q: %d raw ids for an ids tensor of shape %v: %w", r.emb.Name(), len(ids), shapeOf(dst), gather.ErrShape)
	}
	switch dst.Dtype() {
	case tensor.Int, tensor.Int32, tensor.Int64:
	default:
		return fmt.Errorf("embedding %q: the ids tensor is %v; lookups read Int, Int32 or Int64: %w", r.emb.Name(), dst.Dtype(), gather.ErrDtype)
	}
	if cap(r.rows) < len(ids) {
		r.rows = make([]int64, len(ids))
	}
	r.rows = r.rows[:len(ids)]
	if err := r.mapInto(ctx, ids, r.rows, step); err != nil {
		return err
	}
	switch v := dst.Data().(type) {
	case []int:
		for k, row := range r.rows {
			v[k] = int(row)
		}
	case []int32:
		for k, row := range r.rows {
			v[k] = int32(row)
		}
	case []int64:
		copy(v, r.rows)
	}
	return nil
}

// mapInto sets rows to the rows the map gives ids at step and starts the
// rows it gave new ids afresh: Map's work, without its checks of the
// arguments. On error the map is as it was and rows unspecified.
func (r *RawIDs) mapInto(ctx context.Context, ids, rows []int64, step int64) error {
	if r.emb.closed {
		return fmt.Errorf("embedding %q: %w", r.emb.Name(), table.ErrClosed)
	}
	var err error
	sm, onStore := r.m.(driver.StoreMapper)
	if onStore {
		r.fresh, r.read, err = sm.MapRead(ctx, ids, rows, step, r.fresh[:0], r.read[:0])
	} else {
		r.fresh, err = r.m.Map(ctx, ids, rows, step, r.fresh[:0])
	}
	if err != nil {
		return fmt.Errorf("embedding %q: %w", r.emb.Name(), err)
	}
	if err := r.startDense(); err != nil {
		return r.forget(ctx, err)
	}
	if onStore {
		// The map started its rows where they live and read them: the
		// cache forgets its copies of those it read.
		err = r.emb.home.cache().Forget(r.read)
	} else {
		err = r.emb.home.reset(ctx, r.fresh, r.init)
	}
	if err != nil {
		return r.forget(ctx, err)
	}
	if c := r.emb.changed; c != nil {
		for _, a := range r.fresh {
			c.mark([]int64{a.Row}, r.emb.padding())
			c.assignedRows, c.assignedIDs = append(c.assignedRows, a.Row), append(c.assignedIDs, a.ID)
		}
	}
	return nil
}

// forget has the map take back the rows the last Map gave, which could
// not be started (err), and returns err, with the map's own error if it
// could not.
func (r *RawIDs) forget(ctx context.Context, err error) error {
	if ferr := r.m.Forget(ctx, r.fresh); ferr != nil {
		return fmt.Errorf("embedding %q: %w (and taking back the rows it gave: %v)", r.emb.Name(), err, ferr)
	}
	return fmt.Errorf("embedding %q: %w", r.emb.Name(), err)
}

// startDense starts the dense optimiser's state of the rows Map gave.
func (r *RawIDs) startDense() error {
	if r.dense == nil || len(r.fresh) == 0 {
		return nil
	}
	rows := make([]int64, len(r.fresh))
	for k, a := range r.fresh {
		rows[k] = a.Row
	}
	return optim.StartRows(r.dense, r.emb.Table.Name(), rows)
}

// Fresh returns the rows the last Map gave new ids, in the order given.
// The slice is reused by the next Map.
func (r *RawIDs) Fresh() []driver.Assignment { return r.fresh }

func shapeOf(t *tensor.Dense) tensor.Shape {
	if t == nil {
		return nil
	}
	return t.Shape()
}

// reset starts the rows of fresh afresh in the heap: values and, once
// the optimiser's state is made, state.
func (h *heap) reset(_ context.Context, fresh []driver.Assignment, init driver.RowInit) error {
	if h.tab == nil {
		return table.InitialRows(h.w, nil, nil, fresh, init)
	}
	return table.InitialRows(h.w, h.tab.State, h.cols, fresh, init)
}

func (m *mapped) reset(ctx context.Context, fresh []driver.Assignment, init driver.RowInit) error {
	return m.file.Guard(func() error { return m.heap.reset(ctx, fresh, init) })
}

func (h *cached) reset(ctx context.Context, fresh []driver.Assignment, init driver.RowInit) error {
	return h.c.Reset(ctx, fresh, init)
}
