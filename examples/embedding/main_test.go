package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gathergrad/gather/checkpoint"
)

// tinyCorpus writes a repetitive text with a learnable next-token structure.
func tinyCorpus(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&b, "if err != nil { return x%d , err }\n", i%7)
	}
	path := filepath.Join(t.TempDir(), "tiny.txt")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	return path
}

func TestTrainingLowersTheLoss(t *testing.T) {
	cfg, err := parseFlags([]string{"-corpus", tinyCorpus(t), "-steps", "60", "-batch", "32", "-dim", "8", "-hidden", "16", "-vocab", "50"}, os.Stderr)
	require.NoError(t, err)
	c, err := loadCorpus(cfg)
	require.NoError(t, err)
	var out bytes.Buffer
	res, err := train(cfg, c, &out)
	require.NoError(t, err)
	first, last := res.heldOut[0], res.heldOut[len(res.heldOut)-1]
	assert.Less(t, last, first/2, "held-out loss %v -> %v", first, last)
	assert.Less(t, last, res.unigram, "the model must beat the unigram baseline")
	assert.Contains(t, out.String(), "step 60/60")

	// The same seed gives the same run.
	res2, err := train(cfg, c, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, res.heldOut, res2.heldOut)

	png := filepath.Join(t.TempDir(), "loss.png")
	require.NoError(t, plotLoss(png, res))
	b, err := os.ReadFile(png)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(b, []byte("\x89PNG")), "not a PNG")
}

// -sparse trains the table with row gradients and SparseAdam and learns as well.
func TestSparseTraining(t *testing.T) {
	path := tinyCorpus(t)
	args := []string{"-corpus", path, "-steps", "60", "-batch", "32", "-dim", "8", "-hidden", "16", "-vocab", "50"}
	cfg, err := parseFlags(args, os.Stderr)
	require.NoError(t, err)
	c, err := loadCorpus(cfg)
	require.NoError(t, err)
	dense, err := train(cfg, c, &bytes.Buffer{})
	require.NoError(t, err)
	cfg, err = parseFlags(append(args, "-sparse"), os.Stderr)
	require.NoError(t, err)
	sparse, err := train(cfg, c, &bytes.Buffer{})
	require.NoError(t, err)
	first, last := sparse.heldOut[0], sparse.heldOut[len(sparse.heldOut)-1]
	assert.Less(t, last, first/2, "held-out loss %v -> %v", first, last)
	assert.Equal(t, dense.heldOut[0], first, "same start")
	assert.InDelta(t, dense.heldOut[len(dense.heldOut)-1], last, 0.25, "dense and sparse end close")
}

