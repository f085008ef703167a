package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/metrics"
)

// freshConfig is the freshness experiment's (-fresh).
type freshConfig struct {
	intervals []time.Duration // between deltas; 0: never (the base alone)
	duration  time.Duration   // the stream's time a run
	rate      float64         // batches a second
	warm      int             // steps trained before the base is saved
}

// parseIntervals reads -fresh: durations separated by commas, "never" for
// no delta.
func parseIntervals(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		if f == "never" {
			out = append(out, 0)
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("-fresh: %q is neither a positive duration nor never", f)
		}
		out = append(out, d)
	}
	return out, nil
}

// seconds writes d as the fresh line names it: "1s", "60s", "0.25s",
// "never" for 0.
func seconds(d time.Duration) string {
	if d == 0 {
		return "never"
	}
	return strconv.FormatFloat(d.Seconds(), 'g', -1, 64) + "s"
}

// A freshRun is what one run of the experiment measured.
type freshRun struct {
	interval      time.Duration
	auc           float64 // of the server's answers, all of the run's
	steps, deltas int
	late          int // steps that started more than a batch's time late
	rep           serverReport
	checked, torn int
	answers       []answer // a batch's
}

// runFresh is -fresh: for each interval, the dynamic model trains for
// c.warm steps, is saved as the base, and a server process (serveProcess)
// loads it; then for f.duration the stream comes at f.rate batches a
// second, each batch answered by the server first (its AUC is the
// run's) and then trained on, and every interval the rows training
// changed are published as a delta the server applies while answering.
// Afterwards a checker rebuilds every version from the files and scores
// each batch again with the version its answer named: an answer that
// differs in any bit is torn. It prints a line a run and the fresh line.
func runFresh(w io.Writer, c config, f freshConfig) error {
	if len(f.intervals) == 0 || f.duration <= 0 || !(f.rate > 0) || f.warm < 0 || c.batch < 1 || c.dim < 1 || c.live < 2 || c.rows < 2 || c.admit < 1 || c.churn < 0 {
		return fmt.Errorf("stream -fresh: intervals %v, duration %v, rate %g, warm %d, batch %d, dim %d, live %d, rows %d, admit %d, churn %d: each must be positive (warm, churn may be 0; live, rows at least 2)",
			f.intervals, f.duration, f.rate, f.warm, c.batch, c.dim, c.live, c.rows, c.admit, c.churn)
	}
	fmt.Fprintf(w, "fresh: %d-step warm-up, then %v of the stream at %g batches of %d a second; deltas every %v; tables of %d rows of %d\n",
		f.warm, f.duration, f.rate, c.batch, f.intervals, c.rows, c.dim)
	var runs []freshRun
	for _, iv := range f.intervals {
		dir, err := os.MkdirTemp("", "stream-fresh-")
		if err != nil {
			return err
		}
		r, err := freshOnce(dir, c, f, iv)
		os.RemoveAll(dir)
		if err != nil {
			return fmt.Errorf("deltas every %s: %w", seconds(iv), err)
		}
		fmt.Fprintf(w, "every %s: auc %.4f steps %d late %d deltas %d rows-a-delta %.0f lag-p99 %.3f apply-ms-per-1k %.3f torn %d of %d\n",
			seconds(iv), r.auc, r.steps, r.late, r.deltas, float64(r.rep.Rows)/float64(max(r.rep.Deltas, 1)),
			lagP99(r.rep), applyPer1k(r.rep), r.torn, r.checked)
		runs = append(runs, r)
	}
	first, torn := runs[0], 0
	fmt.Fprintf(w, "fresh: lag-p99 %.3f apply-ms-per-1k %.3f", lagP99(first.rep), applyPer1k(first.rep))
	for _, r := range runs {
		fmt.Fprintf(w, " auc-%s %.4f", seconds(r.interval), r.auc)
		torn += r.torn
	}
	fmt.Fprintf(w, " torn %d\n", torn)
	return nil
}

// lagP99 returns the 99th percentile of the deltas' lags in seconds.
func lagP99(r serverReport) float64 {
	if len(r.LagsNs) == 0 {
		return math.NaN()
	}
	l := slices.Sorted(slices.Values(r.LagsNs))
	return float64(l[(len(l)-1)*99/100]) / 1e9
}

// applyPer1k returns the server's apply time in ms per 1,000 rows.
func applyPer1k(r serverReport) float64 {
	if r.Rows == 0 {
		return math.NaN()
	}
	return float64(r.ApplyNs) / 1e6 / float64(r.Rows) * 1000
}

// An answer is what the server said of a batch: the version it read and
// a hash of the probabilities' bits.
type answer struct {
	seq  uint64
	hash uint64
}

func hashOf(p []float32) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, v := range p {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
		h.Write(b[:])
	}
	return h.Sum64()
}

