// Command criteo trains DLRM (BenchmarkDLRM's model, its MLPs narrower)
// on a Criteo-format click log read by package feed: -data train.txt
// takes Kaggle's file (or a Terabyte day, plain, gzip or zstd) as it is,
// its 26 categorical columns hashed into -rows rows a table (DLRM's
// --max-ind-range), or with -raw kept as the raw 64-bit ids they spell
// and given rows by an id map a table (an id seen twice gets a row, the
// least recently used row goes to a new id when the table is full), its
// integers through log(1+x). Nine tenths of the
// lines (by a hash of each) train, shuffled; the rest are held out, and
// every -eval-every steps it prints their AUC and log loss, with the
// rows a second read and trained. With -checkpoint it saves the model
// and the reader's position there at each evaluation, and resumes from
// the file when it exists: a run killed and started again goes on where
// its checkpoint left it. On a terminal a progress bar shows the steps,
// the rows a second and the last evaluation between the printed lines.
//
// With no -data it first writes a synthetic Criteo-format file from a
// known model and prints that model's own (Bayes) AUC on the held-out
// lines beside the trained model's, so that the command runs on a fresh
// machine.
//
// Usage:
//
//	go run ./examples/criteo [-data train.txt] [-epochs 2] [-batch 512] [-rows 50000] [-raw] [-checkpoint dlrm.safetensors]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/feed"
)

type config struct {
	data       string
	lines      int // of the synthetic file
	epochs     int
	batch      int
	rows       int
	raw        bool // raw ids through id maps, not hashed into rows
	lr         float64
	evalEvery  int
	checkpoint string
	seed       uint64
	maxSteps   int // 0: every epoch's batches
	out        io.Writer
}

// result is what a run measured.
type result struct {
	steps     int
	bayesAUC  float64 // the synthetic file's own model's, NaN for -data
	auc, loss float64 // the last evaluation's
	resumed   int     // the steps the checkpoint held at the start
}

