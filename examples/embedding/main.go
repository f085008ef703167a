// Command embedding trains a small neural language model whose embedding
// lookup is gather.Gather and whose loss picks each target's
// log-probability with gather.GatherElements.
//
// By default it reads the Go standard library's own source, so it needs no
// download; -corpus trains on a text file or directory instead. It prints
// the held-out loss of a unigram baseline and of the model, the nearest
// neighbours of a few tokens in the learned table and a greedy
// continuation, and writes a plot of the loss curves.
//
// With -sparse the table is trained with row-sparse gradients
// (nn.WithSparse) and optim.SparseAdam, the rest with optim.Adam.
//
// -save writes a checkpoint (a safetensors file: the table under
// "embedding.weight", the dense layers, the optimisers' state, the step
// and the batch sampler's state) every -save-every steps and at the end;
// -resume continues from one, bit-identical to a run without the break.
//
//	go run ./examples/embedding [-steps 1000] [-sparse] [-table words.safetensors] [-corpus PATH] [-out loss.png] [-save ckpt.safetensors] [-resume ckpt.safetensors]
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/openblas"
)

type config struct {
	steps, dim, batch, context, hidden, vocab, maxTokens int
	lr                                                   float64
	seed                                                 uint64
	out, corpus                                          string
	sparse                                               bool
	table                                                string
	cacheMB                                              int
	save, resume, solver                                 string
	saveEvery                                            int
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("embedding", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.steps, "steps", 1000, "training steps")
	fs.IntVar(&c.dim, "dim", 32, "embedding dimension")
	fs.IntVar(&c.batch, "batch", 128, "windows per batch")
	fs.IntVar(&c.context, "context", 4, "tokens of context before the predicted one")
	fs.IntVar(&c.hidden, "hidden", 128, "hidden units")
	fs.IntVar(&c.vocab, "vocab", 2000, "vocabulary size, unknown-token id included")
	fs.IntVar(&c.maxTokens, "max-tokens", 600_000, "tokens read from the corpus at most")
	fs.Float64Var(&c.lr, "lr", 0.01, "Adam learning rate")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed; a seed gives the same run every time")
	fs.StringVar(&c.out, "out", "loss.png", "where to write the loss plot")
	fs.BoolVar(&c.sparse, "sparse", false, "train the embedding table with row-sparse gradients and SparseAdam")
	fs.StringVar(&c.table, "table", "", "keep the embedding table in this file (made if missing, SparseAdam's state beside each row), "+
		"trained behind a cache of its rows with the next batch prefetched; implies -sparse")
	fs.IntVar(&c.cacheMB, "cache-mb", 64, "megabytes of the -table's cache of rows")
	fs.StringVar(&c.corpus, "corpus", "", "text file or directory to train on (default: the Go standard library's source)")
	fs.StringVar(&c.save, "save", "", "write a checkpoint (safetensors) to this file every -save-every steps and at the end")
	fs.IntVar(&c.saveEvery, "save-every", 100, "steps between checkpoints with -save")
	fs.StringVar(&c.resume, "resume", "", "start from this checkpoint, at the step after the one it was saved at")
	fs.StringVar(&c.solver, "solver", "adam", "the dense layers' optimiser: adam (optim.NewAdam) or sgd (optim.SGD); both resume exactly")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"steps", c.steps}, {"dim", c.dim}, {"batch", c.batch}, {"context", c.context}, {"hidden", c.hidden}, {"max-tokens", c.maxTokens}} {
		if f.v <= 0 {
			return c, fmt.Errorf("-%s must be positive, got %d", f.name, f.v)
		}
	}
	if c.vocab < 2 {
		return c, fmt.Errorf("-vocab must be at least 2, got %d", c.vocab)
	}
	if !(c.lr > 0) || math.IsInf(c.lr, 0) {
		return c, fmt.Errorf("-lr must be a positive number, got %v", c.lr)
	}
	if c.solver != "adam" && c.solver != "sgd" {
		return c, fmt.Errorf("-solver must be adam or sgd, got %q", c.solver)
	}
	if c.table != "" {
		c.sparse = true
		if c.cacheMB <= 0 {
			return c, fmt.Errorf("-cache-mb must be positive, got %d", c.cacheMB)
		}
	}
	if c.saveEvery <= 0 {
		return c, fmt.Errorf("-save-every must be positive, got %d", c.saveEvery)
	}
	if c.out == "" {
		return c, errors.New("-out must name a file")
	}
	return c, nil
}

