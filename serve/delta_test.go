package serve_test

import (
	"maps"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gathergrad/gather/table/driver"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/serve"
	"github.com/gathergrad/gather/serve/live"
	"github.com/gathergrad/gather/table"
)

// A delta that does not follow the table's version, or does not fit it,
// is refused, and the table stays as it was.
func TestApplyRefuses(t *testing.T) {
	w := make([]float32, 100*4)
	tb, err := serve.Quantize(w, 4, serve.Int8)
	require.NoError(t, err)
	tb = tb.At(5).Named("t")
	ok := &driver.Delta{Table: "t", Base: 5, Seq: 1, Dim: 4, Rows: []int64{3}, Values: []float32{1, 2, 3, 4}}
	next, err := tb.Apply(ok)
	require.NoError(t, err)
	for name, c := range map[string]struct {
		tb   *serve.Table
		d    *driver.Delta
		want error
	}{
		"a gap":         {next, &driver.Delta{Table: "t", Base: 5, Seq: 3, Dim: 4}, serve.ErrDelta},
		"again":         {next, ok, serve.ErrDelta},
		"another base":  {tb, &driver.Delta{Table: "t", Base: 6, Seq: 1, Dim: 4}, serve.ErrDelta},
		"another table": {tb, &driver.Delta{Table: "users", Base: 5, Seq: 1, Dim: 4}, serve.ErrDelta},
		"no name":       {tb.Named(""), &driver.Delta{Table: "t", Base: 5, Seq: 1, Dim: 4}, serve.ErrDelta},
		"another dim":   {tb, &driver.Delta{Table: "t", Base: 5, Seq: 1, Dim: 3}, errs.ErrShape},
		"a row past":    {tb, &driver.Delta{Table: "t", Base: 5, Seq: 1, Dim: 4, Rows: []int64{100}, Values: make([]float32, 4)}, errs.ErrIndexOutOfRange},
		"not finite":    {tb, &driver.Delta{Table: "t", Base: 5, Seq: 1, Dim: 4, Rows: []int64{0}, Values: []float32{0, float32(math.NaN()), 0, 0}}, errs.ErrNotFinite},
		"malformed":     {tb, &driver.Delta{Table: "t", Base: 5, Seq: 1, Dim: 4, Rows: []int64{2, 1}, Values: make([]float32, 8)}, errs.ErrShape},
	} {
		before := c.tb.Bytes()
		_, err := c.tb.Apply(c.d)
		assert.ErrorIs(t, err, c.want, name)
		assert.Equal(t, before, c.tb.Bytes(), name)
	}
	b, s := next.Version()
	assert.Equal(t, [2]uint64{5, 1}, [2]uint64{b, s})
}

// Requests answered while deltas are applied each read one version: every
// row a lookup reads is whole and of the version the request took. Delta
// k sets every value of rows 0-199 to k; a lookup of those rows reads one
// value throughout. Run with the race detector by .ci/run.
func TestApplyWhileServing(t *testing.T) {
	const rows, dim, deltas = 1000, 8, 200
	tb, err := serve.Quantize(make([]float32, rows*dim), dim, serve.Float32)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "t.safetensors")
	require.NoError(t, tb.Save(path, "t"))
	h, err := live.NewHolder(path, func(path string) (*serve.Table, error) {
		tb, err := serve.Open(path, "t")
		if err != nil {
			return nil, err
		}
		return tb.At(1), nil
	})
	require.NoError(t, err)
	var stop atomic.Bool
	var torn atomic.Int64
	var wg sync.WaitGroup
	ids := make([]int64, 200)
	for i := range ids {
		ids[i] = int64(i)
	}
	for range 4 {
		wg.Go(func() {
			out := make([]float32, len(ids)*dim)
			for !stop.Load() {
				m := h.Current().Model
				if err := m.Lookup(out, ids); err != nil {
					t.Error(err)
					return
				}
				for _, v := range out {
					if v != out[0] {
						torn.Add(1)
						break
					}
				}
			}
		})
	}
	for k := 1; k <= deltas; k++ {
		d := &driver.Delta{Table: "t", Base: 1, Seq: uint64(k), Dim: dim, Rows: ids, Values: make([]float32, len(ids)*dim)}
		for i := range d.Values {
			d.Values[i] = float32(k)
		}
		require.NoError(t, h.Update("v", func(cur *serve.Table) (*serve.Table, error) { return cur.Apply(d) }))
	}
	stop.Store(true)
	wg.Wait()
	assert.Zero(t, torn.Load(), "lookups that read two versions")
	applied, refused := h.Updates()
	assert.Equal(t, [2]int64{deltas, 0}, [2]int64{applied, refused})
	_, s := h.Current().Model.Version()
	assert.Equal(t, uint64(deltas), s)
}

// IDs with deltas applied map every id as a map of the assignments does:
// each row to its last id, an id to its last row, the row's earlier id
// and the id's earlier row to the default; every version stays as it
// was made while later ones are applied.
func TestIDsApply(t *testing.T) {
	for _, rows := range []int{1, 7, 300, 5000} {
		m, err := table.NewIDMap("m", driver.IDMapOptions{Rows: rows})
		require.NoError(t, err)
		x := serve.NewIDs(m)
		type version struct {
			ids   *serve.IDs
			rowOf map[int64]int64
		}
		versions := []version{{x, map[int64]int64{}}}
		r := rand.New(rand.NewPCG(uint64(rows), 2))
		pool := make([]int64, 3*rows+5)
		for k := range pool {
			pool[k] = int64(r.Uint64())
		}
		for seq := uint64(1); seq <= 30; seq++ {
			prev := versions[len(versions)-1]
			rowOf := maps.Clone(prev.rowOf)
			d := &driver.Delta{Table: "m", Base: 1, Seq: seq, Dim: 1}
			for range r.IntN(2 * rows) {
				row, id := r.Int64N(int64(rows)), pool[r.IntN(len(pool))]
				d.AssignedRows, d.AssignedIDs = append(d.AssignedRows, row), append(d.AssignedIDs, id)
				for i, at := range rowOf {
					if at == row {
						delete(rowOf, i)
					}
				}
				rowOf[id] = row
			}
			next, err := prev.ids.Apply(d)
			require.NoError(t, err)
			versions = append(versions, version{next, rowOf})
		}
		for v, ver := range versions {
			got := make([]int64, len(pool))
			require.NoError(t, ver.ids.Rows(got, pool))
			for k, id := range pool {
				want, ok := ver.rowOf[id]
				if !ok {
					want = int64(rows)
				}
				require.Equal(t, want, got[k], "rows %d, version %d, id %d", rows, v, id)
			}
			assert.Equal(t, len(ver.rowOf), ver.ids.Len(), "rows %d, version %d", rows, v)
		}
	}
}
