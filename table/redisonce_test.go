package table

import (
	"slices"
	"strings"
	"testing"
	"time"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/localredis"
)

// An update the server applied already is not applied again: the same
// step sent twice under the same name (as a retry after a lost answer
// sends it) changes the rows once; the next update applies.
func TestRedisExactlyOnce(t *testing.T) {
	cl := localredis.Start(t, 3, 0)
	o := RedisOptions{Addrs: cl.Addrs, Password: cl.Password, Timeout: 2 * time.Second}
	const vocab, dim = 2100, 4
	if err := CreateRedis(o, "once", vocab, dim, tensor.Float32); err != nil {
		t.Fatal(err)
	}
	s, err := OpenRedis(o, "once", dim, tensor.Float32, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.LoadFunctions(); err != nil {
		t.Fatal(err)
	}
	ids := []int64{0, 1, 1024, 2048, 2099}
	if err := s.WriteRows(ids, make([]byte, len(ids)*dim*4)); err != nil {
		t.Fatal(err)
	}
	grad := make([]float32, len(ids)*dim)
	for i := range grad {
		grad[i] = -1
	}
	read := func() []float32 {
		raw := make([]byte, len(ids)*dim*4)
		if err := s.ReadRows(ids, raw); err != nil {
			t.Fatal(err)
		}
		return fileio.Float32s(raw)
	}
	want := func(v float32) []float32 {
		w := make([]float32, len(ids)*dim)
		for i := range w {
			w[i] = v
		}
		return w
	}
	if err := s.StepSGD(ids, grad, 1, 0); err != nil {
		t.Fatal(err)
	}
	s.updates-- // the same update again
	if err := s.StepSGD(ids, grad, 1, 0); err != nil {
		t.Fatal(err)
	}
	if got := read(); !slices.Equal(got, want(1)) {
		t.Fatalf("one update sent twice: rows %v", got)
	}
	if err := s.StepSGD(ids, grad, 1, 0); err != nil {
		t.Fatal(err)
	}
	if got := read(); !slices.Equal(got, want(2)) {
		t.Fatalf("after the next update: rows %v", got)
	}
	// Another store's updates are its own, numbered from 1 again.
	s2, err := OpenRedis(o, "once", dim, tensor.Float32, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.StepSGD(ids, grad, 1, 0); err != nil {
		t.Fatal(err)
	}
	if got := read(); !slices.Equal(got, want(3)) {
		t.Fatalf("another store's first update: rows %v", got)
	}
	// A call the server refuses (a row of the wrong length) is not
	// retried: the error comes at once, though Retry allows a minute.
	o.Retry = time.Minute
	s3, err := OpenRedis(o, "once", dim, tensor.Float32, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if out, err := cl.CLI(cl.Addrs[0], "-c", "set", s.key(1024), "short"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	start := time.Now()
	err = s3.StepSGD(ids, grad, 1, 0)
	if err == nil || !strings.Contains(err.Error(), s.key(1024)) || time.Since(start) > 5*time.Second {
		t.Fatalf("a short row under Retry: %v after %v", err, time.Since(start))
	}
}
