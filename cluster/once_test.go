package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/localredis"
	"github.com/gathergrad/gather/table"
)

// testSGD is SGD as a rule: w -= p[1]*g.
const testSGD = "return function(w, g, p, dim, f) for j = 1, dim do w[j] = f(w[j] - f(p[1] * g[j])) end end"

// stepSGD applies testSGD with learning rate 1 to the rows of s.
func stepSGD(s *Store, ids []int64, grad []float32) error {
	return s.applyRule(context.Background(), "test_sgd", testSGD, []float64{1}, ids, len(grad)/len(ids), fileio.LittleEndianBytes(grad), nil)
}

// testRule is testSGD as a driver.Rule: w -= g, registered with the
// Redis store.
type testRule struct{}

func (testRule) Name() string                            { return "test_sgd" }
func (testRule) Columns(int) []driver.Column             { return nil }
func (testRule) Check(int64, *driver.RowGrad, int) error { return nil }
func (testRule) StepRows(r driver.Rows, g *driver.RowGrad) error {
	return fmt.Errorf("testRule steps on a Redis Cluster only: %w", errs.ErrOption)
}

func init() {
	if err := RegisterRule(testRule{}, Encoding{Lua: testSGD, Args: func(driver.Rule, int64) []float64 { return []float64{1} }}); err != nil {
		panic(err)
	}
}

// A second encoding under a registered name is refused, and the first
// stays; so is an encoding with no Lua.
func TestRegisterRedisRuleTwice(t *testing.T) {
	err := RegisterRule(testRule{}, Encoding{Lua: "return nil", Args: func(driver.Rule, int64) []float64 { return nil }})
	if !errors.Is(err, errs.ErrOption) || !strings.Contains(err.Error(), `the rule "`+testRule{}.Name()+`" is registered already`) {
		t.Fatalf("a second registration: %v", err)
	}
	if rr, err := redisEncoding("t", testRule{}); err != nil || rr.Lua != testSGD {
		t.Fatalf("the first encoding was replaced: %v", err)
	}
	if err := RegisterRule(otherRule{}, Encoding{Args: func(driver.Rule, int64) []float64 { return nil }}); !errors.Is(err, errs.ErrOption) {
		t.Fatalf("no Lua: %v", err)
	}
}

type otherRule struct{ testRule }

func (otherRule) Name() string { return "other" }

