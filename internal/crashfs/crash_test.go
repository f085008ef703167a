package crashfs_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/crashfs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/machine"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/serve"
	"github.com/gathergrad/gather/table"
	"github.com/gathergrad/gather/wordvec"
)

const vocab, dim = 40, 4

// A scenario writes files in dir through the recorded FS, calling mark
// after each call that commits a state (a Create, Sync, Close or Save
// that returned) with that state as read reads it, or nil for the state
// the files hold when run returns. read reads a directory holding the
// same files: a state's bytes, or an error.
type scenario struct {
	name string
	run  func(t *testing.T, dir string, mark func(want []byte))
	read func(dir string) ([]byte, error)
}

// A power cut at any write path's operation leaves files that open as the
// last completed commit (Create, Sync, Close, Save, QuantizeFile, Write)
// or as the one in flight, exactly, or, before the first commit, files
// that do not open: never a table or file that opens with other values.
// Each scenario's operations are recorded once; every prefix of them is
// rebuilt as a power cut would leave it, with the writes since each
// file's last fsync lost, kept, or the last torn at a sector, and with
// directory entries not yet synced undone.
func TestPowerCut(t *testing.T) {
	for _, sc := range []scenario{cachedScenario(), mappedScenario(), checkpointScenario(), serveScenario(), wordvecScenario()} {
		t.Run(sc.name, func(t *testing.T) {
			dir := t.TempDir()
			rec, err := crashfs.Record(dir)
			if err != nil {
				t.Fatal(err)
			}
			type commit struct {
				at   int
				want []byte
			}
			var commits []commit
			restore := fileio.SetFS(rec)
			sc.run(t, dir, func(want []byte) { commits = append(commits, commit{rec.Len(), want}) })
			restore()
			for k := range commits {
				if commits[k].want == nil {
					b, err := sc.read(dir)
					if err != nil {
						t.Fatalf("the files a run left: %v", err)
					}
					commits[k].want = b
				}
			}
			n := rec.Len()
			counts := map[string]int{}
			for k := 0; k <= n; k++ {
				// The states a cut after k operations may show: the last
				// commit done, or the next.
				var allowed [][]byte
				done := -1
				for j, c := range commits {
					if c.at <= k {
						done = j
					}
				}
				if done >= 0 {
					allowed = append(allowed, commits[done].want)
				}
				if done+1 < len(commits) {
					allowed = append(allowed, commits[done+1].want)
				}
				for _, mode := range []crashfs.Mode{crashfs.Lost, crashfs.Kept, crashfs.Torn} {
					got, err := readState(t, rec, k, mode, sc.read)
					switch {
					case err != nil && done < 0:
						counts["error before the first commit"]++
					case err != nil:
						t.Fatalf("a cut after operation %d of %d (%s): commit %d had returned, and the files do not open: %v\n%s", k, n, mode, done, err, describe(rec.Ops(), k))
					case slices.ContainsFunc(allowed, func(w []byte) bool { return bytes.Equal(w, got) }):
						counts["a commit's state"]++
					default:
						for j, w := range allowed {
							t.Logf("allowed %d: %d bytes, first difference at %d", j, len(w), firstDiff(w, got))
						}
						t.Fatalf("a cut after operation %d of %d (%s): the files open with other values than commit %d or the next\n%s", k, n, mode, done, describe(rec.Ops(), k))
					}
				}
			}
			t.Logf("%d operations, %d commits: %d crash states (3 per cut): %v", n, len(commits), 3*(n+1), counts)
		})
	}
}

// readState materializes the state a cut after k operations leaves in
// mode into a new directory and reads it.
func readState(t *testing.T, rec *crashfs.Recorder, k int, mode crashfs.Mode, read func(string) ([]byte, error)) ([]byte, error) {
	dst, err := os.MkdirTemp(t.TempDir(), "cut")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dst)
	if err := rec.Materialize(rec.State(k, mode), dst); err != nil {
		t.Fatal(err)
	}
	return read(dst)
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// describe lists the operations around k.
func describe(ops []crashfs.Op, k int) string {
	var b bytes.Buffer
	for i := 0; i < min(len(ops), k+3); i++ {
		op := ops[i]
		mark := "  "
		if i == k-1 {
			mark = "=>"
		}
		fmt.Fprintf(&b, "%s %d %v %s %s off=%d len=%d size=%d\n", mark, i, op.Kind, filepath.Base(op.Path), filepath.Base(op.To), op.Off, len(op.Data), op.Size)
	}
	return b.String()
}

// trainer runs steps of a sparse lookup of an embedding.
type trainer struct {
	emb *nn.Embedding
	ids *tensor.Dense
	vm  *machine.Machine
}

