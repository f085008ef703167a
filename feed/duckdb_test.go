package feed

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
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
