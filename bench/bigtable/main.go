//go:build linux

// Command bigtable measures a table larger than memory: table.Create of a
// rows × 64 float32 table with row-wise Adagrad's state (260-byte rows)
// against the disk's sequential write speed (dd, in the same run), then
// training steps on it behind a cache of rows (a lookup of 4,096 ids, a
// linear layer to 16 classes, cross entropy, RowWiseAdagrad; the next
// batch prefetched), with ids drawn from a Zipf distribution (exponent
// 1.05) and uniformly, against the same step on an in-memory table of
// 1,000,000 rows. Before every step the file's pages are dropped from the
// system's cache (posix_fadvise), so that every miss reads the disk.
//
// Beside every fifth step it times the disk's limit for a cache of the
// same budget: a plain loop of positioned reads, at the cache's queue
// depth and from a cold page cache, of the distinct rows of that step
// that an oracle cache would miss, one holding the most frequent ids (for
// this Zipf, ids below the cache's row count; for uniform ids, any as
// many). After each stream's steps it times Close, which writes back
// every row the steps changed (the cache has no journal limit here, so
// that no Sync comes between), and, for the uniform stream, the disk's
// limit for that write set, measured last: a loop of 4 KB positioned
// writes of the pages those rows touch, at the cache's depth, into the
// table file (with -keep, a scratch file of its size), then fsync. Then the Zipf
// stream again without Preload (cold-hit: its hit rate after the same
// steps), and the same model on an in-memory table of -mem-rows rows on
// each stream (ids drawn over its rows). It prints step times (median and
// 90th percentile), hit rates, the Go heap and the resident memory, and
// one line a check reads:
//
//	bigtable: zipf <ms> uniform <ms> memory-zipf <ms> memory-uniform <ms> disk-zipf <ms> disk-uniform <ms> hit <f> oracle <f> cold-hit <f> close <s> close-limit <s>
//
// (medians; hit, oracle and cold-hit under Zipf; close and close-limit
// after the uniform steps).
//
//	go run ./bench/bigtable -dir /path/on/the/disk [-rows 100000000] [-cache 4294967296] [-warmup 3000] [-steps 1000] [-preload=false]
//
// The table file (rows × 260 bytes) is removed at the end unless -keep.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"math/bits"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/openblas"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

const (
	dim, batch, classes = 64, 4096, 16
	name                = "table"
)

// cols is the state of each row: RowWiseAdagrad's accumulator.
var cols = optim.NewRowWiseAdagrad(0.05).Columns(dim)