func newTrainer(t *testing.T, g *gorgonia.ExprGraph, emb *nn.Embedding) *trainer {
	tr := &trainer{emb: emb, ids: tensor.New(tensor.Of(tensor.Int), tensor.WithShape(6))}
	out, err := emb.Lookup(gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(6), gorgonia.WithName("ids"), gorgonia.WithValue(tr.ids)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gorgonia.Grad(gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(out, out)))), emb.GradNodes()...); err != nil {
		t.Fatal(err)
	}
	if tr.vm, err = machine.New(g); err != nil {
		t.Fatal(err)
	}
	return tr
}

func (tr *trainer) step(t *testing.T, n int, opt optim.Sparse) {
	for i, v := range []int{n, 3 * n, 7 * n, n + 1, 11*n + 5, 2} {
		tr.ids.Ints()[i] = v % vocab
	}
	if err := tr.vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	if err := tr.emb.Step(context.Background(), opt); err != nil {
		t.Fatal(err)
	}
}

var adamCols = optim.NewSparseAdam(0.1).Columns(dim)

// cachedScenario: Create a table with Adam's state, open it cached, step,
// Sync, step, Sync, step, Close.
func cachedScenario() scenario {
	allRows := func(c *table.Cached) ([]byte, error) {
		ids := make([]int64, vocab)
		for i := range ids {
			ids[i] = int64(i)
		}
		rows, err := c.Read(context.Background(), ids)
		if err != nil {
			return nil, err
		}
		b := binary.LittleEndian.AppendUint64(nil, uint64(c.Stats().Steps))
		return append(b, fileio.LittleEndianBytes(rows.Float32s())...), nil
	}
	return scenario{
		name: "cached table",
		run: func(t *testing.T, dir string, mark func([]byte)) {
			path := filepath.Join(dir, "t.safetensors")
			if err := table.Create(path, "t", vocab, dim, tensor.Float32, table.WithSeed(3), table.WithState(adamCols...)); err != nil {
				t.Fatal(err)
			}
			c, err := table.OpenCached(context.Background(), path, table.CacheOptions{Budget: 1 << 16}, table.FileOptions{})
			if err != nil {
				t.Fatal(err)
			}
			first, err := allRows(c)
			if err != nil {
				t.Fatal(err)
			}
			mark(first) // Create's table, marked once it opened
			g := gorgonia.NewGraph()
			emb, err := nn.CachedEmbedding(context.Background(), g, c)
			if err != nil {
				t.Fatal(err)
			}
			tr, opt := newTrainer(t, g, emb), optim.NewSparseAdam(0.1)
			for round := range 2 {
				tr.step(t, 2*round+1, opt)
				tr.step(t, 2*round+2, opt)
				if err := emb.Home().(nn.Syncer).Sync(context.Background()); err != nil {
					t.Fatal(err)
				}
				b, err := allRows(c)
				if err != nil {
					t.Fatal(err)
				}
				mark(b)
			}
			tr.step(t, 9, opt)
			if err := emb.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			mark(nil)
		},
		read: func(dir string) ([]byte, error) {
			c, err := table.OpenCached(context.Background(), filepath.Join(dir, "t.safetensors"), table.CacheOptions{Budget: 1 << 16}, table.FileOptions{})
			if err != nil {
				return nil, err
			}
			defer c.Close(context.Background())
			return allRows(c)
		},
	}
}

// mappedScenario: Create a table, open it mapped, step, Sync, step, Sync,
// step, Close.
func mappedScenario() scenario {
	return scenario{
		name: "mapped table",
		run: func(t *testing.T, dir string, mark func([]byte)) {
			path := filepath.Join(dir, "m.safetensors")
			if err := table.Create(path, "m", vocab, dim, tensor.Float32, table.WithSeed(4)); err != nil {
				t.Fatal(err)
			}
			g := gorgonia.NewGraph()
			emb, err := nn.OpenEmbedding(g, path, "m")
			if err != nil {
				t.Fatal(err)
			}
			weight := func() []byte {
				w, err := emb.Home().(nn.Weights).Weight()
				if err != nil {
					t.Fatal(err)
				}
				return slices.Clone(fileio.LittleEndianBytes(w.Float32s()))
			}
			mark(weight())
			tr, opt := newTrainer(t, g, emb), &optim.SparseSGD{LearnRate: 0.5}
			for round := range 2 {
				tr.step(t, 2*round+1, opt)
				tr.step(t, 2*round+2, opt)
				if err := emb.Home().(nn.Syncer).Sync(context.Background()); err != nil {
					t.Fatal(err)
				}
				mark(weight())
			}
			tr.step(t, 9, opt)
			if err := emb.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			mark(nil)
		},
		read: func(dir string) ([]byte, error) {
			f, err := table.Open(filepath.Join(dir, "m.safetensors"), "m")
			if err != nil {
				return nil, err
			}
			defer f.Close()
			w, err := f.Weight()
			if err != nil {
				return nil, err
			}
			return slices.Clone(fileio.LittleEndianBytes(w.Float32s())), nil
		},
	}
}

