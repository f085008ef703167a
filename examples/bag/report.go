package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// report prints the held-out accuracy of each part of the library, the
// part each is most often taken for, and a few predictions.
func report(w io.Writer, ds *dataset, preds []int) {
	n := len(ds.classes)
	confusion := make([][]int, n)
	for c := range confusion {
		confusion[c] = make([]int, n)
	}
	for i, f := range ds.test {
		confusion[f.class][preds[i]]++
	}
	fmt.Fprintf(w, "\n%-10s %6s %9s  %s\n", "part", "files", "accuracy", "most often taken for")
	for c, row := range confusion {
		total, wrong := 0, -1
		for p, k := range row {
			total += k
			if p != c && k > 0 && (wrong < 0 || k > row[wrong]) {
				wrong = p
			}
		}
		other := "-"
		if wrong >= 0 {
			other = fmt.Sprintf("%s (%d)", ds.classes[wrong], row[wrong])
		}
		fmt.Fprintf(w, "%-10s %6d %8.1f%%  %s\n", ds.classes[c], total, 100*float64(row[c])/float64(max(total, 1)), other)
	}
	fmt.Fprintln(w, "\nsome held-out files:")
	for i := 0; i < len(ds.test); i += max(1, len(ds.test)/8) {
		f := ds.test[i]
		rel, _ := filepath.Rel(ds.root, f.path)
		mark := "right"
		if preds[i] != f.class {
			mark = "wrong"
		}
		fmt.Fprintf(w, "  %-45s -> %-9s (%s)\n", strings.TrimSuffix(filepath.ToSlash(rel), ".go"), ds.classes[preds[i]], mark)
	}
	fmt.Fprintln(w)
}
