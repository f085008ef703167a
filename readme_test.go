package gather_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/machine"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/serve"
	"github.com/gathergrad/gather/table"
)

// readmeErrors produces the error of each row of docs/errors.md's table of
// error messages, keyed by the row's first column.
var readmeErrors = map[string]func() error{
	"index out of range": func() error {
		_, err := gather.Take(f64(5, 2), ints([]int{3, 2}, 0, 0, 7, 1, 2, 3), 0)
		return err
	},
	"extreme index (beyond int32, int64 min/max)": func() error {
		_, err := gather.Take(f64(5, 2), tensor.New(tensor.WithShape(1), tensor.WithBacking([]int64{math.MinInt64})), 0)
		return err
	},
	"index into an axis of size 0": func() error {
		g := gorgonia.NewGraph()
		d := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(0, 2), gorgonia.WithName("d"))
		i := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(1), gorgonia.WithName("i"))
		_, err := gather.Gather(d, i, 0)
		return err
	},
	"same, tensor API": func() error {
		_, err := gather.Take(f64(0, 2), ints([]int{1}, 0), 0)
		return err
	},
	"wrong index dtype": func() error {
		_, err := gather.Take(f64(5, 2), f64(2), 0)
		return err
	},
	"bad axis": func() error {
		_, err := gather.Take(f64(5, 2), ints([]int{1}, 0), 2)
		return err
	},
	"scalar data": func() error {
		_, err := gather.Take(tensor.New(tensor.FromScalar(1.0)), ints([]int{1}, 0), 0)
		return err
	},
	"rank mismatch (GatherElements)": func() error {
		_, err := gather.TakeAlongAxis(f64(5, 2), ints([]int{2}, 0, 1), 0)
		return err
	},
	"indices larger than data (GatherElements)": func() error {
		_, err := gather.TakeAlongAxis(f64(5, 2), ints([]int{1, 3}, 0, 1, 0), 0)
		return err
	},
	"gradient of non-float data": func() error {
		g := gorgonia.NewGraph()
		d := gorgonia.NewMatrix(g, tensor.Int64, gorgonia.WithShape(5, 2), gorgonia.WithName("d"))
		i := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(1), gorgonia.WithName("i"))
		out, err := gather.Gather(d, i, 0)
		if err != nil {
			return err
		}
		// gorgonia.Grad skips integer nodes; an op asked for the gradient
		// (as a caller of SymDiff may) says why there is none.
		_, err = out.Op().(gorgonia.SDOp).SymDiff(gorgonia.Nodes{d, i}, out, out)
		return err
	},
	"upstream gradient of the wrong shape": func() error {
		return gather.IndexAdd(f32(3, 2), ints([]int{3}, 0, 1, 2), f32(2, 2), 0)
	},
	"backward into a view": func() error {
		big := f64(3, 8)
		v, err := big.Slice(nil, tensor.S(0, 4))
		if err != nil {
			return err
		}
		return gather.IndexAdd(v.(*tensor.Dense), ints([]int{1}, 0), f64(1, 4), 0)
	},
	"nil tensor": func() error {
		_, err := gather.Take(nil, ints([]int{1}, 0), 0)
		return err
	},
	"a tensor other than `*tensor.Dense` (e.g. sparse `*tensor.CS`)": func() error {
		cs := tensor.CSCFromCoord(tensor.Shape{2, 2}, []int{0}, []int{0}, []float64{1})
		_, err := gather.Take(cs, ints([]int{1}, 0), 0)
		return err
	},
	"`CrossEntropy` target out of range": func() error {
		return runGraph(func(g *gorgonia.ExprGraph) error {
			x := gorgonia.NodeFromAny(g, f64(2, 3), gorgonia.WithName("x"))
			y := gorgonia.NodeFromAny(g, ints([]int{2}, 0, 3), gorgonia.WithName("y"))
			_, err := nn.CrossEntropy(x, y)
			return err
		})
	},
	"`Take(..., tensor.WithReuse(out))` with `out` of the wrong shape": func() error {
		_, err := gather.Take(f64(5, 2), ints([]int{2}, 0, 1), 0, tensor.WithReuse(f64(4)))
		return err
	},
	"`WithReuse` and `WithIncr` together": func() error {
		out := f64(2, 2)
		_, err := gather.Take(f64(5, 2), ints([]int{2}, 0, 1), 0, tensor.WithReuse(out), tensor.WithIncr(out))
		return err
	},
	"padding index out of range": func() error {
		g := gorgonia.NewGraph()
		d := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(5, 2), gorgonia.WithName("d"))
		i := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(1), gorgonia.WithName("i"))
		_, err := gather.Gather(d, i, 0, gather.WithPaddingIndex(9))
		return err
	},
	"index out of range in a named Gather": func() error {
		return runGraph(func(g *gorgonia.ExprGraph) error {
			d := gorgonia.NodeFromAny(g, f64(5, 2), gorgonia.WithName("d"))
			i := gorgonia.NodeFromAny(g, ints([]int{1}, -6), gorgonia.WithName("i"))
			_, err := gather.Gather(d, i, 0, gather.WithName("rows"))
			return err
		})
	},
	"id out of range in an `nn` lookup": func() error { return lookup(0, 9) },
	"negative id in an `nn` lookup":     func() error { return lookup(0, 1, -1) },
	"a table name already in the graph": func() error {
		g := gorgonia.NewGraph()
		if _, err := nn.NewEmbedding(g, "words", 5, 2, tensor.Float64); err != nil {
			return err
		}
		_, err := nn.NewEmbedding(g, "words", 5, 2, tensor.Float64)
		return err
	},
	"`WithFrozen` with `WithSparse`": func() error {
		_, err := nn.NewEmbedding(gorgonia.NewGraph(), "words", 5, 2, tensor.Float64, nn.WithFrozen(), nn.WithSparse())
		return err
	},
	"`Step` before the graph ran": func() error {
		g := gorgonia.NewGraph()
		emb, err := nn.NewEmbedding(g, "words", 5, 2, tensor.Float64, nn.WithSparse())
		if err != nil {
			return err
		}
		v, err := emb.Lookup(gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(2), gorgonia.WithName("ids")))
		if err != nil {
			return err
		}
		if _, err := gorgonia.Grad(gorgonia.Must(gorgonia.Sum(v)), emb.GradNodes()...); err != nil {
			return err
		}
		return emb.Step(context.Background(), &optim.SparseSGD{LearnRate: 0.1})
	},
	"`Step` again with no run since": func() error {
		g := gorgonia.NewGraph()
		emb, err := nn.NewEmbedding(g, "words", 5, 2, tensor.Float64, nn.WithSparse())
		if err != nil {
			return err
		}
		ids := gorgonia.NewVector(g, tensor.Int, gorgonia.WithShape(2), gorgonia.WithName("ids"), gorgonia.WithValue(ints([]int{2}, 1, 3)))
		v, err := emb.Lookup(ids)
		if err != nil {
			return err
		}
		if _, err := gorgonia.Grad(gorgonia.Must(gorgonia.Sum(v)), emb.GradNodes()...); err != nil {
			return err
		}
		vm, err := machine.New(g)
		if err != nil {
			return err
		}
		if err := vm.RunAll(); err != nil {
			return err
		}
		sgd := &optim.SparseSGD{LearnRate: 0.1}
		if err := emb.Step(context.Background(), sgd); err != nil {
			return err
		}
		return emb.Step(context.Background(), sgd)
	},
	"a nil node in `WithGrads`": func() error {
		g := gorgonia.NewGraph()
		gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("x"), gorgonia.WithValue(1.0))
		_, err := machine.New(g, machine.WithGrads(nil))
		return err
	},
	"a node of another graph in `WithGrads` / `Keep`": func() error {
		g := gorgonia.NewGraph()
		gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("x"), gorgonia.WithValue(1.0))
		w := gorgonia.NewScalar(gorgonia.NewGraph(), tensor.Float64, gorgonia.WithName("w"), gorgonia.WithValue(1.0))
		_, err := machine.New(g, machine.WithGrads(w))
		return err
	},
	"a write onto its source under another name": func() error {
		dir, err := os.MkdirTemp("", "readme-same")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "t.safetensors")
		if err := table.Create(path, "t", 4, 2, tensor.Float32); err != nil {
			return err
		}
		if err := os.Link(path, filepath.Join(dir, "hard")); err != nil {
			return err
		}
		return serve.QuantizeFile(filepath.Join(dir, "hard"), path, "t.weight", serve.Int8)
	},
	"a tensor the file lacks": func() error {
		dir, err := os.MkdirTemp("", "readme-lacks")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "t.safetensors")
		if err := table.Create(path, "words", 4, 2, tensor.Float32); err != nil {
			return err
		}
		_, err = serve.Open(path, "emb")
		return err
	},
	"an int4 row whose float16 bias would overflow": func() error {
		_, err := serve.Quantize([]float32{1, 2, 3, -70000}, 2, serve.Int4)
		return err
	},
	"learning rate negative or not finite": func() error {
		return (&optim.SparseSGD{LearnRate: math.NaN()}).StepRows(optim.Rows{Weight: f64(2, 2), Step: 1}, &optim.RowGrad{Rows: []int64{0}, Values: f64(1, 2)})
	},
	"decreasing bag offsets": func() error {
		return runGraph(func(g *gorgonia.ExprGraph) error {
			t := gorgonia.NodeFromAny(g, f64(5, 2), gorgonia.WithName("t"))
			i := gorgonia.NodeFromAny(g, ints([]int{4}, 0, 1, 2, 3), gorgonia.WithName("i"))
			o := gorgonia.NodeFromAny(g, ints([]int{3}, 0, 3, 2), gorgonia.WithName("o"))
			_, err := nn.EmbeddingBag(t, i, o, nil, nn.BagSum)
			return err
		})
	},
	"id out of range in a bag of an `nn` table": func() error {
		return runGraph(func(g *gorgonia.ExprGraph) error {
			emb, err := nn.NewEmbedding(g, "words", 5, 2, tensor.Float64)
			if err != nil {
				return err
			}
			i := gorgonia.NodeFromAny(g, ints([]int{4}, 0, 1, 9, 3), gorgonia.WithName("i"))
			o := gorgonia.NodeFromAny(g, ints([]int{2}, 0, 2), gorgonia.WithName("o"))
			_, err = emb.Bag(i, o, nil, nn.BagMean)
			return err
		})
	},
	"a table stepped by a second optimiser": func() error {
		g := &optim.RowGrad{Rows: []int64{0}, Values: f32(1, 4)}
		tab, err := optim.NewMemoryTable(f32(10, 4), optim.NewSparseAdam(0.1))
		if err != nil {
			return err
		}
		return tab.Step(context.Background(), optim.NewRowWiseAdagrad(0.1), g)
	},
	"`SparseAdam` literal without `Eps`": func() error {
		return (&optim.SparseAdam{LearnRate: 0.1, Beta1: 0.9, Beta2: 0.999}).StepRows(optim.Rows{Weight: f64(2, 2), Step: 1}, &optim.RowGrad{Rows: []int64{0}, Values: f64(1, 2)})
	},
	"row gradient of another dtype than the table": func() error {
		return (&optim.SparseSGD{LearnRate: 0.1}).StepRows(optim.Rows{Weight: f64(2, 2), Step: 1}, &optim.RowGrad{Rows: []int64{0}, Values: f32(1, 2)})
	},
	"`CrossEntropy` targets not shaped like the logits' rows (exactly: `(2, 1)` is not `(2)`)": func() error {
		g := gorgonia.NewGraph()
		x := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(2, 3), gorgonia.WithName("x"))
		y := gorgonia.NewMatrix(g, tensor.Int, gorgonia.WithShape(2, 1), gorgonia.WithName("y"))
		_, err := nn.CrossEntropy(x, y)
		return err
	},
}

