package feed

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sync"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/nn"
)

// Options configure a Reader.
type Options struct {
	// Batch is the examples of a batch (required).
	Batch int
	// Epochs is how many times the files are read; 0 means 1.
	Epochs int
	// Shuffle reads each epoch's blocks (of BlockBytes of lines) in a
	// seeded random order, files and blocks within plain files, and the
	// examples of each Window blocks in a seeded random order: every
	// example once an epoch, in an order that Seed and the epoch set.
	Shuffle bool
	Seed    uint64
	// Window is how many blocks are shuffled together (their examples
	// in memory at once, and as many parsed ahead); 0 means 8 with
	// Shuffle, 1 without.
	Window int
	// BlockBytes is the size of a block of lines: the unit of parallel
	// parsing, of the shuffled order and of sharding; 0 means 4 MiB.
	BlockBytes int
	// Shard and Shards make the reader worker Shard of Shards (0 of 1
	// by default): each worker reads every Shards-th block of each
	// epoch's order, so that the workers of one Seed together read every
	// example once an epoch. A compressed file is read whole by every
	// worker (its blocks are cut from its stream) and parsed in part.
	Shard, Shards int
	// Split, if Buckets is not 0, keeps the examples whose line hashes
	// (XXH64) to a bucket in [From, To) of Buckets: a split of the data
	// into train, validation and test that every run makes alike.
	Split Split
	// Workers is how many goroutines parse blocks; 0 means GOMAXPROCS.
	Workers int
	// MaxBad is how many malformed lines are skipped (and counted, Bad)
	// before one is an error; 0: the first is.
	MaxBad int
	// MaxLine bounds a line's bytes; 0 means 1 MiB. A longer line is a
	// malformed line.
	MaxLine int
	// Name names the reader's position among a checkpoint's parts
	// ("<Name>.position"); "" means "feed".
	Name string
}

// A Split selects the examples whose line's XXH64 hash, modulo Buckets,
// lies in [From, To).
type Split struct {
	Buckets, From, To uint64
}

// A Batch is Options.Batch examples: the real ones first, then, in an
// epoch's last batch, padding (label 0, dense 0, no ids, weight 0), so
// that a graph of fixed shapes trains and evaluates every example once:
// multiply each example's loss by its weight. Its slices are the
// Reader's, reused by the next call of Next.
type Batch struct {
	Epoch   int
	Real    int       // the real examples, Labels[:Real]
	Labels  []float32 // [Batch]
	Weights []float32 // [Batch]: 1 for a real example, 0 for padding
	// Dense is [Batch, DenseDim], row-major: the Dense columns in the
	// schema's order.
	Dense    []float32
	DenseDim int
	// Sparse is the Sparse columns as a Collection takes them (Pack):
	// Keys the columns' names, per-id Weights when the schema has Weight
	// columns.
	Sparse nn.KeyedJagged
}

// A Reader reads files of delimited text into Batches, in parallel and
// in bounded memory, the next blocks parsed while a batch trains. It is
// not safe for concurrent use; Next, State and SetState are called from
// one goroutine.
type Reader struct {
	srcs   []*source
	schema Schema
	o      Options
	lay    *layout // the first file's (every file's has the same features)

	// The position: the epoch, its windows done, the examples taken from
	// the current window, and the malformed lines skipped.
	epoch, window, taken, bad int
	epochDone                 bool
	started                   bool // the epoch's pipeline runs from the position
	resumeTaken               int  // the examples of the first window to skip (SetState)

	pipe   *pipeline
	blocks []*block  // the current window's
	pool   sync.Pool // of *block, for the pipelines of every epoch
	bufs   sync.Pool // of *[]byte, the workers' read buffers
	order  []int32   // its examples, as indices into ex
	ex     []exRef
	last   bool // the window is the epoch's last

	err error // what ended the reading: Next returns it again

	asm *batcher // the batches
}

// exRef is an example of a window: its block and index there.
type exRef struct{ b, i int32 }