func main() {
	dir := flag.String("dir", "", "directory on the disk to measure (required)")
	rows := flag.Int("rows", 100_000_000, "rows of the file table")
	memRows := flag.Int("mem-rows", 1_000_000, "rows of the in-memory table")
	budget := flag.Int64("cache", 4<<30, "bytes of the cache of rows")
	depth := flag.Int("depth", 32, "reads in flight for the cache's misses")
	warmup := flag.Int("warmup", 3000, "untimed steps before the timed ones, per stream")
	lfu := flag.Bool("lfu", false, "evict by frequency (CacheOptions.LFU) instead of recency")
	prefetch := flag.Bool("prefetch", true, "read each next batch's misses while the current step runs (nn.Embedding.Prefetch)")
	preload := flag.Bool("preload", true, "fill the cache with the table's first rows when it opens (CacheOptions.Preload)")
	steps := flag.Int("steps", 1000, "timed training steps per stream")
	keep := flag.Bool("keep", false, "keep the table file")
	reuse := flag.Bool("reuse", false, "train on the table file a -keep run left, without creating it again")
	streams := flag.String("streams", "zipf,uniform", "id streams to train on, in order")
	depths := flag.String("qd", "", "if set, a comma-separated list of queue depths: measure positioned reads of random rows at each, from a cold cache, after the table exists, and skip the training")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the training to this file")
	cold := flag.Bool("cold", true, "train the Zipf stream again without Preload, for its hit rate (cold-hit)")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	if *dir == "" {
		log.Fatal("-dir is required")
	}
	if err := openblas.Use(); err == nil {
		fmt.Println("matrix products: OpenBLAS")
	}
	path := filepath.Join(*dir, "bigtable.safetensors")
	width := dim + cols[0].Width
	size := int64(*rows) * int64(width) * 4

	if !*reuse {
		fmt.Printf("disk: dd of %d MB with fsync: %s\n", min(size, 4<<30)>>20, ddSpeed(*dir, min(size, 4<<30)))
		start := time.Now()
		err := table.Create(path, name, *rows, dim, tensor.Float32, table.WithSeed(1), table.WithReplace(), table.WithState(cols...))
		if err != nil {
			log.Fatal(err)
		}
		el := time.Since(start)
		fmt.Printf("table.Create %d x %d float32 with state (%.1f GB): %.1f s, %.0f MB/s\n", *rows, width, float64(size)/1e9, el.Seconds(), float64(size)/1e6/el.Seconds())
	}
	if !*keep {
		defer os.Remove(path)
		defer os.Remove(path + ".journal")
	}
	if *depths != "" {
		sweep(path, *rows, *depths)
		return
	}

	medians := map[string]float64{}
	var hit, oracle, coldHit, closeS, closeLimit float64
	var written bitset // the rows the uniform steps changed, which Close wrote
	var start int64    // the offset of the table's first row in its file
	runs := strings.Split(*streams, ",")
	if *cold && slices.Contains(runs, "zipf") {
		runs = append(runs, "zipf-cold")
	}
	for _, run1 := range runs {
		stream, load := strings.TrimSuffix(run1, "-cold"), *preload && !strings.HasSuffix(run1, "-cold")
		memory(fmt.Sprintf("before the %s steps", run1))
		t0 := time.Now()
		c, err := table.OpenCached(context.Background(), path, table.CacheOptions{Budget: *budget, Preload: load, LFU: *lfu}, table.FileOptions{Depth: *depth, JournalLimit: -1})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: cache of %d rows (%.2f GB), queue depth %d, preload %v, lfu %v, prefetch %v: opened in %.1f s\n",
			run1, c.Weight().Shape()[0], float64(*budget)/1e9, *depth, load, *lfu, *prefetch, time.Since(t0).Seconds())
		g := gorgonia.NewGraph()
		emb, err := nn.CachedEmbedding(context.Background(), g, c)
		if err != nil {
			log.Fatal(err)
		}
		ref := newDiskRef(path, c.Weight().Shape()[0], width*4, *depth)
		res := run(g, emb, *rows, *warmup, *steps, stream, ref, *prefetch)
		memory(fmt.Sprintf("after %d %s steps on the cached table", *warmup+*steps, run1))
		t0 = time.Now()
		if err := emb.Close(context.Background()); err != nil {
			log.Fatal(err)
		}
		closed := time.Since(t0)
		fmt.Printf("%s: Close (Sync of the %d rows changed, the journal applied) %.1f s\n", run1, res.touched.count(), closed.Seconds())
		ref.close()
		fmt.Printf("%s: cached table %s; hit rate %.3f (oracle %.3f), %d of %d misses prefetched; disk limit %s\n",
			run1, summary(res.times), res.hit, res.oracle, res.prefetched, res.misses, summary(ref.times))
		switch run1 {
		case "zipf-cold":
			coldHit = res.hit
			continue
		case "zipf":
			hit, oracle = res.hit, res.oracle
		case "uniform":
			closeS, written, start = closed.Seconds(), res.touched, ref.start
		}
		medians[stream], medians["disk-"+stream] = ms(median(res.times)), ms(median(ref.times))
	}
	for _, stream := range strings.Split(*streams, ",") {
		g := gorgonia.NewGraph()
		mem, err := nn.NewEmbedding(g, name, *memRows, dim, tensor.Float32, nn.WithSparse(), nn.WithSeed(1))
		if err != nil {
			log.Fatal(err)
		}
		res := run(g, mem, *memRows, 50, *steps, stream, nil, false)
		fmt.Printf("memory: %d rows, %s ids: %s\n", *memRows, stream, summary(res.times))
		medians["memory-"+stream] = ms(median(res.times))
	}
	if written != nil {
		// Last, as it writes into the table file (unless -keep).
		closeLimit = writeLimit(path, *keep, start, int64(width*4), size, written, *depth).Seconds()
	}
	fmt.Printf("bigtable: zipf %.2f uniform %.2f memory-zipf %.2f memory-uniform %.2f disk-zipf %.2f disk-uniform %.2f hit %.3f oracle %.3f cold-hit %.3f close %.1f close-limit %.1f\n",
		medians["zipf"], medians["uniform"], medians["memory-zipf"], medians["memory-uniform"], medians["disk-zipf"], medians["disk-uniform"],
		hit, oracle, coldHit, closeS, closeLimit)
}