func main() {
	var c config
	flag.StringVar(&c.data, "data", "", "a Criteo-format file (Kaggle's train.txt, a Terabyte day); none: a synthetic one")
	flag.IntVar(&c.lines, "lines", 200_000, "lines of the synthetic file")
	flag.IntVar(&c.epochs, "epochs", 2, "passes over the training lines")
	flag.IntVar(&c.batch, "batch", 512, "examples a step")
	flag.IntVar(&c.rows, "rows", 50_000, "rows of each of the 26 tables (ids hashed into them)")
	flag.BoolVar(&c.raw, "raw", false, "keep the categoricals' raw ids, given rows by an id map a table, instead of hashing them into rows")
	flag.Float64Var(&c.lr, "lr", 1, "SGD's learning rate, tables and MLPs")
	flag.IntVar(&c.evalEvery, "eval-every", 200, "steps between evaluations (and checkpoints)")
	flag.StringVar(&c.checkpoint, "checkpoint", "", "save the model and the reading here at each evaluation, and resume from it")
	flag.Uint64Var(&c.seed, "seed", 1, "the seed of the model, the shuffle and the synthetic file")
	flag.Parse()
	c.out = os.Stdout
	if _, err := run(context.Background(), c); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, c config) (result, error) {
	res := result{bayesAUC: -1}
	if c.data == "" {
		dir, err := os.MkdirTemp("", "criteo")
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(dir)
		c.data = filepath.Join(dir, "train.txt")
		if res.bayesAUC, err = synthesize(c.data, c.lines, c.seed, func(l []byte) bool { return inSplit(l, 90, 100) }); err != nil {
			return res, err
		}
		fmt.Fprintf(c.out, "wrote %d synthetic lines of Criteo's format to %s; their model's own held-out AUC (Bayes): %.4f\n", c.lines, c.data, res.bayesAUC)
	}
	schema := feed.Criteo()
	for k := range schema.Columns {
		if schema.Columns[k].Role == feed.Sparse && !c.raw {
			schema.Columns[k].Modulo = uint64(c.rows)
		}
	}
	trainOpts := feed.Options{Batch: c.batch, Epochs: c.epochs, Shuffle: true, Seed: c.seed, Split: feed.Split{Buckets: 100, From: 0, To: 90}}
	train, err := feed.Open([]string{c.data}, schema, trainOpts)
	if err != nil {
		return res, err
	}
	defer train.Close()
	m, err := newModel(c.batch, c.rows, c.lr, c.seed, c.raw)
	if err != nil {
		return res, err
	}
	defer m.close()
	step := 0
	if c.checkpoint != "" {
		if _, err := os.Stat(c.checkpoint); err == nil {
			meta, err := checkpoint.Load(c.checkpoint, m.parts(train)...)
			if err != nil {
				return res, err
			}
			if _, err := fmt.Sscan(meta["step"], &step); err != nil {
				return res, fmt.Errorf("%s: its step %q: %v", c.checkpoint, meta["step"], err)
			}
			res.resumed, m.steps = step, int64(step)
			fmt.Fprintf(c.out, "resumed from %s at step %d\n", c.checkpoint, step)
		}
	}
	evaluate := func() error {
		held, err := feed.Open([]string{c.data}, schema, feed.Options{Batch: c.batch, Split: feed.Split{Buckets: 100, From: 90, To: 100}})
		if err != nil {
			return err
		}
		defer held.Close()
		rep, err := m.evaluate(ctx, held)
		if err != nil {
			return err
		}
		res.auc, res.loss = rep.AUC, rep.LogLoss
		if c.checkpoint != "" {
			if err := checkpoint.Save(c.checkpoint, map[string]string{"step": fmt.Sprint(step)}, m.parts(train)...); err != nil {
				return err
			}
		}
		return nil
	}
	start, rows := time.Now(), 0
	var lossSum float64
	var lossN int
	bar := newBar(c.out, c.epochs, c.maxSteps)
	for c.maxSteps == 0 || step < c.maxSteps {
		b, err := train.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return res, err
		}
		l, err := m.step(ctx, b)
		if err != nil {
			return res, err
		}
		step, rows, lossSum, lossN = step+1, rows+b.Real, lossSum+l, lossN+1
		if bar != nil {
			d := fmt.Sprintf("epoch %d  %.0f rows/s", b.Epoch, float64(rows)/time.Since(start).Seconds())
			if step > c.evalEvery {
				d += fmt.Sprintf("  held-out AUC %.4f", res.auc)
			}
			bar.Describe(d)
			_ = bar.Add(1)
		}
		if step%c.evalEvery == 0 {
			if err := evaluate(); err != nil {
				return res, err
			}
			if bar != nil {
				_ = bar.Clear()
			}
			fmt.Fprintf(c.out, "step %6d  epoch %d  train loss %.4f  held-out AUC %.4f  log loss %.4f  %.0f rows/s\n",
				step, b.Epoch, lossSum/float64(lossN), res.auc, res.loss, float64(rows)/time.Since(start).Seconds())
			lossSum, lossN = 0, 0
		}
	}
	if bar != nil {
		_ = bar.Finish()
		fmt.Fprintln(c.out)
	}
	if err := evaluate(); err != nil {
		return res, err
	}
	res.steps = step
	fmt.Fprintf(c.out, "done: %d steps, held-out AUC %.4f, log loss %.4f", step, res.auc, res.loss)
	if res.bayesAUC >= 0 {
		fmt.Fprintf(c.out, " (the synthetic model's own AUC %.4f)", res.bayesAUC)
	}
	fmt.Fprintln(c.out)
	return res, nil
}

// newBar returns a progress bar of the steps on out when out is a
// terminal (its total unknown: the lines are counted as they are read),
// nil elsewhere.
func newBar(out io.Writer, epochs, maxSteps int) *progressbar.ProgressBar {
	f, ok := out.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	total := -1
	if maxSteps > 0 {
		total = maxSteps
	}
	return progressbar.NewOptions(total,
		progressbar.OptionSetWriter(out),
		progressbar.OptionSetDescription(fmt.Sprintf("%d epochs", epochs)),
		progressbar.OptionShowCount(),
		progressbar.OptionSetItsString("steps"),
		progressbar.OptionShowIts(),
		progressbar.OptionSetWidth(24),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionShowDescriptionAtLineEnd())
}
