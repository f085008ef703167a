package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/killtest"
)

// killEnv names the directory of a child of TestKillResume.
const killEnv = "GATHER_FEED_KILL"

// killOptions are the reading that TestKillResume kills and resumes:
// shuffled, over two epochs, in small blocks.
var killOptions = Options{Batch: 16, BlockBytes: 16 << 10, Window: 2, Shuffle: true, Seed: 11, Epochs: 2, Workers: 2}

// A training process killed (SIGKILL) at 20 random moments, every third
// between a batch's examples being trained and the checkpoint that
// holds them, and resumed each time from its last checkpoint (the
// reader's position, and the examples trained so far), trains every
// example of two shuffled epochs once, in the order of an uninterrupted
// run.
func TestKillResume(t *testing.T) {
	if dir := os.Getenv(killEnv); dir != "" {
		killChild(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	data := writeFile(t, "data.txt", criteoLines(12, 30000), "plain")
	r, err := Open([]string{data}, Criteo(), killOptions)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range readAll(t, r, killOptions.Batch) {
		want = append(want, exampleHash(e))
	}
	r.Close()
	kept := t.TempDir() // the checkpoint and the log, from kill to kill
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kills, saving := 0, 0
	killtest.Run(t, killtest.Config{Test: "TestKillResume", Env: killEnv, Kills: 20, Seed: 3, Window: "saving"},
		func(dir string) {
			if err := os.WriteFile(filepath.Join(dir, "data.path"), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"ckpt.safetensors", "trained.log"} {
				copyFile(filepath.Join(kept, name), filepath.Join(dir, name))
			}
		},
		func(k killtest.Kill) {
			kills++
			if k.State == "saving" {
				saving++
			}
			for _, name := range []string{"ckpt.safetensors", "trained.log"} {
				copyFile(filepath.Join(k.Dir, name), filepath.Join(kept, name))
			}
		})
	// The run's end, resumed in this process from the last kill.
	if err := os.WriteFile(filepath.Join(kept, "data.path"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	got, resumed := train(t, kept, false)
	if len(got) != len(want) {
		t.Fatalf("%d examples trained over %d kills, want %d", len(got), kills, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("example %d trained is not the uninterrupted run's", i)
		}
	}
	t.Logf("%d kills (%d between training a batch and its checkpoint); the last run resumed at example %d of %d", kills, saving, resumed, len(want))
}

// exampleHash identifies an example in the log.
func exampleHash(e example) string { return strconv.FormatUint(xxhash.Sum64String(e.key()), 16) }

// killChild trains until it is killed, from the checkpoint in dir.
func killChild(t *testing.T, dir string) {
	train(t, dir, true)
}

// train resumes the reading of dir's data from dir's checkpoint, logs
// each batch's examples (the model's training) and checkpoints the
// position with the log's length after each batch; at the end it waits
// to be killed if child, else returns the examples logged and where it
// resumed.
func train(t *testing.T, dir string, child bool) ([]string, int) {
	data, err := os.ReadFile(filepath.Join(dir, "data.path"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open([]string{string(data)}, Criteo(), killOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ckpt, logPath := filepath.Join(dir, "ckpt.safetensors"), filepath.Join(dir, "trained.log")
	log, logged, resumed := resumeLog(t, dir, r)
	defer log.Close()
	for step := 0; ; step++ {
		b, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		for _, e := range examplesOf(t, b, killOptions.Batch) {
			fmt.Fprintln(&text, exampleHash(e))
		}
		n, err := log.WriteString(text.String())
		if err != nil {
			t.Fatal(err)
		}
		logged += int64(n)
		if child {
			killtest.Mark(dir, "saving", step)
		}
		if err := checkpoint.Save(ckpt, map[string]string{"logged": strconv.FormatInt(logged, 10)}, r); err != nil {
			t.Fatal(err)
		}
		if child {
			killtest.Mark(dir, "saved", step)
		}
	}
	if child {
		killtest.Mark(dir, "done", 0)
		select {} // until killed
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b)), resumed
}

// resumeLog loads dir's checkpoint, if any, into parts, and returns the
// log of what was trained, opened for writing after the length the
// checkpoint records (what was logged after it is undone: the model is
// its checkpoint), that length and the lines before it.
func resumeLog(t *testing.T, dir string, parts ...checkpoint.Part) (*os.File, int64, int) {
	ckpt, logPath := filepath.Join(dir, "ckpt.safetensors"), filepath.Join(dir, "trained.log")
	log, err := os.OpenFile(logPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var logged int64
	if _, err := os.Stat(ckpt); err == nil {
		meta, err := checkpoint.Load(ckpt, parts...)
		if err != nil {
			t.Fatal(err)
		}
		if logged, err = strconv.ParseInt(meta["logged"], 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Truncate(logged); err != nil {
		t.Fatal(err)
	}
	if _, err := log.Seek(logged, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	return log, logged, strings.Count(string(b), "\n")
}
