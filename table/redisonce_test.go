package table

import (
	"bytes"
	"context"
	"errors"
	"log"
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

// Misuse of a store says what to do: a Step before LoadFunctions names
// it; a store used after Close fails at once with ErrClosed; go-redis's
// messages go to the logger SetRedisLog gives, and nowhere without one.
func TestRedisMisuse(t *testing.T) {
	cl := localredis.Start(t, 3, 0)
	o := RedisOptions{Addrs: cl.Addrs, Password: cl.Password, Timeout: 2 * time.Second, Retry: time.Minute}
	const vocab, dim = 100, 4
	if err := CreateRedis(o, "misuse", vocab, dim, tensor.Float32); err != nil {
		t.Fatal(err)
	}
	s, err := OpenRedis(o, "misuse", dim, tensor.Float32, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := []int64{1, 2, 3}
	grad := make([]float32, len(ids)*dim)
	if err := s.StepSGD(ids, grad, 1, 0); err == nil || !strings.Contains(err.Error(), "LoadFunctions") {
		t.Fatalf("a step before LoadFunctions: %v", err)
	}

	var buf bytes.Buffer
	SetRedisLog(log.New(&buf, "", 0))
	defer SetRedisLog(nil)
	bad := newStore(RedisOptions{Addrs: []string{"127.0.0.1:1"}, Timeout: time.Second}, "none", 16, tensor.Float32)
	bad.c.Ping(context.Background())
	bad.Close()
	if !strings.Contains(buf.String(), "127.0.0.1:1") {
		t.Fatalf("go-redis's messages did not reach the logger SetRedisLog gave: %q", buf.String())
	}
	SetRedisLog(nil)
	buf.Reset()
	bad = newStore(RedisOptions{Addrs: []string{"127.0.0.1:1"}, Timeout: time.Second}, "none", 16, tensor.Float32)
	bad.c.Ping(context.Background())
	bad.Close()
	if buf.Len() > 0 {
		t.Fatalf("go-redis's messages reached a logger after SetRedisLog(nil): %q", buf.String())
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for name, call := range map[string]func() error{
		"ReadRows":  func() error { return s.ReadRows(ids, make([]byte, len(ids)*dim*4)) },
		"WriteRows": func() error { return s.WriteRows(ids, make([]byte, len(ids)*dim*4)) },
		"StepSGD":   func() error { return s.StepSGD(ids, grad, 1, 0) },
		"SetClock":  func() error { return s.SetClock(0, 1, time.Second) },
	} {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Fatalf("%s after Close: %v", name, err)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("calls after Close took %v", d)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// CreateRedis takes WithInit's initialiser, as Create does: each row
// holds its values and then zero state.
func TestRedisCreateWithInit(t *testing.T) {
	cl := localredis.Start(t, 3, 0)
	o := RedisOptions{Addrs: cl.Addrs, Password: cl.Password, Timeout: 2 * time.Second}
	const vocab, dim = 5000, 3
	init := func(dt tensor.Dtype, s ...int) any {
		v := make([]float32, s[0]*s[1])
		for i := range v {
			v[i] = float32(i%7) + 0.5
		}
		return v
	}
	cols := []Column{{Name: "sum", Width: 1}}
	if err := CreateRedis(o, "init", vocab, dim, tensor.Float32, WithInit(init), WithState(cols...)); err != nil {
		t.Fatal(err)
	}
	s, err := OpenRedis(o, "init", dim, tensor.Float32, cols)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids := []int64{0, 1, 4095, 4096, 4999}
	raw := make([]byte, len(ids)*s.RowBytes())
	if err := s.ReadRows(ids, raw); err != nil {
		t.Fatal(err)
	}
	got := fileio.Float32s(raw)
	for k, id := range ids {
		r := id % 4096 // the initialiser is called per block of 4,096 rows
		for j := range dim {
			if want := float32((int(r)*dim+j)%7) + 0.5; got[k*(dim+1)+j] != want {
				t.Fatalf("row %d value %d is %v, want %v", id, j, got[k*(dim+1)+j], want)
			}
		}
		if got[k*(dim+1)+dim] != 0 {
			t.Fatalf("row %d's state is %v", id, got[k*(dim+1)+dim])
		}
	}
}
