package nn_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/serve"
	"github.com/gathergrad/gather/table"
	"github.com/gathergrad/gather/wordvec"
)

// A write whose destination is its source, or a file this process reads,
// by the same path, the path spelt another way, a hard link or a symbolic
// link, is refused: an ErrSameFile error naming both files, and the file
// is left as it was, byte for byte. It covers serve.QuantizeFile (with the
// source table closed), serve's Table.Save, checkpoint.Save,
// wordvec.Write, table.Create and table.Export.
func TestSameFileRefused(t *testing.T) {
	// names returns the ways to name the file at path: itself, "dir/./base",
	// a hard link and a symbolic link to it.
	names := func(t *testing.T, path string) map[string]string {
		dir, base := filepath.Split(path)
		hard, soft := filepath.Join(dir, "hard"), filepath.Join(dir, "soft")
		if err := os.Link(path, hard); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(base, soft); err != nil {
			t.Fatal(err)
		}
		return map[string]string{"same path": path, "./ spelling": dir + "./" + base, "hard link": hard, "symbolic link": soft}
	}
	newTable := func(t *testing.T, cols ...driver.Column) string {
		path := filepath.Join(t.TempDir(), "t.safetensors")
		if err := table.Create(path, "t", 50, 4, tensor.Float32, table.WithSeed(1), table.WithState(cols...)); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cases := []struct {
		name string
		// open opens what reads path (nothing for QuantizeFile, whose
		// source is its argument) and returns its closer.
		open  func(t *testing.T, path string) func()
		write func(dst, path string) error
		cols  []driver.Column
	}{
		{"serve.QuantizeFile", nil, func(dst, path string) error { return serve.QuantizeFile(dst, path, "t.weight", serve.Int8) }, nil},
		{"serve.Table.Save", nil, func(dst, path string) error {
			st, err := serve.Open(path, "t.weight")
			if err != nil {
				return err
			}
			defer st.Close()
			return st.Save(dst, "t.weight")
		}, nil},
		{"checkpoint.Save", func(t *testing.T, path string) func() {
			emb, err := nn.OpenEmbedding(gorgonia.NewGraph(), path, "t")
			if err != nil {
				t.Fatal(err)
			}
			saved = emb
			return func() { emb.Close(context.Background()) }
		}, func(dst, _ string) error { return checkpoint.Save(dst, nil, saved) }, nil},
		{"wordvec.Write", func(t *testing.T, path string) func() {
			st, err := serve.Open(path, "t.weight")
			if err != nil {
				t.Fatal(err)
			}
			return func() { st.Close() }
		}, func(dst, _ string) error {
			words := []string{"a", "b"}
			return wordvec.Write(dst, words, tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, 4})), false)
		}, nil},
		{"table.Create", func(t *testing.T, path string) func() {
			st, err := serve.Open(path, "t.weight")
			if err != nil {
				t.Fatal(err)
			}
			return func() { st.Close() }
		}, func(dst, _ string) error {
			return table.Create(dst, "u", 10, 4, tensor.Float32, table.WithReplace())
		}, nil},
		{"table.Export", func(t *testing.T, path string) func() {
			c, err := table.OpenCached(context.Background(), path, table.CacheOptions{Budget: 1 << 16}, table.FileOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return func() { c.Close(context.Background()) }
		}, func(dst, _ string) error {
			src, err := table.NewMemoryStore("t", tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(10, 4)), adamCols...)
			if err != nil {
				return err
			}
			return table.Export(context.Background(), dst, src, 0)
		}, adamCols},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := newTable(t, c.cols...)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for how, dst := range names(t, path) {
				t.Run(how, func(t *testing.T) {
					if c.open != nil {
						defer c.open(t, path)()
					}
					err := c.write(dst, path)
					if !errors.Is(err, checkpoint.ErrSameFile) {
						t.Fatalf("%s onto %s: %v, want ErrSameFile", c.name, dst, err)
					}
					if !strings.Contains(err.Error(), dst) || !strings.Contains(err.Error(), path) {
						t.Errorf("%q does not name both %s and %s", err, dst, path)
					}
					after, err := os.ReadFile(path)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(before, after) {
						t.Fatalf("%s changed the file", c.name)
					}
				})
			}
			// Another file is written.
			if c.open != nil {
				defer c.open(t, path)()
			}
			if err := c.write(filepath.Join(t.TempDir(), "other"), path); err != nil {
				t.Fatalf("%s onto another file: %v", c.name, err)
			}
		})
	}
}

var (
	saved    *nn.Embedding
	adamCols = optim.NewSparseAdam(0.1).Columns(4)
)
