package feed

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// The DuckDB tests read the files with DuckDB from npm.
const (
	duckInstall = "apt-get install -y nodejs npm && npm install --ignore-scripts --prefix DIR @duckdb/node-api@1.5.6-r.1, with NODE_PATH=DIR/node_modules"
	// duckRequire makes a missing DuckDB a failure instead of a skip
	// (.ci/run sets it).
	duckRequire = "GATHER_REQUIRE_DUCKDB"
	duckScript  = "testdata/duckdb.cjs"
)

// needDuckDB skips t, naming the install, unless node can load
// @duckdb/node-api; with duckRequire set it fails instead.
func needDuckDB(t *testing.T) {
	t.Helper()
	err := exec.Command("node", "-e", "require('@duckdb/node-api')").Run()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("node cannot load @duckdb/node-api (%v); install: %s", err, duckInstall)
	if os.Getenv(duckRequire) != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// duck runs the DuckDB script on path with threads and args.
func duck(t testing.TB, path string, threads int, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("node", append([]string{duckScript, path, strconv.Itoa(threads)}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("DuckDB: %v: %s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	return out
}

// A Criteo-format TSV, empty fields included, reads to the values DuckDB
// parses, row by row: the label, each integer (0 where DuckDB reads
// NULL, then log(1 + max(x, 0))) and each hexadecimal id (an empty bag
// where DuckDB reads NULL).
func TestAgainstDuckDB(t *testing.T) {
	needDuckDB(t)
	lines := criteoLines(13, 3000)
	path := writeFile(t, "duck.tsv", lines, "plain")
	var rows [][]*string
	if err := json.Unmarshal(duck(t, path, 2), &rows); err != nil {
		t.Fatal(err)
	}
	r, err := Open([]string{path}, Criteo(), Options{Batch: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := readAll(t, r, 100)
	if len(got) != len(rows) {
		t.Fatalf("%d rows, DuckDB %d", len(got), len(rows))
	}
	for i, row := range rows {
		var want example
		l, _ := strconv.Atoi(*row[0])
		want.label = float32(l)
		for _, v := range row[1:14] {
			x := 0.0
			if v != nil {
				n, _ := strconv.ParseInt(*v, 10, 64)
				x = float64(n)
			}
			want.dense = append(want.dense, float32(math.Log1p(math.Max(x, 0))))
		}
		for _, v := range row[14:] {
			var ids []int64
			if v != nil {
				u, _ := strconv.ParseUint(*v, 10, 64)
				ids = []int64{int64(u)}
			}
			want.ids = append(want.ids, ids)
		}
		if got[i].key() != want.key() {
			t.Fatalf("row %d: %v, DuckDB's %v", i, got[i], want)
		}
	}
}

// Parquet files DuckDB wrote from a Criteo-format TSV (snappy and zstd,
// several row groups; the categorical columns as BIGINT, a list column
// "bag" with its list of weights "bagw") read to exactly the values
// DuckDB reads back from them, row by row, nulls filled as the schema
// says; shuffled and sharded they give the same examples once each.
func TestParquetAgainstDuckDB(t *testing.T) {
	needDuckDB(t)
	lines := criteoLines(14, 2500)
	tsv := writeFile(t, "pq.tsv", lines, "plain")
	s := Criteo()
	for k := range s.Columns {
		if s.Columns[k].Role == Sparse {
			s.Columns[k].IDs = Int // DuckDB's BIGINT
		}
	}
	s.Columns = append(s.Columns, Column{Name: "bag", Role: Sparse}, Column{Name: "bagw", Role: Weight, WeightOf: "bag"})
	for _, codec := range []string{"snappy", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "x.parquet")
			var rows [][]any
			if err := json.Unmarshal(duck(t, tsv, 2, "parquet", out, codec, "300"), &rows); err != nil {
				t.Fatal(err)
			}
			r, err := Open([]string{out}, s, Options{Batch: 64})
			if err != nil {
				t.Fatal(err)
			}
			if g := len(r.srcs[0].pq.RowGroups()); g < 2 {
				t.Fatalf("%d row groups", g)
			}
			got := readAll(t, r, 64)
			r.Close()
			if len(got) != len(rows) || len(rows) != len(lines) {
				t.Fatalf("%d rows, DuckDB %d, the file %d", len(got), len(rows), len(lines))
			}
			want := make([]example, len(rows))
			for i, row := range rows {
				e := &want[i]
				l, _ := strconv.Atoi(row[0].(string))
				e.label = float32(l)
				for _, v := range row[1:14] {
					x := 0.0
					if v != nil {
						n, _ := strconv.ParseInt(v.(string), 10, 64)
						x = float64(n)
					}
					e.dense = append(e.dense, float32(math.Log1p(math.Max(x, 0))))
				}
				for _, v := range row[14:40] {
					var ids []int64
					if v != nil {
						n, _ := strconv.ParseInt(v.(string), 10, 64)
						ids = []int64{n}
					}
					e.ids = append(e.ids, ids)
					e.wts = append(e.wts, make([]float64, len(ids)))
					for k := range ids {
						e.wts[len(e.wts)-1][k] = 1
					}
				}
				var bag []int64
				var bagw []float64
				for _, x := range row[40].([]any) {
					n, _ := strconv.ParseInt(x.(string), 10, 64)
					bag = append(bag, n)
				}
				for _, x := range row[41].([]any) {
					w, _ := strconv.ParseFloat(x.(string), 64)
					bagw = append(bagw, w)
				}
				if bagw == nil {
					bagw = []float64{}
				}
				e.ids, e.wts = append(e.ids, bag), append(e.wts, bagw)
				if got[i].key() != e.key() {
					t.Fatalf("row %d: %v, DuckDB's %v", i, got[i], *e)
				}
			}
			// Shuffled row groups in three shards: every row once.
			var all []example
			for k := range 3 {
				r, err := Open([]string{out}, s, Options{Batch: 64, Shuffle: true, Seed: 5, Shard: k, Shards: 3})
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, readAll(t, r, 64)...)
				r.Close()
			}
			if !slices.Equal(keys(all), keys(want)) {
				t.Fatal("the shuffled shards are not every row once")
			}
		})
	}
}
