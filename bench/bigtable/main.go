//go:build linux

// Command bigtable measures a table larger than memory: table.Create of a
// rows × 64 float32 table against the disk's sequential write speed (dd,
// in the same run), then training steps on it (a lookup of 4,096 ids, a
// linear layer to 16 classes, cross entropy, RowWiseAdagrad) with ids
// drawn uniformly and from a Zipf distribution (exponent 1.05), against
// the same steps on an in-memory table of 1,000,000 rows. It prints the
// step times (median and 90th percentile), the Go heap and the resident
// memory.
//
//	go run ./bench/bigtable -dir /path/on/the/disk [-rows 100000000] [-steps 1000]
//
// The table file (rows × 256 bytes) is removed at the end unless -keep.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
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
)

func main() {
	dir := flag.String("dir", "", "directory on the disk to measure (required)")
	rows := flag.Int("rows", 100_000_000, "rows of the file table")
	memRows := flag.Int("mem-rows", 1_000_000, "rows of the in-memory table")
	steps := flag.Int("steps", 1000, "training steps per stream")
	keep := flag.Bool("keep", false, "keep the table file")
	reuse := flag.Bool("reuse", false, "train on the table file a -keep run left, without creating it again")
	streams := flag.String("streams", "zipf,uniform", "id streams to train on, in order")
	depths := flag.String("qd", "", "if set, a comma-separated list of queue depths: measure positioned reads of random rows at each, from a cold cache, after the table exists, and skip the training")
	flag.Parse()
	if *dir == "" {
		log.Fatal("-dir is required")
	}
	if err := openblas.Use(); err == nil {
		fmt.Println("matrix products: OpenBLAS")
	}
	path := filepath.Join(*dir, "bigtable.safetensors")
	size := int64(*rows) * dim * 4

	if !*reuse {
		fmt.Printf("disk: dd of %d MB with fsync: %s\n", min(size, 4<<30)>>20, ddSpeed(*dir, min(size, 4<<30)))
		start := time.Now()
		if err := table.Create(path, "table", *rows, dim, tensor.Float32, table.WithSeed(1), table.WithReplace()); err != nil {
			log.Fatal(err)
		}
		el := time.Since(start)
		fmt.Printf("table.Create %d x %d float32 (%.1f GB): %.1f s, %.0f MB/s\n", *rows, dim, float64(size)/1e9, el.Seconds(), float64(size)/1e6/el.Seconds())
	}
	if !*keep {
		defer os.Remove(path)
	}
	if *depths != "" {
		sweep(path, *rows, *depths)
		return
	}

	for _, stream := range strings.Split(*streams, ",") {
		memory(fmt.Sprintf("before the %s steps", stream))
		g := gorgonia.NewGraph()
		emb, err := nn.OpenEmbedding(g, path, "table")
		if err != nil {
			log.Fatal(err)
		}
		ts := run(g, emb, *rows, *steps, stream)
		memory(fmt.Sprintf("after %d %s steps on the file table", *steps, stream))
		if err := emb.Close(); err != nil {
			log.Fatal(err)
		}
		g2 := gorgonia.NewGraph()
		mem, err := nn.NewEmbedding(g2, "table", *memRows, dim, tensor.Float32, nn.WithSparse(), nn.WithSeed(1))
		if err != nil {
			log.Fatal(err)
		}
		tm := run(g2, mem, *memRows, *steps, stream)
		fmt.Printf("%s: file table %s; in-memory %d rows %s; ratio of medians %.2f\n",
			stream, summary(ts), *memRows, summary(tm), median(ts).Seconds()/median(tm).Seconds())
	}
}

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

// run trains steps and returns each step's time.
func run(g *gorgonia.ExprGraph, emb *nn.Embedding, rows, steps int, stream string) []time.Duration {
	r := rand.New(rand.NewPCG(7, 8))
	zipf := rand.NewZipf(r, 1.05, 1, uint64(rows-1))
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
	times := make([]time.Duration, 0, steps)
	for range steps {
		for i := range ids.Ints() {
			if stream == "zipf" {
				ids.Ints()[i] = int(zipf.Uint64())
			} else {
				ids.Ints()[i] = r.IntN(rows)
			}
			y.Ints()[i] = r.IntN(classes)
		}
		start := time.Now()
		if err := vm.RunAll(); err != nil {
			log.Fatal(err)
		}
		if err := emb.Step(opt); err != nil {
			log.Fatal(err)
		}
		if err := solver.Step(gorgonia.NodesToValueGrads(gorgonia.Nodes{w})); err != nil {
			log.Fatal(err)
		}
		vm.Reset()
		times = append(times, time.Since(start))
	}
	return times
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
