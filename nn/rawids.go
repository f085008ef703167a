package nn

import (
	"context"
	"fmt"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// RawIDs feeds an Embedding raw 64-bit ids (user ids, item ids, hashed
// feature crosses: any int64, negative included) through a table.IDMap,
// which gives each id a row of the table as it comes and takes rows
// back as ids fade (TorchRec's managed collision tables, TFRA's dynamic
// embeddings):
//
//	m, _ := table.NewIDMap("item", table.IDMapOptions{Rows: 1 << 20, AdmitAfter: 2})
//	emb, _ := nn.NewEmbedding(g, "item", m.Rows()+1, 16, tensor.Float32, nn.WithSparse(), nn.WithPadding(m.Rows()))
//	raw, _ := nn.NewRawIDs(emb, m, table.RowInit{Seed: 1, Std: 0.05})
//	for step, batch := range batches {
//		raw.Map(batch, ids, int64(step)) // ids: the tensor the lookup's node holds
//		vm.RunAll()
//		emb.Step(adam)
//		vm.Reset()
//	}
//
// The table has one row more than the map hands out: its padding row,
// which ids not yet admitted read (zeros) and whose gradient is dropped.
// A row given to an id starts afresh, in values (table.RowInit's: random
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
// work alike. Keep the map with the table: table.IDMap is a
// checkpoint.Part. A Shared table on a Redis Cluster takes its map from
// the cluster instead (NewSharedRawIDs).
type RawIDs struct {
	emb   *Embedding
	m     *table.IDMap
	rm    *table.RedisIDMap // NewSharedRawIDs's map, instead of m
	init  table.RowInit
	dense optim.Dense // a dense table's optimiser, whose state by row Map starts afresh
	rows  []int64
	fresh []table.Assignment
}

// A RawOption configures NewRawIDs.
type RawOption func(*RawIDs)

// WithDenseOptimizer names the dense optimiser that steps a dense
// table's weight: Map starts the state it keeps for each row given to a
// new id at zeros (optim.StartRows), as a new learnable's.
func WithDenseOptimizer(opt optim.Dense) RawOption { return func(r *RawIDs) { r.dense = opt } }

// NewRawIDs returns the raw ids of emb, a table of m.Rows()+1 rows whose
// padding row is m.Rows(), mapped by m, new rows started by init. (A
// table file may have more rows: those table.Cached.KeepIDMap keeps the
// map in.) A smaller table or another padding row is an error wrapping
// gather.ErrOption, as is a dense table (trained, not WithSparse)
// without WithDenseOptimizer: its optimiser's state of a row could not
// be started afresh.
func NewRawIDs(emb *Embedding, m *table.IDMap, init table.RowInit, opts ...RawOption) (*RawIDs, error) {
	if emb == nil || m == nil {
		return nil, fmt.Errorf("embedding: NewRawIDs needs an embedding and an id map: %w", gather.ErrOption)
	}
	if emb.home.vocab() < m.Rows()+1 || emb.padding() != m.Rows() {
		return nil, fmt.Errorf("embedding %q: raw ids through the map %q of %d rows need a table of at least %d rows with padding row %d (nn.WithPadding), not %d rows with padding %d: %w",
			emb.Name(), m.Name(), m.Rows(), m.Rows()+1, m.Rows(), emb.home.vocab(), emb.padding(), gather.ErrOption)
	}
	if err := init.Check(); err != nil {
		return nil, fmt.Errorf("embedding %q: %w", emb.Name(), err)
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

// NewSharedRawIDs returns the raw ids of emb, a Shared cached table
// (CachedEmbedding of a table.NewCached with CacheOptions.Shared) of the
// RedisStore of m, whose padding row is m.Rows(): a map that lives on the
// Redis Cluster beside the rows, shared by every worker that trains the
// table (table.RedisIDMap). Map then maps each batch on the servers and
// reads its rows in the same calls, and the step sends each row's raw
// id, so that the step's round trips are those of numbered ids: one to
// read, one to step. Rows start as m's RowInit says. Another table is an
// error wrapping gather.ErrOption.
func NewSharedRawIDs(emb *Embedding, m *table.RedisIDMap) (*RawIDs, error) {
	if emb == nil || m == nil {
		return nil, fmt.Errorf("embedding: NewSharedRawIDs needs an embedding and an id map: %w", gather.ErrOption)
	}
	h, ok := emb.home.(*cached)
	if !ok {
		return nil, fmt.Errorf("embedding %q: a map on a Redis Cluster needs a Shared cached table: %w", emb.Name(), gather.ErrOption)
	}
	if err := m.CheckCache(h.c); err != nil {
		return nil, fmt.Errorf("embedding %q: %w", emb.Name(), err)
	}
	if emb.padding() != m.Rows() {
		return nil, fmt.Errorf("embedding %q: raw ids through the map %q of %d rows need padding row %d (nn.WithPadding), not %d: %w",
			emb.Name(), m.Name(), m.Rows(), m.Rows(), emb.padding(), gather.ErrOption)
	}
	return &RawIDs{emb: emb, rm: m}, nil
}

// Map sets dst, the ids tensor of a lookup or bag of the embedding (Int,
// Int32 or Int64, as many elements as raw), to the rows the map gives
// raw (an Int64 tensor, or []int64) at step, and starts the rows it gave
// new ids afresh. A step that looks the table up several times maps each
// lookup's ids with the same step; steps must not decrease. An error of
// the ids or the map (a dst of another size, the map's ErrCapacity)
// changes nothing: not the map, the table or dst. When a cached table's
// store fails to give the new rows (its fetch's error), the map forgets
// the ids it had just given rows (table.IDMap.Forget), so that they get
// rows, started afresh, at a later Map; dst is unchanged. With a map on
// a Redis Cluster (NewSharedRawIDs), an error wrapping
// table.ErrUnknownOutcome may leave the map changed in part: the same
// Map again applies the rest, exactly once.
func (r *RawIDs) Map(raw any, dst *tensor.Dense, step int64) error {
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
	if r.emb.closed {
		return fmt.Errorf("embedding %q: %w", r.emb.Name(), table.ErrClosed)
	}
	if cap(r.rows) < len(ids) {
		r.rows = make([]int64, len(ids))
	}
	r.rows = r.rows[:len(ids)]
	var err error
	if r.rm != nil {
		if r.fresh, err = r.rm.Map(r.emb.context(), ids, r.rows, step); err != nil {
			return fmt.Errorf("embedding %q: %w", r.emb.Name(), err)
		}
		if err := r.emb.home.reset(r.emb.context(), r.fresh, r.init); err != nil {
			return fmt.Errorf("embedding %q: %w", r.emb.Name(), err)
		}
	} else {
		if r.fresh, err = r.m.Map(ids, r.rows, step, r.fresh[:0]); err != nil {
			return fmt.Errorf("embedding %q: %w", r.emb.Name(), err)
		}
		if err := r.startDense(); err != nil {
			r.m.Forget(r.fresh)
			return fmt.Errorf("embedding %q: %w", r.emb.Name(), err)
		}
		if err := r.emb.home.reset(r.emb.context(), r.fresh, r.init); err != nil {
			r.m.Forget(r.fresh)
			return fmt.Errorf("embedding %q: %w", r.emb.Name(), err)
		}
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
func (r *RawIDs) Fresh() []table.Assignment { return r.fresh }

func shapeOf(t *tensor.Dense) tensor.Shape {
	if t == nil {
		return nil
	}
	return t.Shape()
}

// reset starts the rows of fresh afresh in the heap: values and, once
// the optimiser's state is made, state.
func (h *heap) reset(_ context.Context, fresh []table.Assignment, init table.RowInit) error {
	if h.tab == nil {
		return table.InitialRows(h.w, nil, nil, fresh, init)
	}
	return table.InitialRows(h.w, h.tab.State, h.cols, fresh, init)
}

func (m *mapped) reset(ctx context.Context, fresh []table.Assignment, init table.RowInit) error {
	return m.file.Guard(func() error { return m.heap.reset(ctx, fresh, init) })
}

func (h *cached) reset(ctx context.Context, fresh []table.Assignment, init table.RowInit) error {
	return h.c.Reset(ctx, fresh, init)
}