// Open returns a Reader of the files at paths (plain text, gzip or
// zstd, found from their first bytes) with schema s. A schema that
// cannot be read, bad options, or a file whose header lacks a column
// are errors wrapping gather.ErrOption; a file that does not open, its
// error.
func Open(paths []string, s Schema, o Options) (*Reader, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("feed: no files: %w", errs.ErrOption)
	}
	if o.Shards == 0 {
		o.Shards = 1
	}
	switch {
	case o.Batch <= 0:
		return nil, fmt.Errorf("feed: Options.Batch %d: a batch holds at least 1 example: %w", o.Batch, errs.ErrOption)
	case o.Epochs < 0, o.Window < 0, o.BlockBytes < 0, o.Workers < 0, o.MaxBad < 0, o.MaxLine < 0:
		return nil, fmt.Errorf("feed: Options %+v: a negative count: %w", o, errs.ErrOption)
	case o.Shards < 0 || o.Shard < 0 || o.Shard >= o.Shards:
		return nil, fmt.Errorf("feed: Options.Shard %d of %d: %w", o.Shard, o.Shards, errs.ErrOption)
	case o.Split.Buckets != 0 && (o.Split.From >= o.Split.To || o.Split.To > o.Split.Buckets):
		return nil, fmt.Errorf("feed: Options.Split %+v: buckets [From, To) of Buckets: %w", o.Split, errs.ErrOption)
	}
	if o.Epochs == 0 {
		o.Epochs = 1
	}
	if o.Window == 0 {
		o.Window = 1
		if o.Shuffle {
			o.Window = 8
		}
	}
	if o.BlockBytes == 0 {
		o.BlockBytes = 4 << 20
	}
	if o.Workers == 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.MaxLine == 0 {
		o.MaxLine = 1 << 20
	}
	if o.Name == "" {
		o.Name = "feed"
	}
	r := &Reader{schema: s, o: o}
	r.pool.New = func() any { return new(block) }
	r.bufs.New = func() any { return new([]byte) }
	for _, p := range paths {
		src, err := openSource(p, s, o.MaxLine)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.srcs = append(r.srcs, src)
	}
	r.lay = r.srcs[0].layout
	r.asm = newBatcher(r.lay, o.Batch)
	return r, nil
}

