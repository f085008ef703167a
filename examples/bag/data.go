package main

import (
	"errors"
	"fmt"
	"go/scanner"
	"go/token"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/gathergrad/gather/examples/internal/goroot"
)

// A file is one example: the ids of its first k identifiers (0 where it
// has fewer, or for a rare word) and the part of the library it is in.
type file struct {
	path  string
	ids   []int
	class int
}

// dataset is the standard library's files split into training and
// held-out ones (a fifth, chosen by a hash of the path).
type dataset struct {
	root        string
	classes     []string // class id -> part of the library
	vocab       []string // id -> identifier; vocab[0] is the padding id
	train, test []file
}

// minFiles is how many files a part of the library needs to be a class.
const minFiles = 60

// loadStdlib reads the Go files of the standard library (not cmd, tests,
// testdata or vendor) under GOROOT/src, labels each with its top-level
// directory, and keeps the parts with at least minFiles files.
func loadStdlib(k int) (*dataset, error) {
	root := goroot.Dir()
	if root == "" {
		return nil, errors.New("cannot find the Go installation: set GOROOT")
	}
	src := filepath.Join(root, "src")
	byPart := map[string][]string{}
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "vendor" || path == filepath.Join(src, "cmd")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(src, path)
		part, _, ok := strings.Cut(filepath.ToSlash(rel), "/")
		if ok {
			byPart[part] = append(byPart[part], path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", src, err)
	}
	ds := &dataset{root: src}
	for part, files := range byPart {
		if len(files) >= minFiles {
			ds.classes = append(ds.classes, part)
		}
	}
	if len(ds.classes) < 2 {
		return nil, fmt.Errorf("found fewer than two parts with %d files in %s", minFiles, src)
	}
	sort.Strings(ds.classes)

	// Identifiers of every file; the vocabulary is those seen in at least
	// two training files.
	type raw struct {
		path   string
		idents []string
		class  int
		test   bool
	}
	var all []raw
	seen := map[string]int{} // identifier -> training files it occurs in
	for c, part := range ds.classes {
		for _, path := range byPart[part] {
			idents, err := identifiers(path, k)
			if err != nil {
				return nil, err
			}
			r := raw{path: path, idents: idents, class: c, test: heldOut(path)}
			all = append(all, r)
			if !r.test {
				for _, id := range unique(idents) {
					seen[id]++
				}
			}
		}
	}
	ds.vocab = []string{"<pad>"}
	for id, n := range seen {
		if n >= 2 {
			ds.vocab = append(ds.vocab, id)
		}
	}
	slices.Sort(ds.vocab[1:])
	index := make(map[string]int, len(ds.vocab))
	for i, w := range ds.vocab {
		index[w] = i
	}
	for _, r := range all {
		f := file{path: r.path, ids: make([]int, k), class: r.class}
		for i, w := range r.idents {
			f.ids[i] = index[w] // 0 for a word outside the vocabulary
		}
		if r.test {
			ds.test = append(ds.test, f)
		} else {
			ds.train = append(ds.train, f)
		}
	}
	return ds, nil
}

// identifiers returns the first k identifiers of a Go file.
func identifiers(path string, k int) ([]string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var s scanner.Scanner
	s.Init(fset.AddFile(path, -1, len(src)), src, nil, 0) // errors are skipped: some files are for other platforms' syntax
	var out []string
	for len(out) < k {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.IDENT && lit != "_" {
			out = append(out, lit)
		}
	}
	return out, nil
}

func unique(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// heldOut puts a fifth of the files, chosen by a hash of their path, in
// the held-out set.
func heldOut(path string) bool {
	h := fnv.New32a()
	h.Write([]byte(filepath.ToSlash(path)))
	return h.Sum32()%5 == 0
}

// baseline returns the held-out accuracy of always guessing the most
// common class of the training files.
func (ds *dataset) baseline() float64 {
	counts := make([]int, len(ds.classes))
	for _, f := range ds.train {
		counts[f.class]++
	}
	best := 0
	for c := range counts {
		if counts[c] > counts[best] {
			best = c
		}
	}
	right := 0
	for _, f := range ds.test {
		if f.class == best {
			right++
		}
	}
	return float64(right) / float64(max(len(ds.test), 1))
}

func accuracy(files []file, preds []int) float64 {
	right := 0
	for i, f := range files {
		if preds[i] == f.class {
			right++
		}
	}
	return float64(right) / float64(max(len(files), 1))
}