// A bitset is a set of rows.
type bitset []uint64

func (b bitset) add(i int) { b[i/64] |= 1 << (i % 64) }

func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// writeLimit times the disk's write of the pages the rows of touched
// cover in the table file at path, whose rows of row bytes start at
// start: 4 KB positioned writes of zeros, depth at a time, from a cold
// page cache, then fsync. They go into the table file itself, whose
// blocks they overwrite, unless keep: then into a scratch file beside it
// of the same size, its space reserved first.
func writeLimit(path string, keep bool, start, row, size int64, touched bitset, depth int) time.Duration {
	const page = 4096
	var offs []int64
	last := int64(-1)
	for w, word := range touched {
		for word != 0 {
			id := int64(w*64 + bits.TrailingZeros64(word))
			word &= word - 1
			for p := (start + id*row) / page; p <= (start+(id+1)*row-1)/page; p++ {
				if p != last {
					offs, last = append(offs, p*page), p
				}
			}
		}
	}
	var f *os.File
	var err error
	if keep {
		if f, err = os.CreateTemp(filepath.Dir(path), "close-limit"); err != nil {
			log.Fatal(err)
		}
		defer os.Remove(f.Name())
		if err := unix.Fallocate(int(f.Fd()), 0, 0, start+size); err != nil {
			log.Fatal(err)
		}
	} else if f, err = os.OpenFile(path, os.O_WRONLY, 0); err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		log.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		log.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for range depth {
		wg.Go(func() {
			buf := make([]byte, page)
			for k := next.Add(1) - 1; k < int64(len(offs)); k = next.Add(1) - 1 {
				if _, err := f.WriteAt(buf, offs[k]); err != nil {
					log.Fatal(err)
				}
			}
		})
	}
	wg.Wait()
	if err := f.Sync(); err != nil {
		log.Fatal(err)
	}
	el := time.Since(t0)
	fmt.Printf("close-limit: %d pages of 4 KB (%.1f GB) written at depth %d and synced: %.1f s\n", len(offs), float64(len(offs)*page)/1e9, depth, el.Seconds())
	return el
}

// A diskRef times the disk's limit for a cache of slots rows: positioned
// reads of the rows an oracle cache misses, from a cold page cache.
type diskRef struct {
	f     *os.File
	start int64
	slots int
	row   int
	depth int
	times []time.Duration
}

func newDiskRef(path string, slots, row, depth int) *diskRef {
	f, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	infos, _, err := checkpoint.Inspect(path)
	if err != nil {
		log.Fatal(err)
	}
	return &diskRef{f: f, start: infos[0].Offset, slots: slots, row: row, depth: depth}
}

