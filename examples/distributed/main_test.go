package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/cluster"
	"github.com/gathergrad/gather/internal/localredis"
	"github.com/gathergrad/gather/serve"
)

// The workers are this test binary, run again with the command's flags.
func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Two worker processes on a real cluster train the click model to a
// held-out loss within 3% of one process in memory on the same 10,240
// examples, both below the loss of guessing the base rate.
func TestWorkersMatchMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	cl := localredis.Start(t, 3, 0)
	c := config{workers: 2, examples: 10_240, heldOut: 5_000, batch: 256, staleness: 2, maxAge: 1, lr: 0.01, seed: 3, name: "test", cacheMB: 16,
		redis: cluster.Options{Addrs: cl.Addrs, Password: cl.Password, Timeout: 10 * time.Second, Retry: time.Minute}}
	var d, s float64
	var err error
	out := stdout(t, func() { d, s, err = run(c) })
	if err != nil {
		t.Fatal(err)
	}
	// Each worker's three tables take one round trip to each master a
	// step, together (nn.Collection on cluster.Store.StepTables).
	if n := strings.Count(out, "the 3 tables' step: 1.00 round trips per master (3 masters"); n != c.workers {
		t.Fatalf("%d of %d workers report one round trip per master a step:\n%s", n, c.workers, out)
	}
	held := examples(c.seed, 2, c.heldOut)
	p := 0.0
	for _, y := range held.labels {
		p += float64(y)
	}
	p /= float64(held.len())
	base := -(p*math.Log(p) + (1-p)*math.Log(1-p))
	if math.Abs(d-s) > 0.03*s || d >= base || s >= base {
		t.Fatalf("held-out loss: workers %.4f, one process %.4f, the base rate's %.4f", d, s, base)
	}
}

// The model trained in memory with float16 tables (stochastic rounding)
// reaches a held-out loss within 1% of float32 tables'; the gap with
// rounding to nearest and with bfloat16 is logged.
func TestHalfTablesQuality(t *testing.T) {
	c := config{workers: 0, examples: 51_200, heldOut: 5_000, batch: 256, lr: 0.01, seed: 3, name: "half"}
	train, held := examples(c.seed, 1, c.examples), examples(c.seed, 2, c.heldOut)
	loss := func(half driver.Format, nearest bool) float64 {
		c.half, c.nearest = half, nearest
		w, err := trainInMemory(c, train)
		if err != nil {
			t.Fatal(err)
		}
		return w.heldOutLoss(held)
	}
	full := loss(0, false)
	f16 := loss(driver.Float16, false)
	if f16 == full {
		t.Fatal("float16 tables trained to float32's loss exactly: were they half?")
	}
	if math.Abs(f16-full) > 0.01*full {
		t.Fatalf("held-out loss: float16 tables %.5f, float32 %.5f: more than 1%% apart", f16, full)
	}
	t.Logf("held-out loss: float32 %.5f, float16 %.5f (%+.3f%%), float16 to nearest %+.3f%%, bfloat16 %+.3f%%",
		full, f16, 100*(f16-full)/full, 100*(loss(driver.Float16, true)-full)/full, 100*(loss(driver.BFloat16, false)-full)/full)
}

// -save-every writes the model as it trains: after 20 steps with a save
// every 7, the file holds the model of step 14, whole, not the final one.
func TestSaveEvery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "click.safetensors")
	c := config{examples: 20 * 64, heldOut: 10, batch: 64, lr: 0.01, seed: 3, name: "every", save: path, saveEvery: 7}
	w, err := trainInMemory(c, examples(c.seed, 1, c.examples))
	if err != nil {
		t.Fatal(err)
	}
	ts, _, err := checkpoint.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 3+len(denseNames) {
		t.Fatalf("%d tensors saved", len(ts))
	}
	c.examples, c.saveEvery, c.save = 14*64, 0, ""
	w14, err := trainInMemory(c, examples(c.seed, 1, 20*64).slice(seq(14*64)))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ts["feature0.weight"].Float32s(), w14.tables[0]) || !slices.Equal(ts["top2.weight"].Float32s(), w14.dense[4]) {
		t.Fatal("the file is not the model of step 14")
	}
	if slices.Equal(ts["feature0.weight"].Float32s(), w.tables[0]) {
		t.Fatal("the file is the final model")
	}
}

