package main

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain makes the test binary the server process of -fresh when
// startServer starts it so.
func TestMain(m *testing.M) {
	if dir := os.Getenv(serveEnv); dir != "" {
		every, err := parseEvery(os.Getenv(everyEnv))
		if err == nil {
			err = serveProcess(dir, every, os.Stdin, os.Stdout)
		}
		if err != nil {
			log.Fatal(err)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// smallFresh is a stream that drifts fast, small enough for a test.
var smallFresh = config{batch: 256, live: 4000, churn: 20, rows: 6000, admit: 1, dim: 16}

// The freshness experiment at a small scale: a server in another process
// answers every batch; its answers with deltas every 200 ms score a
// higher AUC than with none, every delta is applied, and the checker
// finds every answer to be exactly its version's (torn 0); the fresh
// line has every field.
func TestFresh(t *testing.T) {
	var b bytes.Buffer
	f := freshConfig{intervals: []time.Duration{200 * time.Millisecond, 0}, duration: 4 * time.Second, rate: 50, warm: 100}
	if err := runFresh(&b, smallFresh, f); err != nil {
		t.Fatal(err)
	}
	out := strings.TrimSpace(b.String())
	t.Log(out)
	last := out[strings.LastIndex(out, "\n")+1:]
	var lag, apply, fast, never float64
	var torn int
	if _, err := fmt.Sscanf(last, "fresh: lag-p99 %g apply-ms-per-1k %g auc-0.2s %g auc-never %g torn %d", &lag, &apply, &fast, &never, &torn); err != nil {
		t.Fatalf("%v: %q", err, last)
	}
	if torn != 0 || !strings.Contains(out, "every 0.2s:") || !strings.Contains(out, "every never:") {
		t.Errorf("torn %d:\n%s", torn, out)
	}
	if fast <= never {
		t.Errorf("AUC with deltas every 0.2 s %.4f, with none %.4f", fast, never)
	}
	if !(lag > 0 && lag < 2) || !(apply > 0) {
		t.Errorf("lag p99 %g s, apply %g ms per 1,000 rows", lag, apply)
	}
}

// The checker finds an answer that is not its version's: the same run's
// answers with one answer's bits changed, or with the first answer of a
// version named with the version before it, are torn.
func TestFreshChecker(t *testing.T) {
	dir := t.TempDir()
	f := freshConfig{duration: 2 * time.Second, rate: 50, warm: 50}
	r, err := freshOnce(dir, smallFresh, f, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.torn != 0 || r.checked != r.steps || r.deltas < 5 {
		t.Fatalf("torn %d, checked %d of %d, deltas %d", r.torn, r.checked, r.steps, r.deltas)
	}
	flipped := slices.Clone(r.answers)
	flipped[len(flipped)/2].hash ^= 1
	if _, torn, err := check(dir, smallFresh, f, flipped); err != nil || torn != 1 {
		t.Errorf("an answer's bits changed: torn %d (%v)", torn, err)
	}
	k := slices.IndexFunc(r.answers, func(a answer) bool { return a.seq >= 2 })
	if k < 1 || r.answers[k-1].seq != r.answers[k].seq-1 {
		t.Fatalf("no answer of a version right after the one before it (%d)", k)
	}
	older := slices.Clone(r.answers)
	older[k].seq--
	if _, torn, err := check(dir, smallFresh, f, older); err != nil || torn != 1 {
		t.Errorf("answer %d of version %d named %d: torn %d (%v)", k, r.answers[k].seq, older[k].seq, torn, err)
	}
}

// Bad -fresh flags are an error naming them.
func TestFreshFlags(t *testing.T) {
	if _, err := parseIntervals("1s,soon"); err == nil || !strings.Contains(err.Error(), `"soon"`) {
		t.Errorf("%v", err)
	}
	err := runFresh(&bytes.Buffer{}, smallFresh, freshConfig{intervals: []time.Duration{time.Second}, duration: time.Second, rate: 0})
	if err == nil || !strings.Contains(err.Error(), "rate 0") {
		t.Errorf("%v", err)
	}
}