// An update the server applied already is not applied again: the same
// step sent twice under the same name (as a retry after a lost answer
// sends it) changes the rows once; the next update applies.
func TestRedisExactlyOnce(t *testing.T) {
	cl := localredis.Start(t, 3, 0)
	o := Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 2 * time.Second}
	const vocab, dim = 2100, 4
	if err := Create(context.Background(), o, "once", vocab, dim, tensor.Float32); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), o, "once")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids := []int64{0, 1, 1024, 2048, 2099}
	if err := s.WriteRows(context.Background(), ids, make([]byte, len(ids)*dim*4)); err != nil {
		t.Fatal(err)
	}
	grad := make([]float32, len(ids)*dim)
	for i := range grad {
		grad[i] = -1
	}
	read := func() []float32 {
		raw := make([]byte, len(ids)*dim*4)
		if err := s.ReadRows(context.Background(), ids, raw); err != nil {
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
	if err := stepSGD(s, ids, grad); err != nil {
		t.Fatal(err)
	}
	s.updates-- // the same update again
	if err := stepSGD(s, ids, grad); err != nil {
		t.Fatal(err)
	}
	if got := read(); !slices.Equal(got, want(1)) {
		t.Fatalf("one update sent twice: rows %v", got)
	}
	if err := stepSGD(s, ids, grad); err != nil {
		t.Fatal(err)
	}
	if got := read(); !slices.Equal(got, want(2)) {
		t.Fatalf("after the next update: rows %v", got)
	}
	// Another store's updates are its own, numbered from 1 again.
	s2, err := Open(context.Background(), o, "once")
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := stepSGD(s2, ids, grad); err != nil {
		t.Fatal(err)
	}
	if got := read(); !slices.Equal(got, want(3)) {
		t.Fatalf("another store's first update: rows %v", got)
	}
	// A call the server refuses (a row of the wrong length) is not
	// retried: the error comes at once, though Retry allows a minute.
	o.Retry = time.Minute
	s3, err := Open(context.Background(), o, "once")
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if out, err := cl.CLI(cl.Addrs[0], "-c", "set", s.key(1024), "short"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	start := time.Now()
	err = stepSGD(s3, ids, grad)
	if err == nil || !strings.Contains(err.Error(), s.key(1024)) || time.Since(start) > 5*time.Second {
		t.Fatalf("a short row under Retry: %v after %v", err, time.Since(start))
	}
}

// A rule's first step loads its Function; a store used after Close fails at once with ErrClosed; go-redis's
// messages go to the logger SetLog gives, and nowhere without one.
func TestRedisMisuse(t *testing.T) {
	cl := localredis.Start(t, 3, 0)
	o := Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 2 * time.Second, Retry: time.Minute}
	const vocab, dim = 100, 4
	if err := Create(context.Background(), o, "misuse", vocab, dim, tensor.Float32); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), o, "misuse")
	if err != nil {
		t.Fatal(err)
	}
	ids := []int64{1, 2, 3}
	grad := make([]float32, len(ids)*dim)
	if err := stepSGD(s, ids, grad); err != nil {
		t.Fatalf("the first step of a rule loads its Function: %v", err)
	}
	// A Redis Cluster steps float32 rows only.
	if err := Create(context.Background(), o, "misuse64", vocab, dim, tensor.Float64); err != nil {
		t.Fatal(err)
	}
	s64, err := Open(context.Background(), o, "misuse64")
	if err != nil {
		t.Fatal(err)
	}
	defer s64.Close()
	g64 := &driver.RowGrad{Rows: ids, Values: tensor.New(tensor.WithShape(len(ids), dim), tensor.Of(tensor.Float64))}
	err = s64.Step(context.Background(), testRule{}, g64)
	if !errors.Is(err, errs.ErrDtype) {
		t.Fatalf("a rule on float64 rows: %v", err)
	}

	var buf bytes.Buffer
	SetLog(log.New(&buf, "", 0))
	defer SetLog(nil)
	bad := newStore(Options{Addrs: []string{"127.0.0.1:1"}, Timeout: time.Second}, "none", 16, tensor.Float32)
	bad.c.Ping(context.Background())
	bad.Close()
	if !strings.Contains(buf.String(), "127.0.0.1:1") {
		t.Fatalf("go-redis's messages did not reach the logger SetLog gave: %q", buf.String())
	}
	SetLog(nil)
	buf.Reset()
	bad = newStore(Options{Addrs: []string{"127.0.0.1:1"}, Timeout: time.Second}, "none", 16, tensor.Float32)
	bad.c.Ping(context.Background())
	bad.Close()
	if buf.Len() > 0 {
		t.Fatalf("go-redis's messages reached a logger after SetLog(nil): %q", buf.String())
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for name, call := range map[string]func() error{
		"ReadRows":  func() error { return s.ReadRows(context.Background(), ids, make([]byte, len(ids)*dim*4)) },
		"WriteRows": func() error { return s.WriteRows(context.Background(), ids, make([]byte, len(ids)*dim*4)) },
		"StepSGD":   func() error { return stepSGD(s, ids, grad) },
		"SetClock":  func() error { return s.SetClock(context.Background(), 0, 1, time.Second) },
	} {
		if err := call(); !errors.Is(err, driver.ErrClosed) {
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

// Create takes WithInit's initialiser, as Create does: each row
// holds its values and then zero state.
func TestRedisCreateWithInit(t *testing.T) {
	cl := localredis.Start(t, 3, 0)
	o := Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 2 * time.Second}
	const vocab, dim = 5000, 3
	init := func(dt tensor.Dtype, s ...int) any {
		v := make([]float32, s[0]*s[1])
		for i := range v {
			v[i] = float32(i%7) + 0.5
		}
		return v
	}
	cols := []driver.Column{{Name: "sum", Width: 1}}
	if err := Create(context.Background(), o, "init", vocab, dim, tensor.Float32, table.WithInit(init), table.WithState(cols...)); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), o, "init")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids := []int64{0, 1, 4095, 4096, 4999}
	raw := make([]byte, len(ids)*s.RowBytes())
	if err := s.ReadRows(context.Background(), ids, raw); err != nil {
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
