package feed_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/feed"
	"github.com/redis/go-redis/v9"
)

// Two lines of Criteo's click log, read into one batch of 3: the second
// line's empty integer is filled with 0, its empty categorical an empty
// bag, and the batch's third example is padding of weight 0.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "feed")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "train.txt")
	line := func(label, i1, c1 string) string {
		s := label + "\t" + i1
		for range 12 {
			s += "\t1"
		}
		s += "\t" + c1
		for range 25 {
			s += "\t0a"
		}
		return s + "\n"
	}
	if err := os.WriteFile(path, []byte(line("1", "3", "68fd1e64")+line("0", "", "")), 0o644); err != nil {
		log.Fatal(err)
	}
	r, err := feed.Open([]string{path}, feed.Criteo(), feed.Options{Batch: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	b, err := r.Next(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("real", b.Real, "labels", b.Labels, "weights", b.Weights)
	fmt.Printf("I1: %.4f %.4f %.4f\n", b.Dense[0], b.Dense[b.DenseDim], b.Dense[2*b.DenseDim])
	fmt.Println("C1 lengths", b.Sparse.Lengths[0:3], "C1 ids", b.Sparse.Values[:1], "= 0x68fd1e64")
	// Output:
	// real 2 labels [1 0 0] weights [1 1 0]
	// I1: 1.3863 0.0000 0.0000
	// C1 lengths [1 0 0] C1 ids [1761418852] = 0x68fd1e64
}

// Training online from a Redis Stream of Criteo's examples (one entry an
// example, its fields named label, I1..I13, C1..C26), each entry trained
// once across crashes: the model and the stream's state saved after each
// batch, the batch acknowledged after the save. It needs a Redis server
// at the address given, so go test compiles it without running it;
// feed's TestStreamKill runs the same loop against a local server and
// kills it.
func ExampleOpenStream() {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: "10.0.0.1:6379"})
	s, err := feed.OpenStream(ctx, c, feed.Criteo(), feed.StreamOptions{Stream: "{clicks}", Group: "trainers", Consumer: "worker-1", Batch: 2048})
	if err != nil {
		log.Fatal(err)
	}
	var model checkpoint.Part // the model's parts: nn.Embedding, optim state, checkpoint.Nodes(...)
	if _, err := os.Stat("model.safetensors"); err == nil {
		if _, err := checkpoint.Load("model.safetensors", model, s); err != nil {
			log.Fatal(err)
		}
	}
	for ctx.Err() == nil {
		b, err := s.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		_ = b // train on b.Labels, b.Dense, b.Sparse (b.Weights: 0 for padding)
		if err := checkpoint.Save("model.safetensors", nil, model, s); err != nil {
			log.Fatal(err)
		}
		if err := s.Ack(ctx); err != nil {
			log.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}
}

// Joining a stream of impressions (a request id and the example's
// fields) with a stream of clicks into the labelled examples a trainer
// reads (ExampleOpenStream, with StreamOptions.Lines "lines"), 64 to an
// entry: a click within a second of its impression makes a positive,
// none a negative. It needs a Redis server at the address given, so go
// test compiles it without running it; examples/stream -redis runs it
// against a local server.
func ExampleNewJoin() {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: "10.0.0.1:6379"})
	j, err := feed.NewJoin(c, feed.JoinOptions{Impressions: "{clicks}:imp", Clicks: "{clicks}:click", Out: "{clicks}",
		Window: time.Second, Lines: []string{"label", "user", "item"}, Pack: 64})
	if err != nil {
		log.Fatal(err)
	}
	for ctx.Err() == nil {
		if _, err := j.Step(ctx); err != nil {
			log.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	log.Printf("%+v", j.Stats())
}
