package metrics

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/gathergrad/gather/internal/errs"
)

// fixture is a case of testdata/fixtures.json: scikit-learn's
// roc_auc_score and log_loss of the scores and labels (gen.py), NE and
// calibration transcribed in NumPy.
type fixture struct {
	Name        string
	Scores      []float32
	Labels      []float32
	AUC         float64
	LogLoss     float64 `json:"log_loss"`
	NE          float64
	Calibration float64
}

func fixtures(t *testing.T) []fixture {
	b, err := os.ReadFile("testdata/fixtures.json")
	if err != nil {
		t.Fatal(err)
	}
	var fs []fixture
	if err := json.Unmarshal(b, &fs); err != nil {
		t.Fatal(err)
	}
	return fs
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol*max(1, math.Abs(want)) }

// Window and Lifetime agree with scikit-learn on its fixtures: the
// window's AUC exactly (to rounding), the binned AUC within its bound,
// log loss, NE and calibration to rounding; fed in batches of any size.
func TestAgainstScikitLearn(t *testing.T) {
	for _, f := range fixtures(t) {
		for _, batch := range []int{1, 7, len(f.Scores)} {
			m, err := NewBinary(Options{Window: len(f.Scores), Bins: 1000})
			if err != nil {
				t.Fatal(err)
			}
			for lo := 0; lo < len(f.Scores); lo += batch {
				hi := min(lo+batch, len(f.Scores))
				if err := m.Update(f.Scores[lo:hi], f.Labels[lo:hi]); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range []Report{m.Window(), m.Lifetime()} {
				if r.Examples != int64(len(f.Scores)) || !near(r.LogLoss, f.LogLoss, 1e-9) || !near(r.NE, f.NE, 1e-9) || !near(r.Calibration, f.Calibration, 1e-9) {
					t.Fatalf("%s, batches of %d: %+v, want log loss %v NE %v calibration %v", f.Name, batch, r, f.LogLoss, f.NE, f.Calibration)
				}
				if math.Abs(r.BinnedAUC-f.AUC) > r.AUCBound+1e-12 {
					t.Fatalf("%s: binned AUC %v is %v from %v, past its bound %v", f.Name, r.BinnedAUC, r.BinnedAUC-f.AUC, f.AUC, r.AUCBound)
				}
			}
			if w := m.Window(); !near(w.AUC, f.AUC, 1e-12) {
				t.Fatalf("%s: window AUC %v, scikit-learn %v", f.Name, w.AUC, f.AUC)
			}
		}
	}
}

// The window holds the latest examples only: after a stream of
// examples, Window equals a Binary fed the last Window of them alone,
// while Lifetime counts them all.
func TestWindow(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	scores, labels := make([]float32, 2500), make([]float32, 2500)
	for k := range scores {
		scores[k] = r.Float32()
		if r.Float32() < scores[k] {
			labels[k] = 1
		}
	}
	m, _ := NewBinary(Options{Window: 1000})
	for lo := 0; lo < len(scores); lo += 300 {
		hi := min(lo+300, len(scores))
		if err := m.Update(scores[lo:hi], labels[lo:hi]); err != nil {
			t.Fatal(err)
		}
	}
	last, _ := NewBinary(Options{Window: 1000})
	if err := last.Update(scores[1500:], labels[1500:]); err != nil {
		t.Fatal(err)
	}
	if got, want := m.Window(), last.Window(); got != want {
		t.Fatalf("window %+v, want %+v", got, want)
	}
	if m.Lifetime().Examples != 2500 {
		t.Fatalf("lifetime %+v", m.Lifetime())
	}
}

// Bad input is an error naming it, and nothing is added; a report
// without both classes has no AUC.
func TestBinaryErrors(t *testing.T) {
	m, _ := NewBinary(Options{Window: 10})
	for _, c := range []struct {
		scores, labels []float32
		err            error
		want           string
	}{
		{[]float32{0.5}, nil, errs.ErrShape, "1 scores for 0 labels"},
		{[]float32{0.5, 1.5}, []float32{0, 1}, errs.ErrOption, "scores[1] = 1.5"},
		{[]float32{float32(math.NaN())}, []float32{0}, ErrNotFinite, "scores[0] = NaN"},
		{[]float32{0.5, float32(math.Inf(-1))}, []float32{0, 1}, ErrNotFinite, "scores[1] = -Inf"},
		{[]float32{0.5}, []float32{2}, errs.ErrOption, "labels[0] = 2"},
	} {
		if err := m.Update(c.scores, c.labels); !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: %v, want %v naming %q", c.scores, c.labels, err, c.err, c.want)
		}
	}
	if m.Lifetime().Examples != 0 || m.Window().Examples != 0 {
		t.Fatal("refused examples were added")
	}
	if err := m.Update([]float32{0.3, 0.6}, []float32{1, 1}); err != nil {
		t.Fatal(err)
	}
	if r := m.Window(); !math.IsNaN(r.AUC) || !math.IsNaN(r.NE) || !near(r.Calibration, 0.45, 1e-7) {
		t.Fatalf("clicks only: %+v", r)
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Window: -1}, "Window -1 must be at least 0"},
		{Options{Bins: -2}, "Bins -2 must be at least 0"},
		{Options{Bins: 1 << 30}, "Window 100000 and Bins 1073741824 take 34360538368 bytes, more than MaxBytes (1073741824)"},
		{Options{Window: 1 << 27}, "take 1074061824 bytes"},
	} {
		if _, err := NewBinary(c.o); !errors.Is(err, errs.ErrOption) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want ErrOption naming %q", c.o, err, c.want)
		}
	}
	if _, err := NewBinary(Options{Window: 1 << 26, Bins: 1 << 10}); err != nil {
		t.Fatalf("a Binary within MaxBytes: %v", err)
	}
}