// Close stops the reader's goroutines and closes its files.
func (r *Reader) Close() error {
	r.stop()
	var first error
	for _, s := range r.srcs {
		if err := s.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	r.srcs = nil
	return first
}

// Bad returns the malformed lines skipped so far (Options.MaxBad).
func (r *Reader) Bad() int { return r.bad }

// Next returns the next batch, or io.EOF after the last epoch's last
// batch. A malformed line beyond Options.MaxBad is a *LineError (its
// file, line and column), wrapping ErrFormat; ctx ends a wait for
// blocks being parsed. After an error Next returns it again: a run goes
// on from a position saved after the last batch it trained (State,
// SetState on a new Reader). The batch is the Reader's, valid until the
// next call.
func (r *Reader) Next(ctx context.Context) (*Batch, error) {
	if r.err != nil {
		return nil, r.err
	}
	b, err := r.next(ctx)
	if err != nil && !errors.Is(err, io.EOF) {
		r.err = err
		r.stop()
	}
	return b, err
}

func (r *Reader) next(ctx context.Context) (*Batch, error) {
	a := r.asm
	a.begin()
	for !a.full() {
		if r.epoch >= r.o.Epochs {
			break
		}
		if r.epochDone {
			if a.n > 0 {
				break // the epoch's last batch, padded by end
			}
			r.stop()
			r.epoch, r.window, r.taken, r.epochDone, r.started = r.epoch+1, 0, 0, false, false
			continue
		}
		if r.taken >= len(r.order) {
			if r.blocks != nil {
				r.window, r.taken = r.window+1, 0
			}
			if r.blocks != nil && r.last {
				r.epochDone = true
				r.releaseWindow()
				continue
			}
			if err := r.loadWindow(ctx); err != nil {
				return nil, err
			}
			continue
		}
		e := r.ex[r.order[r.taken]]
		a.add(r.blocks[e.b], int(e.i))
		r.taken++
	}
	if a.n == 0 {
		return nil, io.EOF
	}
	return a.end(r.epoch), nil
}

// loadWindow makes the next window of the epoch current: its blocks
// parsed, its examples in their order.
func (r *Reader) loadWindow(ctx context.Context) error {
	if !r.started {
		r.start()
	}
	r.releaseWindow()
	for len(r.blocks) < r.o.Window {
		blk, ok, err := r.pipe.next(ctx)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		r.bad += blk.bad
		if blk.err != nil || r.bad > r.o.MaxBad {
			err := blk.err
			if err == nil {
				err = fmt.Errorf("feed: %d malformed lines, more than Options.MaxBad (%d), the first of this block: %w", r.bad, r.o.MaxBad, blk.firstBad)
			}
			r.pipe.putBlock(blk)
			return err
		}
		r.blocks = append(r.blocks, blk)
	}
	last, err := r.pipe.done(ctx)
	if err != nil {
		return err
	}
	r.last = last
	r.ex, r.order = r.ex[:0], r.order[:0]
	for bi, blk := range r.blocks {
		for i := range blk.n {
			r.ex = append(r.ex, exRef{int32(bi), int32(i)})
			r.order = append(r.order, int32(len(r.order)))
		}
	}
	if r.o.Shuffle {
		rng := rand.New(rand.NewPCG(r.o.Seed^0x9e3779b97f4a7c15, uint64(r.epoch)<<32|uint64(r.window)))
		for i := len(r.order) - 1; i > 0; i-- {
			j := rng.IntN(i + 1)
			r.order[i], r.order[j] = r.order[j], r.order[i]
		}
	}
	if len(r.blocks) == 0 {
		r.blocks = []*block{} // an epoch with no example left: done
	}
	if r.resumeTaken > 0 {
		r.taken, r.resumeTaken = min(r.resumeTaken, len(r.order)), 0
	}
	return nil
}

// releaseWindow gives the current window's blocks back for reuse.
func (r *Reader) releaseWindow() {
	for _, b := range r.blocks {
		r.pipe.putBlock(b)
	}
	r.blocks = r.blocks[:0]
	r.ex, r.order = r.ex[:0], r.order[:0]
}

// start starts the epoch's pipeline at the position: the windows done
// are skipped (plain blocks unread, compressed ones decompressed and
// dropped), the current window parsed, and its examples already taken
// skipped by Next.
func (r *Reader) start() {
	r.pipe = newPipeline(r, r.epoch, r.window*r.o.Window)
	r.started = true
}

// stop ends the epoch's pipeline, if any.
func (r *Reader) stop() {
	if r.pipe != nil {
		r.releaseWindow()
		r.pipe.close()
		r.pipe = nil
	}
	r.blocks = nil
	r.started = false
}

// fingerprint identifies the files (names and sizes: a file moved to
// another folder is the same), the schema and the options that set the
// order of examples: a position from another reading is refused.
func (r *Reader) fingerprint() int64 {
	h := fnv.New64a()
	for _, s := range r.srcs {
		fmt.Fprintf(h, "%s %d\n", filepath.Base(s.path), s.size)
	}
	o := r.o
	fmt.Fprintf(h, "%+v %+v %d %v %d %d %d %d %d %+v %d", r.schema, o.Batch, o.Epochs, o.Shuffle, o.Seed, o.Window, o.BlockBytes, o.Shard, o.Shards, o.Split, o.MaxLine)
	return int64(h.Sum64())
}

// State returns the reader's position, a checkpoint.Part's state: the
// int64 vector "<Name>.position" of the epoch, the windows done, the
// examples taken from the current one, the malformed lines skipped,
// whether the epoch's examples are all taken, and the fingerprint of the
// files and options. Saved with the model after a step, it resumes the
// reading after the last batch that step trained on.
func (r *Reader) State() (map[string]tensor.Tensor, error) {
	done := int64(0)
	if r.epochDone {
		done = 1
	}
	taken := r.taken
	if !r.started && r.resumeTaken > 0 {
		taken = r.resumeTaken
	}
	v := []int64{int64(r.epoch), int64(r.window), int64(taken), int64(r.bad), done, r.fingerprint()}
	return map[string]tensor.Tensor{r.o.Name + ".position": tensor.New(tensor.WithShape(len(v)), tensor.WithBacking(v))}, nil
}

// SetState moves the reader to a position State returned, of a reader
// of the same files, schema and options (else an error wrapping
// ErrMismatch, the reader unchanged): the next batch is the one that
// followed the batch before the position.
func (r *Reader) SetState(ts map[string]*tensor.Dense) error {
	t, ok := ts[r.o.Name+".position"]
	if !ok || t.Dtype() != tensor.Int64 || t.Dims() != 1 || t.Shape()[0] != 6 {
		return fmt.Errorf("feed: no position %q of 6 int64s: %w", r.o.Name+".position", ErrMismatch)
	}
	v := t.Int64s()
	if v[5] != r.fingerprint() {
		return fmt.Errorf("feed: the position is of other files, schema or options: %w", ErrMismatch)
	}
	if v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < 0 || v[4] < 0 || v[4] > 1 || v[0] > int64(r.o.Epochs) {
		return fmt.Errorf("feed: position %v: %w", v[:5], ErrMismatch)
	}
	r.stop()
	r.err = nil
	r.epoch, r.window, r.taken, r.bad, r.epochDone = int(v[0]), int(v[1]), 0, int(v[3]), v[4] == 1
	r.resumeTaken = int(v[2])
	return nil
}

// ErrMismatch: a position (SetState) of another reader. It is
// checkpoint.ErrMismatch.
var ErrMismatch = checkpoint.ErrMismatch
