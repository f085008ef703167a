package table_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
	"github.com/stretchr/testify/require"
)

// A MemoryStore steps its rows under its lock: workers stepping the same
// rows at once lose no update (a gradient of ones adds exactly 1 to a
// row-wise Adagrad sum each step), the store counts the steps, and a
// rule of other columns, or a half store, steps nothing.
func TestMemoryStoreStep(t *testing.T) {
	const vocab, dim, workers, steps = 50, 4, 4, 25
	opt := optim.NewRowWiseAdagrad(0.01)
	s, err := table.NewMemoryStore("t", tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(vocab, dim)), opt.Columns(dim)...)
	if err != nil {
		t.Fatal(err)
	}
	ids := []int64{3, 7, 49}
	ones := make([]float64, len(ids)*dim)
	for i := range ones {
		ones[i] = 1
	}
	var wg sync.WaitGroup
	fail := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			g := &optim.RowGrad{Rows: ids, Values: tensor.New(tensor.WithShape(len(ids), dim), tensor.WithBacking(ones))}
			for range steps {
				if err := s.Step(context.Background(), opt, g); err != nil {
					fail <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	if s.Steps() != workers*steps {
		t.Fatalf("%d steps counted, want %d", s.Steps(), workers*steps)
	}
	c, err := table.NewCached(context.Background(), s, table.CacheOptions{Budget: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	rows, err := c.Read(context.Background(), []int64{3, 4})
	if err != nil {
		t.Fatal(err)
	}
	if got := rows.Float64s(); got[dim] != workers*steps || got[2*dim+1] != 0 {
		t.Fatalf("rows %v: row 3's sum is not %d, or row 4 moved", got, workers*steps)
	}

	g := &optim.RowGrad{Rows: []int64{1}, Values: tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(1, dim))}
	if err := s.Step(context.Background(), optim.NewSparseAdam(0.1), g); !errors.Is(err, errs.ErrOption) || !strings.Contains(err.Error(), "exp_avg") {
		t.Fatalf("a rule of other columns: %v", err)
	}
	bad := &optim.RowGrad{Rows: []int64{vocab}, Values: tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(1, dim))}
	if err := s.Step(context.Background(), opt, bad); !errors.Is(err, errs.ErrIndexOutOfRange) {
		t.Fatalf("a row outside the store: %v", err)
	}
	if s.Steps() != workers*steps {
		t.Fatal("a refused step was counted")
	}
	h, err := table.NewHalfMemoryStore("h", tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(vocab, dim)), driver.BFloat16)
	if err != nil {
		t.Fatal(err)
	}
	g32 := &optim.RowGrad{Rows: []int64{1}, Values: tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(1, dim))}
	if err := h.(driver.Stepper).Step(context.Background(), &optim.SparseSGD{LearnRate: 1}, g32); !errors.Is(err, errs.ErrOption) || !strings.Contains(err.Error(), "bfloat16") {
		t.Fatalf("a half store: %v", err)
	}
}

// The allocations of a step of a Cached table do not grow with its rows:
// row ids are int64 from the gradient to the cache and its store, never
// converted row by row.
func TestCachedStepAllocs(t *testing.T) {
	const vocab, dim = 1000, 8
	opt := optim.NewSparseAdam(0.01)
	s, err := table.NewMemoryStore("t", tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(vocab, dim)), opt.Columns(dim)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, shared := range []*table.SharedOptions{nil, {}} {
		c, err := table.NewCached(context.Background(), s, table.CacheOptions{Budget: 1 << 20, Shared: shared})
		if err != nil {
			t.Fatal(err)
		}
		allocs := func(n int) float64 {
			ids := make([]int64, n)
			for k := range ids {
				ids[k] = int64(3 * k)
			}
			c.NewBatch()
			if err := c.Fetch(context.Background(), ids, make([]int32, len(ids))); err != nil {
				t.Fatal(err)
			}
			g := &optim.RowGrad{Rows: ids, Values: tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(len(ids), dim))}
			step := func() {
				if err := c.Step(context.Background(), opt, g); err != nil {
					t.Fatal(err)
				}
			}
			step()
			return testing.AllocsPerRun(20, step)
		}
		if few, many := allocs(3), allocs(300); few != many || few > 64 {
			t.Errorf("shared %v: a step of 3 rows allocates %v times, of 300 rows %v", shared, few, many)
		}
		c.Close(context.Background())
	}
}

