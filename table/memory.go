package table

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/tablerows"
)

// A MemoryStore is a Store in memory: a table's rows with their state,
// for a table whose rows fit in memory, or a test. It is safe for
// concurrent use, and it steps its own rows (Step) under its lock, as a
// Redis Cluster steps its rows on its servers: several Shared caches in
// front of one MemoryStore train it as workers train a cluster.Store.
type MemoryStore struct {
	mu       sync.Mutex
	schema   driver.Schema
	rowBytes int
	data     []byte
	steps    atomic.Int64
}

// NewMemoryStore returns a MemoryStore of the table name: the rows of
// weights, a [vocab, dim] Float32 or Float64 tensor (copied), each
// followed by the state cols, each value its column's Init.
func NewMemoryStore(name string, weights *tensor.Dense, cols ...driver.Column) (*MemoryStore, error) {
	if weights == nil || len(weights.Shape()) != 2 {
		return nil, fmt.Errorf("memory store: the weights must be a [vocab, dim] tensor: %w", errs.ErrShape)
	}
	dt := weights.Dtype()
	if err := operand.CheckFloat("memory store", "dtype", dt); err != nil {
		return nil, err
	}
	vocab, dim := weights.Shape()[0], weights.Shape()[1]
	_, width, err := tablerows.Describe("memory store", dim, cols)
	if err != nil {
		return nil, err
	}
	es := int(dt.Size())
	s := &MemoryStore{rowBytes: width * es, data: make([]byte, vocab*width*es),
		schema: driver.Schema{Name: name, Rows: int64(vocab), Dim: dim, Dtype: dt, Format: format(dt, 0), Columns: cols}}
	src := operand.LittleEndianBytes(weights)
	state := make([]byte, s.rowBytes-dim*es)
	if dt == tensor.Float32 {
		v := make([]float32, width-dim)
		tablerows.InitState(v, cols)
		copy(state, fileio.LittleEndianBytes(v))
	} else {
		v := make([]float64, width-dim)
		tablerows.InitState(v, cols)
		copy(state, fileio.LittleEndianBytes(v))
	}
	for r := range vocab {
		copy(s.data[r*s.rowBytes:], src[r*dim*es:(r+1)*dim*es])
		copy(s.data[r*s.rowBytes+dim*es:(r+1)*s.rowBytes], state)
	}
	return s, nil
}

// Schema returns what the store's rows are.
func (s *MemoryStore) Schema() driver.Schema { return s.schema }

func (s *MemoryStore) RowBytes() int { return s.rowBytes }
func (s *MemoryStore) Rows() int64   { return s.schema.Rows }

func (s *MemoryStore) ReadRows(ctx context.Context, ids []int64, dst []byte) error {
	if err := s.check(ctx, ids, dst); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, id := range ids {
		copy(dst[k*s.rowBytes:(k+1)*s.rowBytes], s.data[id*int64(s.rowBytes):])
	}
	return nil
}

func (s *MemoryStore) WriteRows(ctx context.Context, ids []int64, src []byte) error {
	if err := s.check(ctx, ids, src); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, id := range ids {
		copy(s.data[id*int64(s.rowBytes):(id+1)*int64(s.rowBytes)], src[k*s.rowBytes:])
	}
	return nil
}

func (s *MemoryStore) check(ctx context.Context, ids []int64, buf []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(buf) < len(ids)*s.rowBytes {
		return fmt.Errorf("memory store: %d bytes for %d rows of %d: %w", len(buf), len(ids), s.rowBytes, errs.ErrShape)
	}
	return s.checkIDs(ids)
}

// checkIDs reports an error naming the first of ids outside the store.
func (s *MemoryStore) checkIDs(ids []int64) error {
	for k, id := range ids {
		if id < 0 || id >= s.schema.Rows {
			return fmt.Errorf("memory store: ids[%d] = %d is outside [0, %d): %w", k, id, s.schema.Rows, errs.ErrIndexOutOfRange)
		}
	}
	return nil
}

// Step applies r to the rows g names as step Steps()+1, under the
// store's lock: it reads them, steps them by r's Go function and writes
// them back, so that steps of several callers at once lose no update. A
// store of half-precision values (NewHalfMemoryStore) steps none: its
// rows are stepped in a cache (NewCached). On error nothing changed.
func (s *MemoryStore) Step(ctx context.Context, r driver.Rule, g *driver.RowGrad) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	sc := s.schema
	if r == nil {
		return fmt.Errorf("memory store: Step needs a rule: %w", errs.ErrOption)
	}
	if isHalf(sc.Format) {
		return fmt.Errorf("memory store: the rule %q: a store of %v values steps no rule; step its rows in a cache (NewCached): %w", r.Name(), sc.Format, errs.ErrOption)
	}
	if err := driver.CheckColumns(r, sc.Dim, sc.Columns); err != nil {
		return fmt.Errorf("memory store: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.steps.Load() + 1
	if err := r.Check(t, g, sc.Dim); err != nil {
		return err
	}
	if err := s.checkIDs(g.Rows); err != nil {
		return err
	}
	// The rows, gathered into one tensor per column, are slots 0 to n-1.
	n := len(g.Rows)
	es := int(sc.Dtype.Size())
	widths := []int{sc.Dim}
	for _, c := range sc.Columns {
		widths = append(widths, c.Width)
	}
	rows := driver.Rows{Slots: make([]int64, n), Step: t}
	for k := range rows.Slots {
		rows.Slots[k] = int64(k)
	}
	parts := make([]*tensor.Dense, len(widths))
	at := 0
	for c, w := range widths {
		b := make([]byte, n*w*es)
		for k, id := range g.Rows {
			copy(b[k*w*es:(k+1)*w*es], s.data[id*int64(s.rowBytes)+int64(at):])
		}
		parts[c] = tensor.New(tensor.WithShape(n, w), tensor.WithBacking(operand.PickFloat(sc.Dtype, any(fileio.Float32s(b)), any(fileio.Float64s(b)))))
		at += w * es
	}
	rows.Weight, rows.State = parts[0], parts[1:]
	if err := r.StepRows(rows, g); err != nil {
		return err
	}
	at = 0
	for c, w := range widths {
		b := operand.LittleEndianBytes(parts[c])
		for k, id := range g.Rows {
			copy(s.data[id*int64(s.rowBytes)+int64(at):][:w*es], b[k*w*es:(k+1)*w*es])
		}
		at += w * es
	}
	s.steps.Store(t)
	return nil
}

// Steps returns the steps made through the store (Step).
func (s *MemoryStore) Steps() int64 { return s.steps.Load() }

var _ driver.Stepper = (*MemoryStore)(nil)
