package onnx

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/onnxpb"
)

// ONNX's backend conformance suite, as Debian's libonnx-testdata installs
// it.
const (
	suiteDir     = "/usr/share/libonnx-testdata/data"
	suiteInstall = "apt-get install -y libonnx-testdata"
	// suiteRequire makes a missing suite a failure instead of a skip
	// (.ci/run sets it).
	suiteRequire = "GATHER_REQUIRE_ONNX_SUITE"
)

// The suite's counts that the package doc states: its models whose every
// operator Ops lists, those Import reads and runs to the suite's outputs,
// and those it refuses.
const (
	suiteInScope = 177
	suitePass    = 94
	suiteRefused = 83
)

// Every model of ONNX's conformance suite whose operators Ops lists is
// imported and run on each of its data sets to the suite's outputs, or
// refused by Import with ErrOption or ErrDtype naming why; none gives a
// wrong answer, none fails or panics as it runs. The counts are the
// package doc's.
func TestConformance(t *testing.T) {
	if _, err := os.Stat(suiteDir); err != nil {
		msg := fmt.Sprintf("ONNX's conformance suite is not at %s (%v); install: %s", suiteDir, err, suiteInstall)
		if os.Getenv(suiteRequire) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	models, err := filepath.Glob(filepath.Join(suiteDir, "*", "*", "model.onnx"))
	if err != nil || len(models) < 1000 {
		t.Fatalf("%d models in %s: %v", len(models), suiteDir, err)
	}
	known := map[string]bool{}
	for _, o := range Ops() {
		known[o] = true
	}
	var inScope, pass int
	var passing []suiteCase
	refused := map[string][]string{}
	for _, path := range models {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var mp onnxpb.ModelProto
		if err := proto.Unmarshal(b, &mp); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ours := true
		for _, n := range mp.GetGraph().GetNode() {
			if d := n.GetDomain(); (d != "" && d != "ai.onnx") || !known[n.GetOpType()] {
				ours = false
			}
		}
		if !ours {
			continue
		}
		inScope++
		dir := filepath.Dir(path)
		name := filepath.Base(filepath.Dir(dir)) + "/" + filepath.Base(dir)
		m, err := Import(b, Options{})
		if err != nil {
			if !errors.Is(err, errs.ErrOption) && !errors.Is(err, errs.ErrDtype) {
				t.Errorf("%s: refused without a documented reason: %v", name, err)
			}
			reason := refusal(err)
			refused[reason] = append(refused[reason], name)
			continue
		}
		if err := runSuiteModel(m, dir); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		pass++
		passing = append(passing, suiteCase{name, dir, b})
	}
	var reasons []string
	n := 0
	for r, names := range refused {
		reasons = append(reasons, fmt.Sprintf("%3d %s (%s)", len(names), r, strings.Join(names, " ")))
		n += len(names)
	}
	sort.Strings(reasons)
	t.Logf("%d models in the suite, %d of operators Ops lists: %d pass, %d refused:\n%s", len(models), inScope, pass, n, strings.Join(reasons, "\n"))
	if inScope != suiteInScope || pass != suitePass || n != suiteRefused {
		t.Errorf("%d in scope, %d pass, %d refused; the doc says %d, %d, %d", inScope, pass, n, suiteInScope, suitePass, suiteRefused)
	}
	// The exports run in ONNX Runtime in the full runs; -short (the
	// kernel variants of .ci/run) imports them again only.
	ort := !testing.Short() && exec.Command("node", "-e", "require('onnxruntime-node')").Run() == nil
	switch {
	case testing.Short():
	case !ort && os.Getenv(ortRequire) != "":
		t.Errorf("node cannot load onnxruntime-node; install: %s", ortInstall)
	case !ort:
		t.Logf("the exports are not run by ONNX Runtime: node cannot load onnxruntime-node; install: %s", ortInstall)
	}
	for _, c := range passing {
		t.Run("export/"+c.name, func(t *testing.T) { exportSuiteModel(t, c, ort) })
	}
}

// A suiteCase is a model of the suite that Import reads.
type suiteCase struct {
	name, dir string
	model     []byte
}

// exportSuiteModel exports the model of c imported, imports the file
// again and requires its outputs on c's first data set to be the first
// import's bit for bit; with ort, ONNX Runtime runs the file to the
// suite's outputs too.
func exportSuiteModel(t *testing.T, c suiteCase, ort bool) {
	m, err := Import(c.model, Options{})
	if err != nil {
		t.Fatal(err)
	}
	set := filepath.Join(c.dir, "test_data_set_0")
	var in []*tensor.Dense
	names := make([]string, len(m.Inputs))
	for k, n := range m.Inputs {
		v, err := readSuiteTensor(filepath.Join(set, fmt.Sprintf("input_%d.pb", k)))
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, v)
		names[k] = n.Name()
	}
	want := run(t, m, in...)
	path := filepath.Join(t.TempDir(), "model.onnx")
	g := graphOf(m)
	if err := Export(path, g); err != nil {
		t.Fatal(err)
	}
	back, err := ReadFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := run(t, back, in...)
	for k := range want {
		if !got[k].Shape().Eq(want[k].Shape()) || !equalData(got[k].Data(), want[k].Data()) {
			t.Fatalf("output %d imported again: %v %v, want %v %v", k, got[k].Shape(), got[k].Data(), want[k].Shape(), want[k].Data())
		}
	}
	if !ort {
		return
	}
	outs := runORT(t, path, names, in)
	for k := range m.Outputs {
		w, err := readSuiteTensor(filepath.Join(set, fmt.Sprintf("output_%d.pb", k)))
		if err != nil {
			t.Fatal(err)
		}
		o, ok := outs[g.OutputNames[k]]
		wv := suiteFloats(w.Data())
		if !ok || len(o) != len(wv) {
			t.Fatalf("output %d: ONNX Runtime gave %d values, the suite %d", k, len(o), len(wv))
		}
		for i := range wv {
			if math.Abs(o[i]-wv[i]) > 1e-7+1e-3*math.Abs(wv[i]) && !(math.IsNaN(o[i]) && math.IsNaN(wv[i])) {
				t.Fatalf("output %d, value %d: ONNX Runtime %v, the suite %v", k, i, o[i], wv[i])
			}
		}
	}
}

