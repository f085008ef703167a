package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/gathergrad/gather/examples/internal/goroot"
)

// tokenRE splits text into identifiers, numbers, common two-character
// operators and single other characters; white space separates tokens.
var tokenRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*|[0-9][0-9A-Za-z_.]*|//|:=|==|!=|<=|>=|&&|\|\||<-|\+\+|--|\S`)

// unk is the token standing for every word outside the vocabulary.
const unk = "<unk>"

// corpus is a tokenised text split into training and held-out ids.
type corpus struct {
	source   string
	files    int
	vocab    []string // id -> token; vocab[0] is unk
	train    []int
	heldOut  []int
	unkShare float64 // fraction of held-out tokens that are unk
}

// goSources returns the Go files of the standard library, without tests
// and test data, in lexical order.
func goSources() (root string, files []string, err error) {
	root = goroot.Dir()
	if root == "" {
		return "", nil, errors.New("cannot find the Go installation: set GOROOT or pass -corpus PATH")
	}
	src := filepath.Join(root, "src")
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("reading the Go sources in %s: %w", src, err)
	}
	return src, files, nil
}

// textFiles returns path itself if it is a file, else every regular file
// under it, in lexical order.
func textFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("corpus: %s holds no files", path)
	}
	return files, nil
}

// tokenize reads files in order until maxTokens tokens.
func tokenize(files []string, maxTokens int) ([]string, int, error) {
	var toks []string
	used := 0
	for _, f := range files {
		if len(toks) >= maxTokens {
			break
		}
		fh, err := os.Open(f)
		if err != nil {
			return nil, 0, fmt.Errorf("corpus: %w", err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() && len(toks) < maxTokens {
			toks = append(toks, tokenRE.FindAllString(sc.Text(), -1)...)
		}
		err = sc.Err()
		fh.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("corpus: reading %s: %w", f, err)
		}
		used++
	}
	if len(toks) > maxTokens {
		toks = toks[:maxTokens]
	}
	return toks, used, nil
}

// chunk is the length of the runs of tokens dealt to training and held-out
// text; every tenth run is held out.
const chunk = 512

// buildCorpus keeps the vocabSize-1 most frequent training tokens (ties
// broken by the token) plus unk, and maps both splits to ids.
func buildCorpus(source string, files []string, maxTokens, vocabSize, minTokens int) (*corpus, error) {
	toks, used, err := tokenize(files, maxTokens)
	if err != nil {
		return nil, err
	}
	var train, held []string
	for i := 0; i < len(toks); i += chunk {
		part := toks[i:min(i+chunk, len(toks))]
		if (i/chunk)%10 == 9 {
			held = append(held, part...)
		} else {
			train = append(train, part...)
		}
	}
	if len(train) < minTokens || len(held) < minTokens/10 {
		return nil, fmt.Errorf("corpus %s is too small: %d tokens (%d training, %d held out); need at least %d training and %d held out",
			source, len(toks), len(train), len(held), minTokens, minTokens/10)
	}
	counts := map[string]int{}
	for _, t := range train {
		counts[t]++
	}
	words := make([]string, 0, len(counts))
	for w := range counts {
		words = append(words, w)
	}
	slices.SortFunc(words, func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	if len(words) > vocabSize-1 {
		words = words[:vocabSize-1]
	}
	c := &corpus{source: source, files: used, vocab: append([]string{unk}, words...)}
	id := make(map[string]int, len(c.vocab))
	for i, w := range c.vocab {
		id[w] = i
	}
	toIDs := func(ts []string) []int {
		out := make([]int, len(ts))
		for i, t := range ts {
			out[i] = id[t] // 0, unk, when absent
		}
		return out
	}
	c.train, c.heldOut = toIDs(train), toIDs(held)
	n := 0
	for _, x := range c.heldOut {
		if x == 0 {
			n++
		}
	}
	c.unkShare = float64(n) / float64(len(c.heldOut))
	return c, nil
}