func main() {
	// With -tags openblas the model's matrix products run in OpenBLAS;
	// without it, in gonum's pure-Go BLAS.
	if err := openblas.Use(); err == nil {
		fmt.Println("matrix products: OpenBLAS")
	}
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "embedding:", err)
		}
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	c, err := loadCorpus(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "corpus: %s: %d files, %d training and %d held-out tokens, vocabulary %d (%.1f%% of held-out tokens unknown)\n",
		c.source, c.files, len(c.train), len(c.heldOut), len(c.vocab), 100*c.unkShare)

	res, err := train(cfg, c, stdout)
	if err != nil {
		return err
	}
	defer res.m.close()
	report(stdout, c, res)
	if err := plotLoss(cfg.out, res); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "loss curves written to %s\n", cfg.out)
	return nil
}

func loadCorpus(cfg config) (*corpus, error) {
	minTokens := 10 * (cfg.batch + cfg.context)
	if cfg.corpus != "" {
		files, err := textFiles(cfg.corpus)
		if err != nil {
			return nil, err
		}
		return buildCorpus(cfg.corpus, files, cfg.maxTokens, cfg.vocab, minTokens)
	}
	root, files, err := goSources()
	if err != nil {
		return nil, err
	}
	return buildCorpus(root, files, cfg.maxTokens, cfg.vocab, minTokens)
}

// result is what a training run measured.
type result struct {
	m                  *model
	steps              []int     // steps at which the losses below were taken
	trainLoss, heldOut []float64 // mean training loss since the previous point; held-out loss
	unigram            float64   // held-out loss of the unigram baseline
	elapsed            time.Duration
}

// evalPoints is how many times a run measures its held-out loss.
const evalPoints = 10

func train(cfg config, c *corpus, stdout io.Writer) (_ *result, err error) {
	m, err := newModel(cfg, len(c.vocab))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			m.close()
		}
	}()
	pcg := rand.NewPCG(cfg.seed, 1)
	rng := rand.New(pcg)
	res := &result{m: m, unigram: unigramLoss(c)}
	fmt.Fprintf(stdout, "held-out loss of the unigram baseline: %.3f nats/token\n", res.unigram)

	// A fixed sample of held-out windows, the same at every evaluation.
	evalPos := make([]int, 16*cfg.batch)
	for i := range evalPos {
		evalPos[i] = cfg.context + rng.IntN(len(c.heldOut)-cfg.context)
	}
	measure := func(step int, sum float64, n int) error {
		h, err := m.evaluate(c.heldOut, evalPos)
		if err != nil {
			return err
		}
		res.steps = append(res.steps, step)
		res.heldOut = append(res.heldOut, h)
		res.trainLoss = append(res.trainLoss, sum/float64(max(n, 1)))
		return nil
	}
	first := 1
	if cfg.resume != "" {
		if first, err = resume(cfg, m, pcg); err != nil {
			return nil, err
		}
		fmt.Fprintf(stdout, "resumed from %s at step %d\n", cfg.resume, first)
	}
	if err := measure(first-1, 0, 0); err != nil {
		return nil, err
	}
	res.trainLoss[0] = res.heldOut[0]

	prog := newProgress(stdout, cfg.steps)
	start := time.Now()
	positions := make([]int, cfg.batch)
	every := max(cfg.steps/evalPoints, 1)
	var sum float64
	n := 0
	for step := first; step <= cfg.steps; step++ {
		for b := range positions {
			positions[b] = cfg.context + rng.IntN(len(c.train)-cfg.context)
		}
		m.fill(c.train, positions)
		if step < cfg.steps {
			// The next batch's ids, drawn from a copy of the sampler, for a
			// table in a file to read while this step computes.
			peek := *pcg
			m.prefetch(c.train, rand.New(&peek), len(positions))
		}
		loss, err := m.step()
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", step, err)
		}
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			return nil, fmt.Errorf("step %d: the loss is %v; try a smaller -lr", step, loss)
		}
		sum += loss
		n++
		if step%every == 0 || step == cfg.steps {
			if err := measure(step, sum, n); err != nil {
				return nil, err
			}
			sum, n = 0, 0
		}
		if cfg.save != "" && (step%cfg.saveEvery == 0 || step == cfg.steps) {
			if err := save(cfg, m, pcg, step); err != nil {
				return nil, fmt.Errorf("step %d: saving: %w", step, err)
			}
		}
		tokens := float64((step-first+1)*cfg.batch) / time.Since(start).Seconds()
		prog.update(step, loss, res.heldOut[len(res.heldOut)-1], tokens)
	}
	prog.finish()
	res.elapsed = time.Since(start)
	return res, nil
}

// save writes the model, its optimiser state, the step and the state of
// the batch sampler to cfg.save, atomically.
func save(cfg config, m *model, pcg *rand.PCG, step int) error {
	state, err := pcg.MarshalBinary()
	if err != nil {
		return err
	}
	meta := map[string]string{"step": strconv.Itoa(step), "sampler": hex.EncodeToString(state),
		"seed": strconv.FormatUint(cfg.seed, 10), "solver": cfg.solver}
	if h, ok := m.emb.Home().(nn.Cache); ok {
		// The table keeps itself: sync it first, and record how far it
		// was trained, so that a resume can check it against the file.
		c := h.Cached()
		if err := c.Sync(context.Background()); err != nil {
			return err
		}
		meta["table_steps"] = strconv.FormatInt(c.Stats().Steps, 10)
	}
	return checkpoint.Save(cfg.save, meta, m.parts()...)
}