// drop forgets the file's pages in the system's cache.
func (d *diskRef) drop() {
	if err := unix.Fadvise(int(d.f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		log.Fatal(err)
	}
}

// read times reading the distinct ids of a step that the oracle misses.
func (d *diskRef) read(ids []int) {
	var miss []int64
	for _, id := range ids {
		if id >= d.slots {
			miss = append(miss, int64(id))
		}
	}
	slices.Sort(miss)
	miss = slices.Compact(miss)
	offs := make([]int64, len(miss))
	for k, id := range miss {
		offs[k] = d.start + id*int64(d.row)
	}
	buf := make([]byte, len(miss)*d.row)
	d.drop()
	t0 := time.Now()
	if err := fileio.ReadRows(d.f, offs, d.row, buf, d.depth); err != nil {
		log.Fatal(err)
	}
	d.times = append(d.times, time.Since(t0))
}

func (d *diskRef) close() { d.f.Close() }

// sweep reads 4,096 random rows of the table file (uniform ids, each a
// 256-byte positioned read) at each queue depth, from a cold page cache
// for the file, in alternating rounds, and prints the median time of a
// batch and the rows read a second.
func sweep(path string, rows int, list string) {
	f, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	infos, _, err := checkpoint.Inspect(path)
	if err != nil {
		log.Fatal(err)
	}
	start := infos[0].Offset
	var depths []int
	for _, d := range strings.Split(list, ",") {
		n, err := strconv.Atoi(d)
		if err != nil || n < 1 {
			log.Fatalf("-qd: %q is not a queue depth", d)
		}
		depths = append(depths, n)
	}
	const rounds = 5
	r := rand.New(rand.NewPCG(3, 4))
	offs := make([]int64, batch)
	buf := make([]byte, batch*dim*4)
	times := make(map[int][]time.Duration)
	for round := range rounds {
		for i := range depths {
			d := depths[(i+round)%len(depths)]
			for k := range offs {
				offs[k] = start + int64(r.IntN(rows))*dim*4
			}
			// Forget the file's cached pages, so that every read goes to the disk.
			if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
				log.Fatal(err)
			}
			t0 := time.Now()
			if err := fileio.ReadRows(f, offs, dim*4, buf, d); err != nil {
				log.Fatal(err)
			}
			times[d] = append(times[d], time.Since(t0))
		}
	}
	for _, d := range depths {
		m := median(times[d])
		fmt.Printf("queue depth %d: %d rows in %.1f ms (median of %d), %.0f rows/s\n", d, batch, float64(m.Microseconds())/1e3, rounds, batch/m.Seconds())
	}
}

// A result is what run measured.
type result struct {
	times              []time.Duration
	hit, oracle        float64
	misses, prefetched uint64
	touched            bitset // the rows the steps changed
}