// freshOnce runs the experiment once with deltas every iv (0: none), its
// files in dir.
func freshOnce(dir string, c config, f freshConfig, iv time.Duration) (freshRun, error) {
	r := freshRun{interval: iv}
	m, err := newModel(dynamic, c.batch, c.dim, [2]int{c.rows / 2, c.rows}, c.admit, c.batch)
	if err != nil {
		return r, err
	}
	defer m.close()
	s := newClickStream(1, c.live, c.churn)
	ids := [2][]int64{make([]int64, c.batch), make([]int64, c.batch)}
	clicks := make([]float32, c.batch)
	for step := range f.warm {
		s.next(ids[0], ids[1], clicks)
		if err := m.step(int64(step), ids, clicks); err != nil {
			return r, err
		}
	}
	const base = 1
	if err := checkpoint.Save(filepath.Join(dir, "base.safetensors"), map[string]string{"base": strconv.Itoa(base)},
		m.embs[0], m.embs[1], m.maps[0], m.maps[1], checkpoint.Nodes(m.dense...)); err != nil {
		return r, err
	}
	for _, e := range m.embs {
		e.TrackChanges()
	}
	srv, err := startServer(dir, "")
	if err != nil {
		return r, err
	}
	defer srv.kill()

	quality, err := metrics.NewBinary(metrics.Options{Window: (int(f.duration.Seconds()*f.rate) + 1) * c.batch})
	if err != nil {
		return r, err
	}
	p := make([]float32, c.batch)
	gap := time.Duration(float64(time.Second) / f.rate)
	start := time.Now()
	last := start
	for k := 0; ; k++ {
		due := start.Add(time.Duration(k) * gap)
		if due.Sub(start) >= f.duration {
			break
		}
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
		} else if -wait > gap {
			r.late++
		}
		s.next(ids[0], ids[1], clicks)
		seq, err := srv.ask(p, ids)
		if err != nil {
			return r, err
		}
		r.answers = append(r.answers, answer{seq, hashOf(p)})
		if err := quality.Update(p, clicks); err != nil {
			return r, err
		}
		if err := m.step(int64(f.warm+k), ids, clicks); err != nil {
			return r, err
		}
		if iv > 0 && time.Since(last) >= iv {
			if err := publish(dir, m, base, uint64(r.deltas+1)); err != nil {
				return r, err
			}
			r.deltas++
			last = time.Now()
		}
	}
	r.steps = len(r.answers)
	r.auc = quality.Window().AUC // exact, over every answer
	if r.rep, err = srv.finish(); err != nil {
		return r, err
	}
	if r.rep.Deltas != r.deltas || r.rep.Refused != 0 {
		return r, fmt.Errorf("the server applied %d deltas and refused %d of the %d published", r.rep.Deltas, r.rep.Refused, r.deltas)
	}
	r.checked, r.torn, err = check(dir, c, f, r.answers)
	return r, err
}

// publish writes delta seq of base into dir: each table's changed rows and
// new ids, and the linear maps whole, in one file written atomically.
func publish(dir string, m *model, base, seq uint64) error {
	ds := make([]*driver.Delta, len(m.embs))
	for f, e := range m.embs {
		d, err := e.Delta(context.Background(), base, seq)
		if err != nil {
			return err
		}
		d.Table = features[f]
		ds[f] = d
	}
	dense := map[string]tensor.Tensor{}
	for _, n := range m.dense {
		dense[n.Name()] = n.Value().(*tensor.Dense)
	}
	return checkpoint.WriteDeltas(deltaPath(dir, base, seq), ds, dense)
}

// check replays the stream and the versions: each answer's batch is
// scored again, alone, by the version the answer named, rebuilt from the
// base file and the deltas in dir; it returns the answers checked and
// those whose bits differ (torn).
func check(dir string, c config, f freshConfig, answers []answer) (checked, torn int, err error) {
	v, err := loadServed(filepath.Join(dir, "base.safetensors"))
	if err != nil {
		return 0, 0, err
	}
	s := newClickStream(1, c.live, c.churn)
	ids := [2][]int64{make([]int64, c.batch), make([]int64, c.batch)}
	clicks := make([]float32, c.batch)
	for range f.warm {
		s.next(ids[0], ids[1], clicks)
	}
	var sc scorer
	p := make([]float32, c.batch)
	for _, a := range answers {
		s.next(ids[0], ids[1], clicks)
		for v.seq < a.seq {
			if v, err = v.next(dir); err != nil {
				return checked, torn, err
			}
		}
		if v.seq != a.seq {
			return checked, torn, fmt.Errorf("an answer of version %d after one of %d", a.seq, v.seq)
		}
		if err := sc.predict(p, v, ids); err != nil {
			return checked, torn, err
		}
		checked++
		if hashOf(p) != a.hash {
			torn++
		}
	}
	return checked, torn, nil
}

// A server is the server process of a run.
type server struct {
	cmd *exec.Cmd
	in  *bufio.Writer
	out *bufio.Reader
	buf []byte
}

// startServer starts this program again as the server of the model in
// dir (serveEnv), applying deltas every (everyEnv: "" as each appears).
func startServer(dir, every string) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), serveEnv+"="+dir, everyEnv+"="+every)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &server{cmd: cmd, in: bufio.NewWriterSize(in, 1<<16), out: bufio.NewReaderSize(out, 1<<16)}, nil
}

// ask sends the batch ids and reads the probabilities into p; it returns
// the version that answered.
func (s *server) ask(p []float32, ids [2][]int64) (uint64, error) {
	s.buf = binary.LittleEndian.AppendUint32(s.buf[:0], uint32(len(p)))
	for _, f := range ids {
		for _, id := range f {
			s.buf = binary.LittleEndian.AppendUint64(s.buf, uint64(id))
		}
	}
	if _, err := s.in.Write(s.buf); err != nil {
		return 0, err
	}
	if err := s.in.Flush(); err != nil {
		return 0, err
	}
	var seq uint64
	if err := binary.Read(s.out, binary.LittleEndian, &seq); err != nil {
		return 0, fmt.Errorf("the server's answer: %w", err)
	}
	return seq, binary.Read(s.out, binary.LittleEndian, p)
}

// finish ends the server and returns its report.
func (s *server) finish() (serverReport, error) {
	var rep serverReport
	if err := binary.Write(s.in, binary.LittleEndian, uint32(0)); err != nil {
		return rep, err
	}
	if err := s.in.Flush(); err != nil {
		return rep, err
	}
	if err := json.NewDecoder(s.out).Decode(&rep); err != nil {
		return rep, fmt.Errorf("the server's report: %w", err)
	}
	return rep, s.cmd.Wait()
}

func (s *server) kill() {
	if s.cmd.ProcessState == nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}