// stdout returns what f prints to os.Stdout, which it also logs.
func stdout(t *testing.T, f func()) string {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	var b strings.Builder
	done := make(chan struct{})
	go func() {
		io.Copy(&b, r)
		close(done)
	}()
	f()
	os.Stdout = saved
	w.Close()
	<-done
	t.Log(b.String())
	return b.String()
}

// seq returns 0, 1, ..., n-1.
func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// -deltas publishes what training changed: the model file it saved
// first, with every delta applied in order (serve.Table.Apply), is the
// model training ended with, table for table, bit for bit.
func TestDeltasFollowTraining(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "click.safetensors")
	c := config{examples: 20 * 64, heldOut: 10, batch: 64, lr: 0.01, seed: 3, name: "deltas", save: path,
		deltas: filepath.Join(dir, "deltas"), deltaEvery: 5}
	w, err := trainInMemory(c, examples(c.seed, 1, c.examples))
	if err != nil {
		t.Fatal(err)
	}
	ts, meta, err := checkpoint.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	base, err := strconv.ParseUint(meta["base"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	for f := range 3 {
		tb, err := serve.Quantize(ts[fmt.Sprintf("feature%d.weight", f)].Float32s(), embDim, serve.Float32)
		if err != nil {
			t.Fatal(err)
		}
		tb = tb.At(base).Named(fmt.Sprintf("feature%d.weight", f))
		for seq := uint64(1); seq <= 4; seq++ {
			ds, _, err := checkpoint.ReadDeltas(deltaPath(c.deltas, base, seq))
			if err != nil {
				t.Fatal(err)
			}
			if tb, err = tb.Apply(ds[f]); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]float32, vocab[f]*embDim)
		if err := tb.Lookup(got, seq64(vocab[f])); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, w.tables[f]) {
			t.Fatalf("table %d: the base file with 4 deltas is not the trained table", f)
		}
	}
	_, dense, err := checkpoint.ReadDeltas(deltaPath(c.deltas, base, 4))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dense["top2.weight"].Float32s(), w.dense[4]) {
		t.Fatal("the last delta's dense layers are not the trained ones")
	}
}

// seq64 returns 0, 1, ..., n-1.
func seq64(n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = int64(i)
	}
	return s
}

// -deltas run as a user runs it (the command's served step included),
// with steps that -delta-every does not divide: the file left at -save is
// the base the deltas follow, and the base with every delta applied is
// the model trained, bit for bit.
func TestDeltasRunAlone(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "click.safetensors")
	c := config{examples: 22 * 64, heldOut: 10, batch: 64, lr: 0.01, seed: 4, name: "alone", save: path,
		deltas: filepath.Join(dir, "deltas"), deltaEvery: 5}
	w, err := trainInMemory(c, examples(c.seed, 1, c.examples))
	if err != nil {
		t.Fatal(err)
	}
	if err := served(c, w, examples(c.seed, 2, c.heldOut)); err != nil {
		t.Fatal(err)
	}
	ts, meta, err := checkpoint.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	base, err := strconv.ParseUint(meta["base"], 10, 64)
	if err != nil {
		t.Fatalf("the file left at -save has no base: %v (%v)", meta, err)
	}
	for f := range 3 {
		tb, err := serve.Quantize(ts[fmt.Sprintf("feature%d.weight", f)].Float32s(), embDim, serve.Float32)
		if err != nil {
			t.Fatal(err)
		}
		tb = tb.At(base).Named(fmt.Sprintf("feature%d.weight", f))
		applied := 0
		for seq := uint64(1); ; seq++ {
			ds, _, err := checkpoint.ReadDeltas(deltaPath(c.deltas, base, seq))
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if tb, err = tb.Apply(ds[f]); err != nil {
				t.Fatal(err)
			}
			applied++
		}
		if applied != 5 {
			t.Fatalf("table %d: %d deltas after the base, want 5 (22 steps, one every 5 and the last 2)", f, applied)
		}
		got := make([]float32, vocab[f]*embDim)
		if err := tb.Lookup(got, seq64(vocab[f])); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, w.tables[f]) {
			t.Fatalf("table %d: the base file with its deltas is not the trained table", f)
		}
	}
}