// ReadValues gives a store's rows' values as floats, without their
// state: float32 and float64 rows as stored, half rows widened; an id
// outside the store is an error.
func TestReadValues(t *testing.T) {
	ctx := context.Background()
	w := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float32{1, 2, 3.5, 4, 5, 6}))
	cols := []driver.Column{{Name: "exp_avg", Width: 2, Init: 9}}
	s32, err := table.NewMemoryStore("a", w.Clone().(*tensor.Dense), cols...)
	if err != nil {
		t.Fatal(err)
	}
	s64, err := table.NewMemoryStore("b", tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{1, 2, 3.5, 4, 5, 6})), cols...)
	if err != nil {
		t.Fatal(err)
	}
	half, err := table.NewHalfMemoryStore("c", w.Clone().(*tensor.Dense), driver.BFloat16, cols...)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []driver.Store{s32, s64, half} {
		v, err := table.ReadValues(ctx, s, []int64{2, 1, 2})
		if err != nil {
			t.Fatal(err)
		}
		want := []float64{5, 6, 3.5, 4, 5, 6}
		if !v.Shape().Eq(tensor.Shape{3, 2}) {
			t.Fatalf("%s: shape %v", s.Schema().Name, v.Shape())
		}
		for i, x := range want {
			if got := v.Data(); fmt.Sprint(reflectIndex(got, i)) != fmt.Sprint(x) {
				t.Fatalf("%s: value %d is %v, want %v (%v)", s.Schema().Name, i, reflectIndex(got, i), x, got)
			}
		}
	}
	if _, err := table.ReadValues(ctx, s32, []int64{3}); !errors.Is(err, errs.ErrIndexOutOfRange) {
		t.Fatalf("id 3 of 3 rows: %v", err)
	}
}

// reflectIndex returns element i of a []float32 or []float64.
func reflectIndex(v any, i int) any {
	switch x := v.(type) {
	case []float32:
		return x[i]
	case []float64:
		return x[i]
	}
	return nil
}

// A Shared cache serves a row it read for MaxAge batches; Forget drops
// its copy, so that the next Fetch reads what the store holds now (the
// rows a map beside the store started there).
func TestCachedForget(t *testing.T) {
	ctx := context.Background()
	w := tensor.New(tensor.WithShape(4, 2), tensor.WithBacking([]float32{0, 0, 1, 1, 2, 2, 3, 3}))
	store, err := table.NewMemoryStore("t", w)
	require.NoError(t, err)
	c, err := table.NewCached(ctx, store, table.CacheOptions{Budget: 1 << 10, Shared: &table.SharedOptions{MaxAge: 100}})
	require.NoError(t, err)
	read := func() []float32 {
		slots := make([]int32, 1)
		c.NewBatch()
		require.NoError(t, c.Fetch(ctx, []int64{1}, slots))
		return append([]float32(nil), c.Weight().Float32s()[2*slots[0]:2*slots[0]+2]...)
	}
	require.Equal(t, []float32{1, 1}, read())
	require.NoError(t, store.WriteRows(ctx, []int64{1}, fileio.LittleEndianBytes([]float32{7, 8})))
	require.Equal(t, []float32{1, 1}, read(), "the cache's copy, MaxAge batches old at most")
	require.NoError(t, c.Forget([]int64{1}))
	require.Equal(t, []float32{7, 8}, read())
	require.NoError(t, c.Close(ctx))
	require.ErrorIs(t, c.Forget([]int64{1}), table.ErrClosed)
}