// run trains warmup and then steps steps, prefetching each step's next
// batch for a cached table, and returns the timed steps' times and, for a
// cached table, the hit rates over them; with ref, it drops the file's
// pages before each step and times the disk's limit beside every fifth.
func run(g *gorgonia.ExprGraph, emb *nn.Embedding, rows, warmup, steps int, stream string, ref *diskRef, prefetch bool) result {
	r := rand.New(rand.NewPCG(7, 8))
	zipf := rand.NewZipf(r, 1.05, 1, uint64(rows-1))
	draw := func() []int {
		ids := make([]int, batch)
		for i := range ids {
			if stream == "zipf" {
				ids[i] = int(zipf.Uint64())
			} else {
				ids[i] = r.IntN(rows)
			}
		}
		return ids
	}
	ids := tensor.New(tensor.Of(tensor.Int), tensor.WithShape(batch))
	y := tensor.New(tensor.Of(tensor.Int), tensor.WithShape(batch))
	idn := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("ids"), gorgonia.WithValue(ids))
	yn := gorgonia.NewVector(g, tensor.Int, gorgonia.WithName("y"), gorgonia.WithValue(y))
	wv := make([]float32, dim*classes)
	for i := range wv {
		wv[i] = float32(r.NormFloat64()) * 0.1
	}
	w := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithName("w"), gorgonia.WithValue(tensor.New(tensor.WithShape(dim, classes), tensor.WithBacking(wv))))
	h, err := emb.Lookup(idn)
	if err != nil {
		log.Fatal(err)
	}
	loss, err := nn.CrossEntropy(gorgonia.Must(gorgonia.Mul(h, w)), yn)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := gorgonia.Grad(loss, append(gorgonia.Nodes{w}, emb.GradNodes()...)...); err != nil {
		log.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(w))
	defer vm.Close()
	solver := gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.1))
	opt := optim.NewRowWiseAdagrad(0.05)
	res := result{touched: make(bitset, (rows+63)/64)}
	var before table.CacheStats
	var oracleHits, all int
	var c *table.Cached // a cached table's, else nil
	home, cached := emb.Home().(nn.Cache)
	if cached {
		c = home.Cached()
	}
	next := draw()
	next64 := make([]int64, batch)
	for step := range warmup + steps {
		cur := next
		next = draw()
		copy(ids.Ints(), cur)
		for i := range y.Ints() {
			y.Ints()[i] = r.IntN(classes)
		}
		if c != nil {
			for i, id := range next {
				next64[i] = int64(id)
			}
			if prefetch {
				home.Prefetch(next64)
			}
			if step == warmup {
				before = c.Stats()
			}
			if step >= warmup {
				for _, id := range cur {
					if id < c.Weight().Shape()[0] {
						oracleHits++
					}
				}
				all += len(cur)
			}
		}
		if ref != nil {
			ref.drop()
		}
		start := time.Now()
		if err := vm.RunAll(); err != nil {
			log.Fatal(err)
		}
		if err := emb.Step(context.Background(), opt); err != nil {
			log.Fatal(err)
		}
		for _, id := range cur {
			res.touched.add(id)
		}
		if err := solver.Step(gorgonia.NodesToValueGrads(gorgonia.Nodes{w})); err != nil {
			log.Fatal(err)
		}
		vm.Reset()
		if c != nil {
			// The next batch's reads, started in this step, count in its
			// time: what they overlap is this step's computing. A Read
			// waits for them.
			if _, err := c.Read(context.Background(), nil); err != nil {
				log.Fatal(err)
			}
		}
		el := time.Since(start)
		if step < warmup {
			if step%500 == 0 && c != nil {
				fmt.Printf("  warm-up step %d: %.1f ms, hit rate so far %.3f\n", step, ms(el), c.Stats().HitRate())
			}
			continue
		}
		res.times = append(res.times, el)
		if ref != nil && (step-warmup)%5 == 0 {
			ref.read(cur)
		}
	}
	if c != nil {
		st := c.Stats()
		d := table.CacheStats{Hits: st.Hits - before.Hits, Misses: st.Misses - before.Misses, Prefetched: st.Prefetched - before.Prefetched}
		res.hit, res.misses, res.prefetched = d.HitRate(), d.Misses, d.Prefetched
		res.oracle = float64(oracleHits) / float64(all)
	}
	return res
}

func median(ts []time.Duration) time.Duration {
	s := slices.Clone(ts)
	slices.Sort(s)
	return s[len(s)/2]
}

func summary(ts []time.Duration) string {
	s := slices.Clone(ts)
	slices.Sort(s)
	return fmt.Sprintf("median %.2f ms, p90 %.2f ms, first %.2f ms", ms(s[len(s)/2]), ms(s[len(s)*9/10]), ms(ts[0]))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// memory prints the Go heap and the process's resident memory.
func memory(when string) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	fmt.Printf("memory %s: Go heap %d MB (in use), %d MB obtained from the system; resident %s\n",
		when, m.HeapAlloc>>20, m.Sys>>20, rss())
}

// rss returns VmRSS and VmHWM from /proc/self/status.
func rss() string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "n/a"
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if l := s.Text(); strings.HasPrefix(l, "VmRSS") || strings.HasPrefix(l, "VmHWM") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(out, ", ")
}

// ddSpeed writes n bytes to dir with dd (fsync at the end) and returns
// dd's report of its speed.
func ddSpeed(dir string, n int64) string {
	path := filepath.Join(dir, "dd.bin")
	defer os.Remove(path)
	out, err := exec.Command("dd", "if=/dev/zero", "of="+path, "bs=1M", fmt.Sprintf("count=%d", n>>20), "conv=fsync").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("dd failed: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}