// checkpointScenario: Save a model, change it, Save it again over the
// first.
func checkpointScenario() scenario {
	return scenario{
		name: "checkpoint",
		run: func(t *testing.T, dir string, mark func([]byte)) {
			g := gorgonia.NewGraph()
			emb, err := nn.NewEmbedding(g, "e", vocab, dim, tensor.Float32, nn.WithSeed(5))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "ckpt.safetensors")
			for round := range 2 {
				w, _ := emb.Home().(nn.Weights).Weight()
				w.Float32s()[round] += 1
				if err := checkpoint.Save(path, map[string]string{"round": fmt.Sprint(round)}, emb); err != nil {
					t.Fatal(err)
				}
				b, err := checkpointBytes(path)
				if err != nil {
					t.Fatal(err)
				}
				mark(b)
			}
		},
		read: func(dir string) ([]byte, error) { return checkpointBytes(filepath.Join(dir, "ckpt.safetensors")) },
	}
}

// checkpointBytes reads the checkpoint at path: its round and its table.
func checkpointBytes(path string) ([]byte, error) {
	ts, meta, err := checkpoint.Read(path)
	if err != nil {
		return nil, err
	}
	w, ok := ts["e.weight"]
	if !ok {
		return nil, fmt.Errorf("no e.weight in %s", path)
	}
	return append([]byte(meta["round"]), fileio.LittleEndianBytes(w.Float32s())...), nil
}

// serveScenario: QuantizeFile a table to int8, then to int4 over it, then
// Save the int4 table to a second file.
func serveScenario() scenario {
	read := func(path string) ([]byte, error) {
		st, err := serve.Open(path, "t.weight")
		if err != nil {
			return nil, err
		}
		defer st.Close()
		return os.ReadFile(path)
	}
	return scenario{
		name: "serve file",
		run: func(t *testing.T, dir string, mark func([]byte)) {
			// The source lives outside the recorded tree.
			src := filepath.Join(t.TempDir(), "t.safetensors")
			if err := table.Create(src, "t", vocab, dim, tensor.Float32, table.WithSeed(6)); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(dir, "q.safetensors")
			for _, f := range []serve.Format{serve.Int8, serve.Int4} {
				if err := serve.QuantizeFile(dst, src, "t.weight", f); err != nil {
					t.Fatal(err)
				}
				b, err := read(dst)
				if err != nil {
					t.Fatal(err)
				}
				mark(b)
			}
			st, err := serve.Open(dst, "t.weight")
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.Save(dst+".copy", "t.weight"); err != nil {
				t.Fatal(err)
			}
			mark(nil)
		},
		read: func(dir string) ([]byte, error) {
			b, err := read(filepath.Join(dir, "q.safetensors"))
			if err != nil {
				return nil, err
			}
			if c, err := read(filepath.Join(dir, "q.safetensors.copy")); err == nil {
				b = append(b, c...)
			}
			return b, nil
		},
	}
}

// wordvecScenario: Write word vectors, then others over them.
func wordvecScenario() scenario {
	read := func(path string) ([]byte, error) {
		words, vecs, err := wordvec.Read(path)
		if err != nil {
			return nil, err
		}
		b := []byte(fmt.Sprint(words))
		return append(b, fileio.LittleEndianBytes(vecs.Float32s())...), nil
	}
	return scenario{
		name: "word vectors",
		run: func(t *testing.T, dir string, mark func([]byte)) {
			path := filepath.Join(dir, "v.txt")
			for round := range 2 {
				v := make([]float32, 3*dim)
				for i := range v {
					v[i] = float32(i*(round+1)) / 7
				}
				if err := wordvec.Write(path, []string{"a", "b", fmt.Sprint("c", round)}, tensor.New(tensor.WithShape(3, dim), tensor.WithBacking(v)), round == 1); err != nil {
					t.Fatal(err)
				}
				b, err := read(path)
				if err != nil {
					t.Fatal(err)
				}
				mark(b)
			}
		},
		read: func(dir string) ([]byte, error) { return read(filepath.Join(dir, "v.txt")) },
	}
}
