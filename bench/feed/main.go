// Command feed times package feed's reader against DuckDB (npm
// @duckdb/node-api) on one Criteo-format file, in alternating rounds, at
// 1 and 2 threads: DuckDB reads the file with the columns' types and
// converts the 26 hexadecimal columns to integers (its time measured in
// its own process, the node start excluded); feed reads it into batches
// of 2,048 with GOMAXPROCS and Workers at the thread count. It prints
// each side's median rows a second and MB a second, and their ratio.
// Then the same for Parquet: DuckDB writes the file's typed columns
// (snappy, row groups of -rowgroup rows) and each side reads that file.
//
// Usage (NODE_PATH naming the folder where @duckdb/node-api is
// installed):
//
//	go run ./bench/feed [-lines 200000] [-rounds 5] [-rowgroup 25000]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
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

	"github.com/gathergrad/gather/feed"
)

func main() {
	lines := flag.Int("lines", 200_000, "lines of the file")
	rounds := flag.Int("rounds", 5, "alternating rounds")
	rowGroup := flag.Int("rowgroup", 25_000, "rows a Parquet row group")
	flag.Parse()
	dir, err := os.MkdirTemp("", "bench-feed")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "criteo.tsv")
	size := write(path, *lines)
	script, err := filepath.Abs("feed/testdata/duckdb.cjs")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("TSV: %d lines, %.1f MB\n", *lines, float64(size)/1e6)
	compare(script, path, "count", size, *lines, *rounds)
	pq := filepath.Join(dir, "criteo.parquet")
	if out, err := exec.Command("node", script, path, "2", "topq", pq, "snappy", strconv.Itoa(*rowGroup)).CombinedOutput(); err != nil {
		log.Fatalf("DuckDB writing Parquet: %v: %s", err, out)
	}
	st, err := os.Stat(pq)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("Parquet (DuckDB's, snappy, row groups of %d): %.1f MB\n", *rowGroup, float64(st.Size())/1e6)
	compare(script, pq, "pqcount", st.Size(), *lines, *rounds)
}

// compare times DuckDB (in mode) and feed reading path, alternating, at
// 1 and 2 threads, and prints the medians.
func compare(script, path, mode string, size int64, lines, rounds int) {
	for _, threads := range []int{1, 2} {
		var ours, duck []float64 // seconds
		for range rounds {
			duck = append(duck, duckDB(script, path, mode, threads, lines))
			ours = append(ours, read(path, threads, lines))
		}
		mo, md := median(ours), median(duck)
		fmt.Printf("threads %d: feed %.0f rows/s %.1f MB/s, DuckDB %.0f rows/s %.1f MB/s, feed/DuckDB %.2fx (medians of %d)\n",
			threads, float64(lines)/mo, float64(size)/mo/1e6, float64(lines)/md, float64(size)/md/1e6, md/mo, rounds)
	}
}

// write writes n Criteo-format lines to path and returns its size.
func write(path string, n int) int64 {
	r := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for range n {
		b.WriteString(strconv.Itoa(r.IntN(2)))
		for range 13 {
			b.WriteByte('\t')
			if r.IntN(8) != 0 {
				b.WriteString(strconv.Itoa(r.IntN(5000) - 2))
			}
		}
		for range 26 {
			b.WriteByte('\t')
			if r.IntN(10) != 0 {
				fmt.Fprintf(&b, "%08x", r.Uint32())
			}
		}
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
	return int64(b.Len())
}

// duckDB returns the seconds DuckDB took to read the file at threads
// (mode "count" for the TSV, "pqcount" for Parquet).
func duckDB(script, path, mode string, threads, lines int) float64 {
	out, err := exec.Command("node", script, path, strconv.Itoa(threads), mode).Output()
	if err != nil {
		log.Fatalf("DuckDB: %v (install: npm install --ignore-scripts --prefix DIR @duckdb/node-api@1.5.6-r.1, NODE_PATH=DIR/node_modules)", err)
	}
	var res struct {
		Rows int     `json:"rows"`
		MS   float64 `json:"ms"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.Rows != lines {
		log.Fatalf("DuckDB: %s (%v)", out, err)
	}
	return res.MS / 1000
}

// read returns the seconds feed took to read the file into batches at
// threads.
func read(path string, threads, lines int) float64 {
	prev := runtime.GOMAXPROCS(threads)
	defer runtime.GOMAXPROCS(prev)
	start := time.Now()
	r, err := feed.Open([]string{path}, feed.Criteo(), feed.Options{Batch: 2048, Workers: threads})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	n := 0
	for {
		b, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		n += b.Real
	}
	if n != lines {
		log.Fatalf("feed read %d rows of %d", n, lines)
	}
	return time.Since(start).Seconds()
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
