package feed

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gathergrad/gather/internal/killtest"
)

// twoKillEnv names the directory of a child of TestStreamKillTwoWorkers;
// the file "consumer" in it names the child's consumer.
const twoKillEnv = "GATHER_STREAM_KILL_TWO"

// twoKillEntries is the stream TestStreamKillTwoWorkers trains on: more
// than both workers train between the kills, so that neither child runs
// out of entries while it is killed.
const twoKillEntries = 40000

// Two workers of one group train from one stream at once, each with its
// own checkpoint and log, each killed (SIGKILL) at random moments and
// restarted from its checkpoint: w1 20 times (every third between a
// checkpoint and its Ack), w2 while w1's kills go on. Then both run to the
// end. Every entry is trained exactly once, counted by entry id over both
// logs, and each worker's model equals, bit for bit, a run over the
// entries of its log in their order.
func TestStreamKillTwoWorkers(t *testing.T) {
	if dir := os.Getenv(twoKillEnv); dir != "" {
		consumer, err := os.ReadFile(filepath.Join(dir, "consumer"))
		if err != nil {
			t.Fatal(err)
		}
		trainWorker(t, dir, string(consumer), true, 0)
		return
	}
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	c := startRedis(t)
	ctx := context.Background()
	p := c.Pipeline()
	for k := range twoKillEntries {
		p.XAdd(ctx, &redis.XAddArgs{Stream: "{clicks}", Values: []any{"label", k % 3 / 2, "x", k % 17, "c", fmt.Sprintf("%d|%d", k%101, k%7)}})
		if k%1000 == 999 {
			if _, err := p.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	addr := c.Options().Addr + " " + c.Options().Password
	setup := func(dir, consumer string) {
		for name, v := range map[string]string{"redis": addr, "consumer": consumer} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	kept := [2]string{t.TempDir(), t.TempDir()} // each worker's checkpoint and log, from kill to kill
	setup(kept[0], "w1")
	setup(kept[1], "w2")

	// w2 lives in kept[1] itself: started, killed 50 to 400 ms later and
	// started again until w1's kills end.
	stop, w2 := make(chan struct{}), make(chan error, 1)
	go func() {
		r := rand.New(rand.NewPCG(7, 8))
		kills := 0
		for {
			select {
			case <-stop:
				if kills < 5 {
					w2 <- fmt.Errorf("w2 killed %d times, fewer than 5", kills)
					return
				}
				t.Logf("w2 killed %d times", kills)
				w2 <- nil
				return
			default:
			}
			cmd := exec.Command(os.Args[0], "-test.run", "^TestStreamKillTwoWorkers$", "-test.count", "1")
			cmd.Env = append(os.Environ(), twoKillEnv+"="+kept[1])
			if err := cmd.Start(); err != nil {
				w2 <- err
				return
			}
			time.Sleep(time.Duration(50+r.IntN(350)) * time.Millisecond)
			cmd.Process.Kill()
			if err := cmd.Wait(); err != nil && cmd.ProcessState.ExitCode() != -1 {
				w2 <- fmt.Errorf("w2 ended on its own: %v", err)
				return
			}
			kills++
		}
	}()
	files := []string{"ckpt.safetensors", "trained.log"}
	killtest.Run(t, killtest.Config{Test: "TestStreamKillTwoWorkers", Env: twoKillEnv, Kills: 20, Seed: 9, Window: "acking"},
		func(dir string) {
			setup(dir, "w1")
			copyFiles(t, files, kept[0], dir)
		},
		func(k killtest.Kill) { copyFiles(t, files, k.Dir, kept[0]) })
	close(stop)
	if err := <-w2; err != nil {
		t.Fatal(err)
	}

	// The end: each worker trains its pending entries and what is left.
	seen := map[string]int{}
	for k, consumer := range []string{"w1", "w2"} {
		got, ids := trainWorker(t, kept[k], consumer, false, 0)
		if len(ids) == 0 {
			t.Fatalf("%s trained no entry", consumer)
		}
		for _, id := range ids {
			seen[id]++
		}
		want := replay(t, c, ids, consumer)
		for i := range want.w {
			if math.Float64bits(got.w[i]) != math.Float64bits(want.w[i]) {
				t.Fatalf("%s's model after the kills %v, a run over its log's entries %v", consumer, got.w, want.w)
			}
		}
		t.Logf("%s trained %d entries", consumer, len(ids))
	}
	dups := 0
	for _, n := range seen {
		dups += n - 1
	}
	lost := twoKillEntries - len(seen)
	t.Logf("%d entries trained, %d duplicates, %d lost", len(seen)+dups, dups, lost)
	if dups != 0 || lost != 0 {
		t.Fatalf("%d entries trained twice and %d never", dups, lost)
	}
	pending, err := c.XPending(ctx, "{clicks}", "trainers").Result()
	if err != nil {
		t.Fatal(err)
	}
	if pending.Count != 0 {
		t.Fatalf("%d entries left unacknowledged", pending.Count)
	}
}

// replay returns the model of an uninterrupted run over the entries ids
// of the stream "{clicks}", in their order: they are copied, in order,
// into a stream of their own, read through a Stream and trained.
func replay(t *testing.T, c *redis.Client, ids []string, name string) *streamModel {
	ctx := context.Background()
	key := "{clicks}:" + name
	p := c.Pipeline()
	for k, id := range ids {
		e, err := c.XRange(ctx, "{clicks}", id, id).Result()
		if err != nil || len(e) != 1 {
			t.Fatalf("entry %s: %v (%d found)", id, err, len(e))
		}
		p.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: e[0].Values})
		if k%1000 == 999 || k == len(ids)-1 {
			if _, err := p.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	o := streamKillOptions()
	o.Stream, o.Group = key, "replay"
	s, err := OpenStream(ctx, c, streamSchema, o)
	if err != nil {
		t.Fatal(err)
	}
	m := &streamModel{w: make([]float64, 8)}
	for n := 0; n < len(ids); {
		b, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m.train(b)
		n += b.Real
		if err := s.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return m
}