// resume loads cfg.resume into the model and the batch sampler and returns
// the step to continue from.
func resume(cfg config, m *model, pcg *rand.PCG) (int, error) {
	meta, err := checkpoint.Load(cfg.resume, m.parts()...)
	if err != nil {
		return 0, err
	}
	step, err := strconv.Atoi(meta["step"])
	if err != nil {
		return 0, fmt.Errorf("%s: no step in the metadata: %w", cfg.resume, err)
	}
	state, err := hex.DecodeString(meta["sampler"])
	if err == nil {
		err = pcg.UnmarshalBinary(state)
	}
	if err != nil {
		return 0, fmt.Errorf("%s: no batch sampler state in the metadata: %w", cfg.resume, err)
	}
	if meta["solver"] != cfg.solver {
		return 0, fmt.Errorf("%s was trained with -solver %s, this run asks for %s", cfg.resume, meta["solver"], cfg.solver)
	}
	if h, ok := m.emb.Home().(nn.Cache); ok {
		if steps := h.Cached().Stats().Steps; meta["table_steps"] != strconv.FormatInt(steps, 10) {
			return 0, fmt.Errorf("%s was saved with the table at %s steps; %s is at %d: resume with the table file of that checkpoint",
				cfg.resume, meta["table_steps"], cfg.table, steps)
		}
	}
	return step + 1, nil
}

// unigramLoss is the held-out cross-entropy of training-set token
// frequencies (add-one smoothed), in nats per token.
func unigramLoss(c *corpus) float64 {
	counts := make([]float64, len(c.vocab))
	for _, t := range c.train {
		counts[t]++
	}
	total := float64(len(c.train) + len(c.vocab))
	var nll float64
	for _, t := range c.heldOut {
		nll -= math.Log((counts[t] + 1) / total)
	}
	return nll / float64(len(c.heldOut))
}

// progress shows training progress: a bar on a terminal, else a plain line
// every tenth of the run.
type progress struct {
	w     io.Writer
	bar   *progressbar.ProgressBar
	steps int
}

func newProgress(w io.Writer, steps int) *progress {
	p := &progress{w: w, steps: steps}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions(steps,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("training"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(24),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionShowDescriptionAtLineEnd())
	}
	return p
}

func (p *progress) update(step int, loss, heldOut, tokensPerSec float64) {
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("loss %.3f  held-out %.3f  %.0f tok/s", loss, heldOut, tokensPerSec))
		_ = p.bar.Set(step)
		return
	}
	if step%max(p.steps/10, 1) == 0 || step == p.steps {
		fmt.Fprintf(p.w, "step %*d/%d  loss %.3f  held-out %.3f  %.0f tokens/s\n",
			len(fmt.Sprint(p.steps)), step, p.steps, loss, heldOut, tokensPerSec)
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
	}
}

// probes are tokens whose neighbours are shown, where the vocabulary has them.
var probes = []string{"if", "err", "int", "return", "(", "0", "Errorf", "len"}

func report(w io.Writer, c *corpus, res *result) {
	final := res.heldOut[len(res.heldOut)-1]
	fmt.Fprintf(w, "\ntrained %d steps in %.1fs\n", res.steps[len(res.steps)-1], res.elapsed.Seconds())
	fmt.Fprintf(w, "held-out loss: unigram baseline %.3f, model %.3f nats/token (perplexity %.0f -> %.0f)\n",
		res.unigram, final, math.Exp(res.unigram), math.Exp(final))

	id := map[string]int{}
	for i, t := range c.vocab {
		id[t] = i
	}
	rows := res.m.table()
	fmt.Fprintln(w, "\nnearest neighbours in the learned embedding table (cosine):")
	shown := 0
	for _, p := range probes {
		i, ok := id[p]
		if !ok || shown == 5 {
			continue
		}
		var names []string
		for _, j := range neighbours(rows, i, 5) {
			names = append(names, c.vocab[j])
		}
		fmt.Fprintf(w, "  %-8s %s\n", p, strings.Join(names, "  "))
		shown++
	}

	ctx := res.m.context
	prompt := c.heldOut[:ctx]
	if cont, err := res.m.continuation(prompt, 24); err == nil {
		words := func(ids []int) string {
			s := make([]string, len(ids))
			for i, x := range ids {
				s[i] = c.vocab[x]
			}
			return strings.Join(s, " ")
		}
		fmt.Fprintf(w, "\ngreedy continuation of %q:\n  %s\n", words(prompt), words(cont))
	}
}
