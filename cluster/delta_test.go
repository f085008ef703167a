package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/localredis"
)

// A delta published reads back as it was put, from another store of the
// table; one not published is ErrNoDelta, one dropped after its keep too;
// a key that holds other bytes, or another delta, is ErrFormat; a
// malformed delta or a keep under a millisecond puts nothing.
func TestRedisDeltas(t *testing.T) {
	cl := localredis.Start(t, 3, 0)
	o := Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 5 * time.Second}
	ctx := context.Background()
	require.NoError(t, Create(ctx, o, "dt", 10, 2, tensor.Float32))
	s, err := Open(ctx, o, "dt")
	require.NoError(t, err)
	defer s.Close()
	r, err := Open(ctx, o, "dt")
	require.NoError(t, err)
	defer r.Close()

	d := &driver.Delta{Table: "dt", Base: 4, Seq: 1, Dim: 2, Time: 99, Rows: []int64{1, 7}, Values: []float32{1, 2, 3, 4},
		AssignedRows: []int64{7}, AssignedIDs: []int64{-5}}
	require.NoError(t, s.PublishDelta(ctx, d, time.Minute))
	got, err := r.ReadDelta(ctx, 4, 1)
	require.NoError(t, err)
	assert.Equal(t, d, got)
	_, err = r.ReadDelta(ctx, 4, 2)
	assert.ErrorIs(t, err, ErrNoDelta)

	short := *d
	short.Seq = 2
	require.NoError(t, s.PublishDelta(ctx, &short, 50*time.Millisecond))
	time.Sleep(200 * time.Millisecond)
	_, err = r.ReadDelta(ctx, 4, 2)
	assert.ErrorIs(t, err, ErrNoDelta, "dropped after its keep")

	require.NoError(t, s.c.Set(ctx, s.deltaKey(4, 3), []byte("not a delta"), time.Minute).Err())
	_, err = r.ReadDelta(ctx, 4, 3)
	assert.ErrorIs(t, err, checkpoint.ErrFormat)
	b, err := checkpoint.EncodeDeltas([]*driver.Delta{d}, nil) // delta 1 under the key of 4
	require.NoError(t, err)
	require.NoError(t, s.c.Set(ctx, s.deltaKey(4, 4), b, time.Minute).Err())
	_, err = r.ReadDelta(ctx, 4, 4)
	assert.ErrorIs(t, err, checkpoint.ErrFormat)

	assert.ErrorIs(t, s.PublishDelta(ctx, &driver.Delta{Table: "dt", Base: 4, Seq: 5, Dim: 2, Rows: []int64{1}}, time.Minute), errs.ErrShape)
	assert.ErrorIs(t, s.PublishDelta(ctx, &driver.Delta{Table: "dt", Base: 4, Seq: 6, Dim: 2}, time.Microsecond), errs.ErrOption)
	for _, seq := range []uint64{5, 6} {
		_, err = r.ReadDelta(ctx, 4, seq)
		assert.ErrorIs(t, err, ErrNoDelta, "delta %d was not put", seq)
	}
}
