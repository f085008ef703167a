package gather

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// errors.go's doc lists every sentinel the module's packages export, by
// package, and no other: each exported package-level Err variable of a
// package a user imports (not internal/, examples/ or tests).
func TestSentinelList(t *testing.T) {
	exported := map[string][]string{} // package directory -> its Err names
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "internal" || d.Name() == "examples" || d.Name() == "testdata" || d.Name() == "bench") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := filepath.Dir(path)
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") && n.IsExported() {
						exported[pkg] = append(exported[pkg], n.Name)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("errors.go")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^//   - ([\w/]+): ((?:.|\n//     )*)$`).FindAllStringSubmatch(string(src), -1) {
		listed[m[1]] = regexp.MustCompile(`Err\w+`).FindAllString(m[2], -1)
	}
	listed["."] = exported["."] // the root's are its var block, documented one by one
	if len(exported) != len(listed) {
		t.Errorf("packages with sentinels %v; errors.go lists %v", exported, listed)
	}
	for pkg, names := range exported {
		slices.Sort(names)
		got := slices.Sorted(slices.Values(listed[pkg]))
		if !slices.Equal(names, got) {
			t.Errorf("package %s exports %v; errors.go lists %v", pkg, names, got)
		}
	}
}
