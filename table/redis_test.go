package table_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/redistest"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/table"
)

// A table written to a real Redis Cluster (3 masters, 3 replicas, a
// password) holds the rows nn.NewEmbedding draws for its seed, each with
// zero state; rows written back read back; a cache in front of it trains
// as one in front of the same rows in memory, to the bit; a value of the
// wrong length, a table of another layout and a node that is not there are
// errors naming them.
func TestRedisStore(t *testing.T) {
	cl := redistest.Start(t, 3, 1)
	o := table.RedisOptions{Addrs: cl.Addrs[:1], Password: cl.Password, Timeout: 5 * time.Second}
	const vocab, dim = 5000, kDim
	cols := kOpt.Columns(dim)
	if err := table.CreateRedis(o, "words", vocab, dim, tensor.Float32, table.WithSeed(3), table.WithState(cols...)); err != nil {
		t.Fatal(err)
	}
	if err := table.CreateRedis(o, "words", vocab, dim, tensor.Float32); !errors.Is(err, os.ErrExist) {
		t.Fatalf("a second CreateRedis: %v", err)
	}
	s, err := table.OpenRedis(o, "words", dim, tensor.Float32, cols)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Rows() != vocab || s.RowBytes() != 3*dim*4 {
		t.Fatalf("rows %d of %d bytes", s.Rows(), s.RowBytes())
	}
	g := gorgonia.NewGraph()
	mem, err := nn.NewEmbedding(g, "words", vocab, dim, tensor.Float32, nn.WithSeed(3), nn.WithSparse())
	if err != nil {
		t.Fatal(err)
	}
	w, _ := mem.Weight()
	ids := []int64{0, 1, 4095, 4096, 4999}
	buf := make([]byte, len(ids)*s.RowBytes())
	if err := s.ReadRows(ids, buf); err != nil {
		t.Fatal(err)
	}
	for k, id := range ids {
		want := fileio.LittleEndianBytes(w.Float32s()[id*dim : (id+1)*dim])
		row := buf[k*s.RowBytes() : (k+1)*s.RowBytes()]
		if !bytes.Equal(row[:dim*4], want) || !bytes.Equal(row[dim*4:], make([]byte, 2*dim*4)) {
			t.Fatalf("row %d is not NewEmbedding's with zero state", id)
		}
	}

	// Trained behind a cache of 64 rows, as the same rows in memory.
	store, err := table.NewMemoryStore(w, cols...)
	if err != nil {
		t.Fatal(err)
	}
	budget := int64(64 * (s.RowBytes() + 72))
	onRedis, err := table.NewCached(s, "words", dim, tensor.Float32, cols, table.CacheOptions{Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	defer onRedis.Close()
	inMemory, err := table.NewCached(store, "words", dim, tensor.Float32, cols, table.CacheOptions{Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	defer inMemory.Close()
	for n := range 30 {
		if err := kStep(onRedis, n); err != nil {
			t.Fatal(err)
		}
		if err := kStep(inMemory, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := onRedis.Sync(); err != nil {
		t.Fatal(err)
	}
	all := make([]int64, vocab)
	for i := range all {
		all[i] = int64(i)
	}
	a, err := onRedis.Read(all)
	if err != nil {
		t.Fatal(err)
	}
	b, err := inMemory.Read(all)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fileio.LittleEndianBytes(a.Float32s()), fileio.LittleEndianBytes(b.Float32s())) {
		t.Fatal("the table on Redis differs from the one in memory")
	}

	// A value of the wrong length under a row's key.
	key := "gg:words:{7}:7"
	if out, err := cl.CLI(cl.Addrs[0], "-c", "set", key, "short"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	err = s.ReadRows([]int64{7}, buf)
	if !errors.Is(err, checkpoint.ErrMismatch) || !strings.Contains(err.Error(), key) {
		t.Fatalf("a short value: %v", err)
	}
	if _, err := table.OpenRedis(o, "words", dim, tensor.Float32, nil); !errors.Is(err, checkpoint.ErrMismatch) {
		t.Fatalf("another layout: %v", err)
	}
	if _, err := table.OpenRedis(o, "nothing", dim, tensor.Float32, cols); !errors.Is(err, checkpoint.ErrMismatch) || !strings.Contains(err.Error(), "gg:nothing:meta") {
		t.Fatalf("a missing table: %v", err)
	}
	start := time.Now()
	_, err = table.OpenRedis(table.RedisOptions{Addrs: []string{"127.0.0.1:1"}, Password: cl.Password, Timeout: time.Second}, "words", dim, tensor.Float32, cols)
	if err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("no node: %v after %v", err, time.Since(start))
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("the error does not name the node: %v", err)
	}
}