// Rows whose input is impractical to build in a test: sizes that
// overflow int need shapes no machine allocates a node for cheaply, and a
// nil node's message prints the other node in full. Their messages are
// produced by the code paths tested in reliability_test.go.
func init() {
	readmeErrors["a save onto the file of an open table"] = func() error {
		path := filepath.Join(os.TempDir(), "readme-inuse.safetensors")
		defer os.Remove(path)
		if err := table.Create(path, "words", 4, 2, tensor.Float32, table.WithReplace()); err != nil {
			return err
		}
		f, err := table.Open(path, "words")
		if err != nil {
			return err
		}
		defer f.Close()
		return checkpoint.Write(path, nil, nil)
	}
	readmeErrors["`table.Create` onto an existing file"] = func() error {
		path := filepath.Join(os.TempDir(), "readme-exists.safetensors")
		defer os.Remove(path)
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			return err
		}
		return table.Create(path, "words", 4, 2, tensor.Float32)
	}
	readmeErrors["a journal that another table left beside a table file"] = func() error {
		dir, err := os.MkdirTemp("", "readme-journal")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "words.safetensors")
		cols := optim.NewRowWiseAdagrad(0.1).Columns(2)
		if err := table.Create(path, "words", 4, 2, tensor.Float32, table.WithState(cols...)); err != nil {
			return err
		}
		// The old table's journal, as a crash leaves it: rows the cache
		// evicted since the last Sync.
		c, err := table.OpenCached(context.Background(), path, table.CacheOptions{Budget: 1 * (3*4 + 72)}, table.FileOptions{})
		if err != nil {
			return err
		}
		slots := make([]int32, 1)
		opt := optim.NewRowWiseAdagrad(0.1)
		for id := range int64(4) {
			c.NewBatch()
			if err := c.Fetch(context.Background(), []int64{id}, slots); err != nil {
				return err
			}
			g := tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float32{1, 1}))
			if err := c.Step(context.Background(), opt, &optim.RowGrad{Rows: []int64{id}, Values: g}); err != nil {
				return err
			}
		}
		journal, err := os.ReadFile(path + ".journal")
		c.Close(context.Background())
		if err != nil {
			return err
		}
		if err := table.Create(path, "words", 4, 2, tensor.Float32, table.WithState(cols...), table.WithReplace()); err != nil {
			return err
		}
		if err := os.WriteFile(path+".journal", journal, 0o644); err != nil {
			return err
		}
		_, err = table.OpenCached(context.Background(), path, table.CacheOptions{Budget: 1 << 10}, table.FileOptions{})
		return err
	}
	readmeErrors["a journal past `JournalLimit` under `ManualSync`"] = func() error {
		dir, err := os.MkdirTemp("", "readme-journal")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "words.safetensors")
		if err := table.Create(path, "words", 100, 2, tensor.Float32); err != nil {
			return err
		}
		c, err := table.OpenCached(context.Background(), path, table.CacheOptions{Budget: 2 * (8 + 72)}, table.FileOptions{JournalLimit: 64, ManualSync: true})
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		slots := make([]int32, 2)
		for id := range int64(50) {
			c.NewBatch()
			if err := c.Fetch(context.Background(), []int64{2 * id, 2*id + 1}, slots); err != nil {
				return err
			}
			g := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 1, 1, 1}))
			if err := c.Step(context.Background(), &optim.SparseSGD{LearnRate: 0.1}, &optim.RowGrad{Rows: []int64{2 * id, 2*id + 1}, Values: g}); err != nil {
				return err
			}
		}
		return nil
	}
	readmeErrors["a checkpoint opened as a table"] = func() error {
		path := filepath.Join(os.TempDir(), "readme-ckpt.safetensors")
		defer os.Remove(path)
		if err := checkpoint.Write(path, map[string]tensor.Tensor{"words.weight": f32(2, 2), "mlp.weight": f32(2, 2)}, nil); err != nil {
			return err
		}
		_, err := table.Open(path, "words")
		return err
	}
	readmeErrors["a model that does not fit the file"] = func() error {
		path := filepath.Join(os.TempDir(), "readme-fit.safetensors")
		defer os.Remove(path)
		if err := checkpoint.Write(path, map[string]tensor.Tensor{"w": f64(2)}, nil); err != nil {
			return err
		}
		g := gorgonia.NewGraph()
		w := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(2), gorgonia.WithName("w"), gorgonia.WithInit(gorgonia.Zeroes()))
		_, err := checkpoint.Load(path, checkpoint.Nodes(w))
		return err
	}
	readmeErrors["corrupt data in a checkpoint"] = func() error {
		path := filepath.Join(os.TempDir(), "readme-crc.safetensors")
		defer os.Remove(path)
		if err := checkpoint.Write(path, map[string]tensor.Tensor{"w": f64(2)}, nil); err != nil {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		raw[len(raw)-1] ^= 1
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			return err
		}
		_, _, err = checkpoint.Read(path)
		return err
	}
	readmeErrors["a NaN gradient under `CheckFinite`"] = func() error {
		g := gorgonia.NewGraph()
		emb, err := nn.NewEmbedding(g, "words", 5, 2, tensor.Float32, nn.WithSparse())
		if err != nil {
			return err
		}
		ids := gorgonia.NodeFromAny(g, tensor.New(tensor.WithBacking([]int{3, 3})), gorgonia.WithName("ids"))
		v, err := emb.Lookup(ids)
		if err != nil {
			return err
		}
		cost := gorgonia.Must(gorgonia.Mul(gorgonia.Must(gorgonia.Sum(v)), gorgonia.NewConstant(float32(math.NaN()))))
		if _, err := gorgonia.Grad(cost, emb.GradNodes()...); err != nil {
			return err
		}
		vm, err := machine.New(g)
		if err != nil {
			return err
		}
		defer vm.Close()
		if err := vm.RunAll(); err != nil {
			return err
		}
		return emb.Step(context.Background(), &optim.SparseSGD{LearnRate: 0.1, CheckFinite: true})
	}
	readmeErrors["an input with no value, on `machine.Machine`"] = func() error {
		g := gorgonia.NewGraph()
		x := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(3), gorgonia.WithName("x"))
		gorgonia.Must(gorgonia.Sum(x))
		vm, err := machine.New(g)
		if err != nil {
			return err
		}
		return vm.RunAll()
	}
	readmeErrors["an input reshaped after `Let`, on `machine.Machine`"] = func() error {
		g := gorgonia.NewGraph()
		xv := f64(2, 3)
		x := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithName("x"), gorgonia.WithValue(xv))
		gorgonia.Must(gorgonia.Sum(x))
		vm, err := machine.New(g)
		if err != nil {
			return err
		}
		if err := xv.Reshape(3, 2); err != nil {
			return err
		}
		return vm.RunAll()
	}
	readmeErrors["a graph with `gorgonia.Set`, on `machine.Machine`"] = func() error {
		g := gorgonia.NewGraph()
		a := gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("a"), gorgonia.WithValue(1.0))
		gorgonia.Set(a, gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("b"), gorgonia.WithValue(2.0)))
		_, err := machine.New(g)
		return err
	}
}