// BenchmarkUpdate is a Binary's update by one batch of the click model
// (512 examples): compare with nn's BenchmarkClickModel.
func BenchmarkUpdate(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	scores, labels := make([]float32, 512), make([]float32, 512)
	for k := range scores {
		scores[k] = r.Float32()
		if r.Float32() < scores[k] {
			labels[k] = 1
		}
	}
	m, _ := NewBinary(Options{})
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Update(scores, labels); err != nil {
			b.Fatal(err)
		}
	}
}

// The binned AUC's bound is attained: positives just above negatives in
// one bin are ordered exactly (AUC 1) but binned as ties (0.5).
func TestBinnedBound(t *testing.T) {
	m, _ := NewBinary(Options{Window: 4, Bins: 1000})
	if err := m.Update([]float32{0.0001, 0.0002, 0.0003, 0.0004}, []float32{0, 0, 1, 1}); err != nil {
		t.Fatal(err)
	}
	r := m.Window()
	if r.AUC != 1 || r.BinnedAUC != 0.5 || r.AUCBound != 0.5 {
		t.Fatalf("%+v: want AUC 1, binned 0.5, bound 0.5", r)
	}
}

// Regression's RMSE and MAE are the definitions over every batch; bad
// batches are refused and add nothing; before any example they are NaN.
func TestRegression(t *testing.T) {
	var r Regression
	if !math.IsNaN(r.RMSE()) || !math.IsNaN(r.MAE()) {
		t.Fatalf("before any example: %v %v", r.RMSE(), r.MAE())
	}
	p := []float32{1, 2.5, -1, 4}
	y := []float32{1.5, 2, 0, 7}
	if err := r.Update(p[:2], y[:2]); err != nil {
		t.Fatal(err)
	}
	if err := r.Update(p[2:], y[2:]); err != nil {
		t.Fatal(err)
	}
	if err := r.Update([]float32{1}, []float32{1, 2}); !errors.Is(err, errs.ErrShape) {
		t.Fatalf("lengths: %v", err)
	}
	if err := r.Update([]float32{1, float32(math.NaN())}, []float32{1, 2}); !errors.Is(err, ErrNotFinite) || !strings.Contains(err.Error(), "example 1") {
		t.Fatalf("NaN: %v", err)
	}
	var sq, abs float64
	for i := range p {
		d := float64(p[i] - y[i])
		sq, abs = sq+d*d, abs+math.Abs(d)
	}
	if r.Examples() != 4 || math.Abs(r.RMSE()-math.Sqrt(sq/4)) > 1e-12 || math.Abs(r.MAE()-abs/4) > 1e-12 {
		t.Fatalf("examples %d, RMSE %v, MAE %v; want 4, %v, %v", r.Examples(), r.RMSE(), r.MAE(), math.Sqrt(sq/4), abs/4)
	}
	r.Reset()
	if r.Examples() != 0 {
		t.Fatal("Reset kept examples")
	}
}
