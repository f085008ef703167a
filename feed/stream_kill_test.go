package feed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/killtest"
)

// streamKillEnv names the directory of a child of TestStreamKill.
const streamKillEnv = "GATHER_STREAM_KILL"

// streamKillEntries is the stream TestStreamKill trains on.
const streamKillEntries = 20000

// A worker training from a Redis Stream, killed (SIGKILL) at 20 random
// moments, every third between a checkpoint and its Ack, and restarted
// each time from its last checkpoint, trains every entry once: its final
// model equals, bit for bit, the model of an uninterrupted run over the
// same entries (another group's), and its log of the entries trained
// holds each entry once.
func TestStreamKill(t *testing.T) {
	if dir := os.Getenv(streamKillEnv); dir != "" {
		trainStream(t, dir, true)
		return
	}
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	c := startRedis(t)
	ctx := context.Background()
	p := c.Pipeline()
	for k := range streamKillEntries {
		p.XAdd(ctx, &redis.XAddArgs{Stream: "{clicks}", Values: []any{"label", k % 3 / 2, "x", k % 17, "c", fmt.Sprintf("%d|%d", k%101, k%7)}})
		if k%1000 == 999 {
			if _, err := p.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	addr := c.Options().Addr + " " + c.Options().Password
	// The uninterrupted run: every entry through a group of its own.
	o := streamKillOptions()
	o.Group = "reference"
	ref, err := OpenStream(ctx, c, streamSchema, o)
	if err != nil {
		t.Fatal(err)
	}
	want := &streamModel{w: make([]float64, 8)}
	for n := 0; n < streamKillEntries; {
		b, err := ref.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want.train(b)
		n += b.Real
		if err := ref.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}

	kept := t.TempDir() // the checkpoint and the log, from kill to kill
	files := []string{"ckpt.safetensors", "trained.log"}
	byState := map[string]int{}
	killtest.Run(t, killtest.Config{Test: "TestStreamKill", Env: streamKillEnv, Kills: 20, Seed: 5, Window: "acking"},
		func(dir string) {
			if err := os.WriteFile(filepath.Join(dir, "redis"), []byte(addr), 0o644); err != nil {
				t.Fatal(err)
			}
			copyFiles(t, files, kept, dir)
		},
		func(k killtest.Kill) {
			byState[k.State]++
			copyFiles(t, files, k.Dir, kept)
		})
	if err := os.WriteFile(filepath.Join(kept, "redis"), []byte(addr), 0o644); err != nil {
		t.Fatal(err)
	}
	got, ids := trainStream(t, kept, false)
	seen := map[string]int{}
	for _, id := range ids {
		seen[id]++
	}
	dups, lost := 0, 0
	for _, n := range seen {
		if n > 1 {
			dups += n - 1
		}
	}
	lost = streamKillEntries - len(seen)
	t.Logf("kills by the child's last marker: %v; %d entries trained, %d duplicates, %d lost", byState, len(ids), dups, lost)
	if dups != 0 || lost != 0 {
		t.Fatalf("%d entries trained twice and %d never", dups, lost)
	}
	for i := range want.w {
		if math.Float64bits(got.w[i]) != math.Float64bits(want.w[i]) {
			t.Fatalf("the model after the kills %v, the uninterrupted run's %v", got.w, want.w)
		}
	}
	pending, err := c.XPending(ctx, "{clicks}", "trainers").Result()
	if err != nil {
		t.Fatal(err)
	}
	if pending.Count != 0 {
		t.Fatalf("%d entries left unacknowledged", pending.Count)
	}
}

func streamKillOptions() StreamOptions {
	o := streamOptions("w1")
	o.Batch = 16
	return o
}

// A streamModel is a model whose value depends on every example it
// trains and on their order: a checkpoint.Part.
type streamModel struct{ w []float64 }

func (m *streamModel) train(b *Batch) {
	off := 0
	for i := range b.Real {
		n := int(b.Sparse.Lengths[i])
		var ids int64
		for _, id := range b.Sparse.Values[off : off+n] {
			ids += id
		}
		off += n
		j := int(ids % int64(len(m.w)))
		m.w[j] = m.w[j]*0.75 + float64(b.Labels[i]) + float64(b.Dense[i])*1e-3 + float64(ids)*1e-6
	}
}

func (m *streamModel) State() (map[string]tensor.Tensor, error) {
	return map[string]tensor.Tensor{"model.w": tensor.New(tensor.WithShape(len(m.w)), tensor.WithBacking(m.w))}, nil
}

func (m *streamModel) SetState(ts map[string]*tensor.Dense) error {
	copy(m.w, ts["model.w"].Float64s())
	return nil
}

// trainStream trains a streamModel from the stream of dir's Redis from
// dir's checkpoint (the model, the stream's state and the length of the
// log of entries trained), saving after each batch and acknowledging
// after the save, until every entry is trained; then, as a child, it
// waits to be killed, else it returns the model and the entries logged.
func trainStream(t *testing.T, dir string, child bool) (*streamModel, []string) {
	return trainWorker(t, dir, "w1", child, streamKillEntries)
}

// trainWorker is trainStream for consumer, until it has trained total
// entries or, with total 0, until the group has no entry left to deliver
// and consumer holds none (a child never stops).
func trainWorker(t *testing.T, dir, consumer string, child bool, total int) (*streamModel, []string) {
	b, err := os.ReadFile(filepath.Join(dir, "redis"))
	if err != nil {
		t.Fatal(err)
	}
	addr, password, _ := strings.Cut(string(b), " ")
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password})
	defer c.Close()
	ctx := context.Background()
	o := streamKillOptions()
	o.Consumer = consumer
	s, err := OpenStream(ctx, c, streamSchema, o)
	if err != nil {
		t.Fatal(err)
	}
	m := &streamModel{w: make([]float64, 8)}
	ckpt, logPath := filepath.Join(dir, "ckpt.safetensors"), filepath.Join(dir, "trained.log")
	log, logged, done := resumeLog(t, dir, m, s)
	defer log.Close()
	for step := 0; total == 0 || done < total; step++ {
		next, cancel := ctx, context.CancelFunc(func() {})
		if total == 0 { // a wait for entries that may never come
			next, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
		}
		b, err := s.Next(next)
		cancel()
		if total == 0 && errors.Is(err, context.DeadlineExceeded) {
			if child || !drained(t, c, s, consumer) {
				continue
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		m.train(b)
		n, err := log.WriteString(strings.Join(s.IDs(), "\n") + "\n")
		if err != nil {
			t.Fatal(err)
		}
		logged += int64(n)
		done += b.Real
		if child {
			killtest.Mark(dir, "saving", step)
		}
		if err := checkpoint.Save(ckpt, map[string]string{"logged": strconv.FormatInt(logged, 10)}, m, s); err != nil {
			t.Fatal(err)
		}
		if child {
			killtest.Mark(dir, "acking", step)
		}
		if err := s.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		if child {
			killtest.Mark(dir, "acked", step)
		}
	}
	if child {
		killtest.Mark(dir, "done", 0)
		select {} // until killed
	}
	text, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	return m, strings.Fields(string(text))
}

// drained reports whether s's group has no entry left to deliver and
// consumer holds none unacknowledged.
func drained(t *testing.T, c *redis.Client, s *Stream, consumer string) bool {
	ctx := context.Background()
	lag, _, err := s.Lag(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.XPending(ctx, s.o.Stream, s.o.Group).Result()
	if err != nil {
		t.Fatal(err)
	}
	return lag == 0 && p.Consumers[consumer] == 0
}

// copyFiles copies the files of from named in names, those that exist,
// into to.
func copyFiles(t *testing.T, names []string, from, to string) {
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(from, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