var readmeUnproduced = map[string]bool{
	"size overflowing `int`":        true,
	"output size overflowing `int`": true,
	"nil node":                      true,
}

// Every row of docs/errors.md's table of error messages is produced and matches
// the error's text, so the table cannot drift from the code.
func TestReadmeErrorTable(t *testing.T) {
	raw, err := os.ReadFile("docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "Messages as `err.Error()` prints them")
	end := len(doc)
	if start < 0 {
		t.Fatal("docs/errors.md has no table of error messages")
	}
	row := regexp.MustCompile("^\\| (.+?) \\| [^|]+ \\| `(.+?)`")
	seen := 0
	for _, line := range strings.Split(doc[start:end], "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil || m[1] == "bad input" {
			continue
		}
		seen++
		name, msg := m[1], m[2]
		if readmeUnproduced[name] {
			continue
		}
		produce, ok := readmeErrors[name]
		if !ok {
			t.Errorf("docs/errors.md row %q: no test produces it", name)
			continue
		}
		err := produce()
		if err == nil {
			t.Errorf("docs/errors.md row %q: no error", name)
			continue
		}
		if !matchesElided(err.Error(), msg) {
			t.Errorf("docs/errors.md row %q:\n got %s\nwant %s", name, err.Error(), msg)
		}
	}
	if seen < len(readmeErrors) {
		t.Errorf("docs/errors.md has %d rows, the test produces %d", seen, len(readmeErrors))
	}
}