func TestBadInput(t *testing.T) {
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{"-steps", "0"}, "-steps must be positive, got 0"},
		{[]string{"-dim", "-3"}, "-dim must be positive, got -3"},
		{[]string{"-lr", "0"}, "-lr must be a positive number, got 0"},
		{[]string{"-lr", "NaN"}, "-lr must be a positive number, got NaN"},
		{[]string{"-vocab", "1"}, "-vocab must be at least 2, got 1"},
		{[]string{"-batch", "x"}, `invalid value "x" for flag -batch`},
		{[]string{"stray"}, `unexpected arguments: ["stray"]`},
		{[]string{"-corpus", "/no/such/corpus"}, "corpus: stat /no/such/corpus: no such file or directory"},
	}
	for _, c := range cases {
		err := run(c.args, &bytes.Buffer{}, &bytes.Buffer{})
		require.Error(t, err, "%v", c.args)
		assert.Contains(t, err.Error(), c.msg)
	}

	small := filepath.Join(t.TempDir(), "small.txt")
	require.NoError(t, os.WriteFile(small, []byte("too few tokens here"), 0o644))
	err := run([]string{"-corpus", small}, &bytes.Buffer{}, &bytes.Buffer{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is too small: 4 tokens")
}

// -save and -resume: 20 steps, a checkpoint, 20 more from it in a new
// model give the tables, layers and optimiser state of 40 steps in one
// run, bit for bit, with either dense optimiser.
func TestSaveResumeIsExact(t *testing.T) {
	for _, solver := range []string{"adam", "sgd"} {
		t.Run(solver, func(t *testing.T) { saveResume(t, solver) })
	}
}

func saveResume(t *testing.T, solver string) {
	dir := t.TempDir()
	corpus := tinyCorpus(t)
	base := []string{"-corpus", corpus, "-batch", "16", "-dim", "8", "-hidden", "16", "-vocab", "50", "-sparse", "-solver", solver, "-lr", "0.05"}
	runWith := func(extra ...string) {
		cfg, err := parseFlags(append(append([]string{}, base...), extra...), os.Stderr)
		require.NoError(t, err)
		c, err := loadCorpus(cfg)
		require.NoError(t, err)
		_, err = train(cfg, c, &bytes.Buffer{})
		require.NoError(t, err)
	}
	whole, half, resumed := filepath.Join(dir, "whole"), filepath.Join(dir, "half"), filepath.Join(dir, "resumed")
	runWith("-steps", "40", "-save", whole, "-save-every", "1000")
	runWith("-steps", "20", "-save", half, "-save-every", "1000")
	// Another seed: every value must come from the checkpoint.
	runWith("-steps", "40", "-resume", half, "-save", resumed, "-save-every", "1000", "-seed", "7")

	want, wantMeta, err := checkpoint.Read(whole)
	require.NoError(t, err)
	got, gotMeta, err := checkpoint.Read(resumed)
	require.NoError(t, err)
	assert.Equal(t, "7", gotMeta["seed"])
	delete(wantMeta, "seed")
	delete(gotMeta, "seed")
	assert.Equal(t, wantMeta, gotMeta)
	require.Len(t, got, len(want))
	for name, w := range want {
		assert.Equal(t, w.Header.Raw, got[name].Header.Raw, name)
	}
	assert.Contains(t, want, "embedding.weight")
	assert.Contains(t, want, "embedding.exp_avg")
	assert.Contains(t, want, "solver.step")
}

// -table trains the table in a file behind a cache of its rows, with the
// next batch prefetched, and learns; 20 steps, a checkpoint and 20 more
// from it leave the table file and the checkpoint of 40 steps in one run,
// bit for bit.
func TestTableTraining(t *testing.T) {
	dir := t.TempDir()
	corpus := tinyCorpus(t)
	base := []string{"-corpus", corpus, "-batch", "16", "-dim", "8", "-hidden", "16", "-vocab", "50", "-lr", "0.05", "-cache-mb", "1"}
	runWith := func(extra ...string) *result {
		cfg, err := parseFlags(append(append([]string{}, base...), extra...), os.Stderr)
		require.NoError(t, err)
		c, err := loadCorpus(cfg)
		require.NoError(t, err)
		res, err := train(cfg, c, &bytes.Buffer{})
		require.NoError(t, err)
		require.NoError(t, res.m.close())
		return res
	}
	whole, half, resumed := filepath.Join(dir, "whole"), filepath.Join(dir, "half"), filepath.Join(dir, "resumed")
	tw, th := filepath.Join(dir, "tw.safetensors"), filepath.Join(dir, "th.safetensors")
	res := runWith("-steps", "40", "-table", tw, "-save", whole, "-save-every", "1000")
	first, last := res.heldOut[0], res.heldOut[len(res.heldOut)-1]
	assert.Less(t, last, first*0.8, "held-out loss %v -> %v", first, last)
	runWith("-steps", "20", "-table", th, "-save", half, "-save-every", "1000")
	runWith("-steps", "40", "-table", th, "-resume", half, "-save", resumed, "-save-every", "1000")

	want, wantMeta, err := checkpoint.Read(whole)
	require.NoError(t, err)
	got, gotMeta, err := checkpoint.Read(resumed)
	require.NoError(t, err)
	assert.Equal(t, wantMeta, gotMeta)
	assert.Equal(t, "40", gotMeta["table_steps"])
	assert.NotContains(t, got, "embedding.weight", "the table keeps itself")
	for name, w := range want {
		assert.Equal(t, w.Header.Raw, got[name].Header.Raw, name)
	}
	// The table files hold the same rows, state and step count; each has
	// an identity of its own.
	a, aMeta, err := checkpoint.Read(tw)
	require.NoError(t, err)
	b, bMeta, err := checkpoint.Read(th)
	require.NoError(t, err)
	assert.NotEqual(t, aMeta["gathergrad.id"], bMeta["gathergrad.id"])
	delete(aMeta, "gathergrad.id")
	delete(bMeta, "gathergrad.id")
	assert.Equal(t, aMeta, bMeta)
	require.Len(t, b, len(a))
	for name, w := range a {
		assert.Equal(t, w.Header.Raw, b[name].Header.Raw, "the table files differ: %s", name)
	}

	// Resuming from a checkpoint the table file has moved past is refused.
	cfg, err := parseFlags(append(append([]string{}, base...), "-steps", "40", "-table", th, "-resume", half), os.Stderr)
	require.NoError(t, err)
	c, err := loadCorpus(cfg)
	require.NoError(t, err)
	_, err = train(cfg, c, &bytes.Buffer{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "table at 20 steps")
}

// BenchmarkStep times one training step of the main job's model at its
// default flags (a dense table, and with -sparse SparseAdam's row-sparse
// step), on token ids drawn at random: the step the README's first command
// runs, in the default build or with -tags openblas.
func BenchmarkStep(b *testing.B) {
	for _, mode := range []string{"dense", "sparse"} {
		b.Run(mode, func(b *testing.B) {
			var args []string
			if mode == "sparse" {
				args = append(args, "-sparse")
			}
			cfg, err := parseFlags(args, io.Discard)
			require.NoError(b, err)
			m, err := newModel(cfg, cfg.vocab)
			require.NoError(b, err)
			defer m.close()
			rng := rand.New(rand.NewPCG(1, 2))
			text := make([]int, 100_000)
			for i := range text {
				text[i] = rng.IntN(cfg.vocab)
			}
			positions := make([]int, cfg.batch)
			for b.Loop() {
				for i := range positions {
					positions[i] = cfg.context + rng.IntN(len(text)-cfg.context)
				}
				m.fill(text, positions)
				if _, err := m.step(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
