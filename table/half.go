package table

import (
	"context"
	"fmt"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/rowcache"
	"github.com/gathergrad/gather/internal/tablerows"
)

// valuesKey is the metadata entry of a table file whose values are half
// precision: "F16" or "BF16".
const valuesKey = "gathergrad.values"

// A halfStore is a store of rows of dim half-precision values followed by
// the rest of the row (the optimiser state, float32) shown as rows of dim
// float32 values followed by the same rest: what a Cached table's graph
// and optimisers work on.
type halfStore struct {
	inner rowcache.Store
	f     driver.Format
	dim   int
}

func (s *halfStore) RowBytes() int { return s.inner.RowBytes() + 2*s.dim }
func (s *halfStore) Rows() int64   { return s.inner.Rows() }

func (s *halfStore) ReadRows(ctx context.Context, ids []int64, dst []byte) error {
	in, out := s.inner.RowBytes(), s.RowBytes()
	if len(dst) < len(ids)*out {
		return fmt.Errorf("half store: %d bytes for %d rows of %d: %w", len(dst), len(ids), out, errs.ErrShape)
	}
	buf := make([]byte, len(ids)*in)
	if err := s.inner.ReadRows(ctx, ids, buf); err != nil {
		return err
	}
	for k := range ids {
		src, row := buf[k*in:(k+1)*in], dst[k*out:(k+1)*out]
		kernel.HalfToFloatBytes(halfOf(s.f), row[:4*s.dim], src[:2*s.dim])
		copy(row[4*s.dim:], src[2*s.dim:])
	}
	return nil
}

// WriteRows writes rows whose values the format holds exactly (Cached
// rounds a row's values as it steps it); others are rounded to nearest.
func (s *halfStore) WriteRows(ctx context.Context, ids []int64, src []byte) error {
	in, out := s.inner.RowBytes(), s.RowBytes()
	if len(src) < len(ids)*out {
		return fmt.Errorf("half store: %d bytes for %d rows of %d: %w", len(src), len(ids), out, errs.ErrShape)
	}
	buf := make([]byte, len(ids)*in)
	for k := range ids {
		row, dst := src[k*out:(k+1)*out], buf[k*in:(k+1)*in]
		kernel.FloatBytesToHalf(halfOf(s.f), dst[:2*s.dim], row[:4*s.dim])
		copy(dst[2*s.dim:], row[4*s.dim:])
	}
	return s.inner.WriteRows(ctx, ids, buf)
}

// Sync syncs the store under it, if it syncs (a table file's journal):
// the row cache calls it after writing its dirty rows back.
func (s *halfStore) Sync(ctx context.Context) error {
	if inner, ok := s.inner.(interface{ Sync(context.Context) error }); ok {
		return inner.Sync(ctx)
	}
	return nil
}

// halfRows returns rows (one per row of weights, a [vocab, dim] float32
// tensor) of dim values of f, rounded to nearest, each followed by the
// state cols at their Init, float32.
func halfRows(weights *tensor.Dense, f driver.Format, cols []driver.Column) ([]byte, int, error) {
	vocab, dim := weights.Shape()[0], weights.Shape()[1]
	_, width, err := tablerows.Describe("memory store", dim, cols)
	if err != nil {
		return nil, 0, err
	}
	rb := 2*dim + 4*(width-dim)
	state := make([]float32, width-dim)
	tablerows.InitState(state, cols)
	w := weights.Float32s()
	data := make([]byte, vocab*rb)
	for r := range vocab {
		row := data[r*rb : (r+1)*rb]
		kernel.ToHalf(halfOf(f), row[:2*dim], w[r*dim:(r+1)*dim])
		copy(row[2*dim:], fileio.LittleEndianBytes(state))
	}
	return data, rb, nil
}

// NewHalfMemoryStore returns a Store in memory of the table name: the rows of weights, a
// [vocab, dim] Float32 tensor, held as half-precision values of format f
// (rounded to nearest), each followed by the state cols (float32, each
// its Init): half the memory of a float32 table's values. NewCached with
// NewCached trains it, its steps computed in float32.
func NewHalfMemoryStore(name string, weights *tensor.Dense, f driver.Format, cols ...driver.Column) (driver.Store, error) {
	if weights == nil || len(weights.Shape()) != 2 || weights.Dtype() != tensor.Float32 {
		return nil, fmt.Errorf("memory store: the weights must be a [vocab, dim] float32 tensor: %w", errs.ErrShape)
	}
	if !isHalf(f) {
		return nil, fmt.Errorf("memory store: half format %v: %w", f, errs.ErrOption)
	}
	data, rb, err := halfRows(weights, f, cols)
	if err != nil {
		return nil, err
	}
	vocab, dim := weights.Shape()[0], weights.Shape()[1]
	return &MemoryStore{rowBytes: rb, data: data,
		schema: driver.Schema{Name: name, Rows: int64(vocab), Dim: dim, Dtype: tensor.Float32, Format: f, Columns: cols}}, nil
}

// round rounds the values of the rows in slots, just stepped as step t,
// to the table's half format (its Schema's Format): stochastically with
// CacheOptions.Rounding.Seed unless Rounding.Nearest. It does
// nothing to a table of full precision.
func (c *Cached) round(slots []int64, t int64) {
	if c.half == 0 {
		return
	}
	w := c.weight.Float32s()
	for _, s := range slots {
		id := c.cache.ID(int32(s))
		kernel.RoundRow(halfOf(c.half), w[int(s)*c.dim:int(s+1)*c.dim], !c.nearest, c.seed, t, id)
	}
}

// roundNearest rounds the values of a half table's rows at slots to its
// format, to nearest.
func (c *Cached) roundNearest(slots []int64) {
	if c.half == 0 {
		return
	}
	w := c.weight.Float32s()
	for _, s := range slots {
		kernel.RoundRow(halfOf(c.half), w[int(s)*c.dim:int(s+1)*c.dim], false, 0, 0, 0)
	}
}

// halfBlock returns the rows of b (little-endian float32 rows, each dim
// values and then state) with their values in format f: rowBytes a row.
func halfBlock(f driver.Format, b []byte, rows, dim int, rowBytes int64) []byte {
	in := len(b) / rows
	out := make([]byte, int64(rows)*rowBytes)
	for r := range rows {
		src, dst := b[r*in:(r+1)*in], out[int64(r)*rowBytes:int64(r+1)*rowBytes]
		kernel.FloatBytesToHalf(halfOf(f), dst[:2*dim], src[:4*dim])
		copy(dst[2*dim:], src[4*dim:])
	}
	return out
}

// RoundValues rounds x to the nearest values of format f, ties to even,
// saturating at its largest finite value.
func RoundValues(f driver.Format, x []float32) { kernel.RoundRow(halfOf(f), x, false, 0, 0, 0) }