// matchesElided reports whether got contains want, where "..." in want
// stands for any text (the table shortens nodes printed in full).
func matchesElided(got, want string) bool {
	parts := strings.Split(want, "...")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile(strings.Join(parts, ".*")).MatchString(got)
}

func f64(shape ...int) *tensor.Dense {
	return tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(shape...))
}

func f32(shape ...int) *tensor.Dense {
	return tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(shape...))
}

func ints(shape []int, v ...int) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
}

// runGraph builds a graph with build and runs it, returning the error of
// either, as gather.Cause finds it.
func runGraph(build func(*gorgonia.ExprGraph) error) error {
	g := gorgonia.NewGraph()
	if err := build(g); err != nil {
		return err
	}
	vm, err := machine.New(g)
	if err != nil {
		return err
	}
	defer vm.Close()
	return gather.Cause(vm.RunAll())
}

// lookup runs a lookup of ids in a 5-row table named words.
func lookup(ids ...int) error {
	return runGraph(func(g *gorgonia.ExprGraph) error {
		emb, err := nn.NewEmbedding(g, "words", 5, 2, tensor.Float32)
		if err != nil {
			return err
		}
		_, err = emb.Lookup(gorgonia.NodeFromAny(g, ints([]int{len(ids)}, ids...), gorgonia.WithName("ids")))
		return err
	})
}

// The comment after each sentinel in errors.go gives its text.
func TestSentinelTextsMatchTheirComments(t *testing.T) {
	src, err := os.ReadFile("errors.go")
	if err != nil {
		t.Fatal(err)
	}
	sentinels := map[string]error{
		"ErrIndexOutOfRange": gather.ErrIndexOutOfRange, "ErrAxisOutOfRange": gather.ErrAxisOutOfRange,
		"ErrShape": gather.ErrShape, "ErrDtype": gather.ErrDtype, "ErrOption": gather.ErrOption, "ErrGraph": gather.ErrGraph,
	}
	decl := regexp.MustCompile(`(?m)^\t(Err\w+) = err\w+\(\) // "([^"]+)"$`)
	found := decl.FindAllStringSubmatch(string(src), -1)
	if len(found) != len(sentinels) {
		t.Fatalf("errors.go declares %d sentinels with a text comment, want %d", len(found), len(sentinels))
	}
	for _, m := range found {
		if got := sentinels[m[1]].Error(); got != m[2] {
			t.Errorf("%s.Error() = %q, its comment says %q", m[1], got, m[2])
		}
	}
}