// refusal returns the kind of reason err gives: its text after the node's
// name, up to the first detail that names a value.
func refusal(err error) string {
	s := err.Error()
	for _, r := range []struct{ has, reason string }{
		{"element type", "an element type Import does not read"},
		{"with attribute", "an attribute Import does not read"},
		{"must be an initializer or a Constant", "a shape or axes computed when the graph runs"},
		{"Import reads MatMul of matrices", "MatMul of other ranks"},
		{"Cast of", "a Cast to another type"},
		{"outputs; Import reads nodes of one", "a node of several outputs"},
		{"allowzero", "Reshape's allowzero"},
		{"not a tensor: Import reads tensor inputs", "an optional or sequence input"},
		{"of the default domain; Import reads 13 to 17", "an opset outside 13 to 17"},
	} {
		if strings.Contains(s, r.has) {
			return r.reason
		}
	}
	return s
}

// runSuiteModel runs m on each data set in dir and compares its outputs
// to the set's, as onnx's backend tests do (rtol 1e-3, atol 1e-7); a
// panic is an error.
func runSuiteModel(m *Model, dir string) (err error) {
	sets, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
	if len(sets) == 0 {
		return fmt.Errorf("no data sets")
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	for _, set := range sets {
		var in []*tensor.Dense
		for k := range m.Inputs {
			v, err := readSuiteTensor(filepath.Join(set, fmt.Sprintf("input_%d.pb", k)))
			if err != nil {
				return err
			}
			in = append(in, v)
		}
		for k, n := range m.Inputs {
			if err := gorgonia.Let(n, in[k]); err != nil {
				return fmt.Errorf("%s: input %d: %v", filepath.Base(set), k, err)
			}
		}
		vm := gorgonia.NewTapeMachine(m.Graph)
		err := vm.RunAll()
		vm.Close()
		if err != nil {
			return fmt.Errorf("%s: run: %v", filepath.Base(set), err)
		}
		for k, n := range m.Outputs {
			want, err := readSuiteTensor(filepath.Join(set, fmt.Sprintf("output_%d.pb", k)))
			if err != nil {
				return err
			}
			if err := suiteClose(n.Value(), want); err != nil {
				return fmt.Errorf("%s: output %d: %v", filepath.Base(set), k, err)
			}
		}
	}
	return nil
}

func readSuiteTensor(path string) (*tensor.Dense, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p onnxpb.TensorProto
	if err := proto.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return decode(&p)
}

// suiteClose reports how got differs from want: shape (a scalar and a
// one-element tensor of no dims alike), dtype, or a value beyond onnx's
// tolerance.
func suiteClose(got gorgonia.Value, want *tensor.Dense) error {
	gs, ws := got.Shape(), want.Shape()
	if !slices.Equal([]int(gs), []int(ws)) && !(gs.TotalSize() == 1 && ws.TotalSize() == 1 && len(gs) == 0 || len(ws) == 0 && gs.TotalSize() == 1) {
		return fmt.Errorf("shape %v, want %v", gs, ws)
	}
	if got.Dtype() != want.Dtype() {
		return fmt.Errorf("dtype %v, want %v", got.Dtype(), want.Dtype())
	}
	g, w := suiteFloats(got.Data()), suiteFloats(want.Data())
	if len(g) != len(w) {
		return fmt.Errorf("%d values, want %d", len(g), len(w))
	}
	for i := range w {
		if math.IsNaN(w[i]) && math.IsNaN(g[i]) || g[i] == w[i] {
			continue
		}
		if math.Abs(g[i]-w[i]) > 1e-7+1e-3*math.Abs(w[i]) {
			return fmt.Errorf("value %d: %v, want %v", i, g[i], w[i])
		}
	}
	return nil
}

func suiteFloats(d any) []float64 {
	switch v := d.(type) {
	case float32:
		return []float64{float64(v)}
	case float64:
		return []float64{v}
	case int64:
		return []float64{float64(v)}
	case int32:
		return []float64{float64(v)}
	case int:
		return []float64{float64(v)}
	case []float32:
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out
	case []float64:
		return v
	case []int64:
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out
	case []int32:
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out
	case []int:
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out
	}
	return nil
}
