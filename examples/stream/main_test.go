package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gathergrad/gather/internal/localredis"
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

// -redis at a small scale: events written, joined and trained from a
// live local Redis, the line with every field, the model learning.
func TestOnline(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv(localredis.Require) != "" {
			t.Fatalf("%v (%s is set)", localredis.ErrNoServer, localredis.Require)
		}
		t.Skip(localredis.ErrNoServer)
	}
	var b bytes.Buffer
	c := config{batch: 256, live: 20_000, churn: 100, rows: 24_000, admit: 1, dim: 8}
	o := onlineConfig{rate: 5000, duration: 4 * time.Second, window: 300 * time.Millisecond, delay: 100 * time.Millisecond, prom: true,
		publish: 500 * time.Millisecond, serve: []string{"now", "never"}, pack: 16}
	if err := runOnline(&b, c, o); err != nil {
		t.Fatal(err)
	}
	out := strings.TrimSpace(b.String())
	prom := out[strings.Index(out, "# HELP"):]
	for _, family := range []string{"stream_event_to_trained_seconds_bucket", "stream_consumer_lag ", "stream_trained_total ", `stream_joined_total{kind="positive"}`} {
		if !strings.Contains(prom, "\n"+family) {
			t.Errorf("no %s in the Prometheus text:\n%s", family, prom)
		}
	}
	out = strings.TrimSpace(out[:strings.Index(out, "# HELP")])
	last := out[strings.LastIndex(out, "\n")+1:]
	var events, trained, lag, age, served, auc, now, never float64
	if _, err := fmt.Sscanf(last, "online: events-per-s %g trained-per-s %g lag-p99 %g event-to-trained-p99 %g event-to-served-p99 %g auc %g auc-served-now %g auc-served-never %g",
		&events, &trained, &lag, &age, &served, &auc, &now, &never); err != nil {
		t.Fatalf("%v: %q", err, last)
	}
	t.Log(last)
	if events <= 0 || trained <= 0 || trained > events || age < 0.1 || auc < 0.55 {
		t.Errorf("events %.0f/s, trained %.0f/s, event to trained p99 %.3f s, AUC %.4f", events, trained, age, auc)
	}
	// An event is served some time after it happens, and a server that applies
	// the deltas answers better than the model saved before the stream.
	if served < 0.1 || served > 3 || now <= never {
		t.Errorf("event to served p99 %.3f s (to trained %.3f s), AUC served now %.4f, never %.4f", served, age, now, never)
	}
}
