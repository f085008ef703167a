package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// The example's claim at a small scale: the dynamic table's AUC over the
// last quarter of the stream is above the hashing trick's at the same
// rows and within 0.002 of the unbounded map's, and the line has every
// field.
func TestStream(t *testing.T) {
	var b bytes.Buffer
	if err := run(&b, config{steps: 600, batch: 512, live: 20_000, churn: 100, rows: 24_000, admit: 1, every: 300, dim: 8}); err != nil {
		t.Fatal(err)
	}
	out := strings.TrimSpace(b.String())
	last := out[strings.LastIndex(out, "\n")+1:]
	var auc, ne, hAUC, hNE, uAUC, ns, ratio float64
	if _, err := fmt.Sscanf(last, "dynamic: auc %g ne %g hashed-auc %g hashed-ne %g unbounded-auc %g remap-ns %g step-ratio %g",
		&auc, &ne, &hAUC, &hNE, &uAUC, &ns, &ratio); err != nil {
		t.Fatalf("%v: %q", err, last)
	}
	t.Log(last)
	if auc <= hAUC || auc < uAUC-0.002 || auc < 0.6 {
		t.Errorf("dynamic AUC %.4f, hashed %.4f, unbounded %.4f", auc, hAUC, uAUC)
	}
	if ns <= 0 || ratio < 1 {
		t.Errorf("remap %.1f ns an id, step ratio %.3f", ns, ratio)
	}
	if !strings.Contains(out, "evicted") || strings.Count(out, "\nstep ") != 2 {
		t.Errorf("progress lines:\n%s", out)
	}
}

// Bad flags are an error naming them.
func TestStreamFlags(t *testing.T) {
	err := run(&bytes.Buffer{}, config{steps: 1, batch: 1, live: 1, rows: 2, admit: 1, every: 1, dim: 8})
	if err == nil || !strings.Contains(err.Error(), "live 1") {
		t.Fatalf("%v", err)
	}
}
