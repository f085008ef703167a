package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/serve"
	"github.com/gathergrad/gather/serve/live"
	"github.com/gathergrad/gather/table"
)

// features are the names of the click model's tables and linear maps.
var features = [2]string{"user", "item"}

// A served is one version of the dynamic click model as a server answers
// with it: its tables, its id maps and its linear maps, at version
// (base, seq): the base file and seq deltas after it.
type served struct {
	base, seq uint64
	tables    [2]*serve.Table
	ids       [2]*serve.IDs
	w         [2][]float32 // the linear maps, dim values each
	taken     int64        // when the last delta's rows were taken (Unix ns)
	rows      int          // the rows the last delta changed
}

// loadServed reads the base file the trainer saved (checkpoint.Save of
// the tables, their id maps and the linear maps; its version in the
// metadata's "base").
func loadServed(path string) (*served, error) {
	ts, meta, err := checkpoint.Read(path)
	if err != nil {
		return nil, err
	}
	s := &served{}
	if s.base, err = strconv.ParseUint(meta["base"], 10, 64); err != nil {
		return nil, fmt.Errorf("%s: no base version: %w", path, checkpoint.ErrFormat)
	}
	for f, name := range features {
		w, ok := ts[name+".weight"]
		if !ok || w.Dims() != 2 || w.Dtype() != tensor.Float32 {
			return nil, fmt.Errorf("%s: no float32 table %q: %w", path, name+".weight", checkpoint.ErrFormat)
		}
		if s.tables[f], err = serve.Quantize(w.Float32s(), w.Shape()[1], serve.Float32); err != nil {
			return nil, err
		}
		s.tables[f] = s.tables[f].At(s.base).Named(name)
		m, err := table.ReadIDMap(path, name)
		if err != nil {
			return nil, err
		}
		s.ids[f] = serve.NewIDs(m)
		if s.w[f], err = linearMap(ts, name+"_w", s.tables[f].Dim(), path); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// linearMap returns the float32 values of ts[name], which must be dim.
func linearMap(ts map[string]*tensor.Dense, name string, dim int, path string) ([]float32, error) {
	t, ok := ts[name]
	if !ok || t.Dtype() != tensor.Float32 || t.Shape().TotalSize() != dim {
		return nil, fmt.Errorf("%s: no float32 %q of %d values: %w", path, name, dim, checkpoint.ErrFormat)
	}
	return t.Float32s(), nil
}

// deltaPath returns the file of delta seq of base in dir.
func deltaPath(dir string, base, seq uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%d-%d.safetensors", base, seq))
}

// next returns s with delta s.seq+1 from dir applied (the trainer's
// publish): each table's changed rows and id assignments, the linear maps
// whole. s is not changed.
func (s *served) next(dir string) (*served, error) {
	path := deltaPath(dir, s.base, s.seq+1)
	ds, dense, err := checkpoint.ReadDeltas(path)
	if err != nil {
		return nil, err
	}
	return s.apply(ds, dense, path)
}

// apply returns s with the deltas ds and the linear maps of dense, read
// from path, applied. s is not changed.
func (s *served) apply(ds []*driver.Delta, dense map[string]*tensor.Dense, path string) (*served, error) {
	if len(ds) != len(features) {
		return nil, fmt.Errorf("%s: %d deltas for %d tables: %w", path, len(ds), len(features), checkpoint.ErrMismatch)
	}
	n := *s
	n.seq, n.rows = s.seq+1, 0
	var err error
	for f, name := range features {
		d := ds[f]
		if d.Table != name {
			return nil, fmt.Errorf("%s: delta %d is of %q, not %q: %w", path, f, d.Table, name, checkpoint.ErrMismatch)
		}
		if n.tables[f], err = s.tables[f].Apply(d); err != nil {
			return nil, err
		}
		if n.ids[f], err = s.ids[f].Apply(d); err != nil {
			return nil, err
		}
		if n.w[f], err = linearMap(dense, name+"_w", s.tables[f].Dim(), path); err != nil {
			return nil, err
		}
		if f == 0 || d.Time < n.taken {
			n.taken = d.Time
		}
		n.rows += len(d.Rows)
	}
	return &n, nil
}

// A scorer holds a request's buffers.
type scorer struct {
	rows []int64
	vecs []float32
}

// predict writes the probability of a click for each (users[k], items[k])
// into p, from s alone: sigmoid(user row · user map + item row · item map).
func (sc *scorer) predict(p []float32, s *served, ids [2][]int64) error {
	n := len(p)
	dim := s.tables[0].Dim()
	sc.rows = append(sc.rows[:0], make([]int64, n)...)
	sc.vecs = append(sc.vecs[:0], make([]float32, n*dim)...)
	logits := make([]float32, n)
	for f := range features {
		if err := s.ids[f].Rows(sc.rows, ids[f][:n]); err != nil {
			return err
		}
		if err := s.tables[f].Lookup(sc.vecs, sc.rows); err != nil {
			return err
		}
		for k := range n {
			var z float32
			for j, v := range sc.vecs[k*dim : (k+1)*dim] {
				z += v * s.w[f][j]
			}
			logits[k] += z
		}
	}
	for k, z := range logits {
		p[k] = float32(1 / (1 + math.Exp(-float64(z))))
	}
	return nil
}

// serveEnv names the environment variable that makes the program (or its
// test binary) the server process of -fresh: its value is the directory of
// the deltas, and the base file is "base.safetensors" in it.
const serveEnv = "GATHERGRAD_STREAM_SERVE"

// everyEnv names the environment variable that sets how often the server
// process applies the deltas that have appeared (all of them at once): a
// duration, or "never"; "now" or unset, it applies each as soon as it
// appears.
const everyEnv = "GATHERGRAD_STREAM_EVERY"

// parseEvery reads everyEnv's value: 0 for now or unset (each delta at
// once), a negative duration for never.
func parseEvery(v string) (time.Duration, error) {
	switch v {
	case "", "now":
		return 0, nil
	case "never":
		return -1, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: a positive duration, now or never", v)
	}
	return d, nil
}

// A serverReport is what the server process says at the end: each
// delta's lag from its rows' being taken to their being served, when it
// was served (Unix ns, delta k at ServedNs[k-1]), and the time its tables
// and id maps took to apply (after reading the file).
type serverReport struct {
	Deltas   int     `json:"deltas"`
	Refused  int     `json:"refused"`
	Rows     int64   `json:"rows"`
	ApplyNs  int64   `json:"apply_ns"`
	LagsNs   []int64 `json:"lags_ns"`
	ServedNs []int64 `json:"served_ns"`
}

// serveProcess is the server of -fresh and -redis: it loads the base
// from dir, then, while a goroutine applies each delta as its file
// appears (polled every millisecond; live.Holder.Update, so that each
// request reads one version), answers requests on in with out: a request
// is n (uint32) and n user ids and n item ids (int64), its answer the
// version's sequence number (uint64) and n probabilities (float32), all
// little-endian. With every > 0 the deltas are applied only every that
// long, those that appeared since in turn; with every < 0, never. A
// request of 0 ends it: once the deltas in dir are applied (when every is
// 0), it writes its report as JSON and returns.
func serveProcess(dir string, every time.Duration, in io.Reader, out io.Writer) error {
	h, err := live.NewHolder(filepath.Join(dir, "base.safetensors"), loadServed)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	var rep serverReport
	done := make(chan struct{})
	go func() {
		defer close(done)
		next := time.Now().Add(every) // with every > 0, when the deltas are applied next
		for ctx.Err() == nil {
			cur := h.Current().Model
			if every < 0 {
				time.Sleep(time.Millisecond)
				continue
			}
			if _, err := os.Stat(deltaPath(dir, cur.base, cur.seq+1)); err != nil {
				if every > 0 && !time.Now().Before(next) {
					next = next.Add(every) // every delta there was is applied
				}
				time.Sleep(time.Millisecond)
				continue
			}
			if every > 0 && time.Now().Before(next) {
				time.Sleep(time.Millisecond)
				continue
			}
			var took time.Duration
			err := h.Update(fmt.Sprint(cur.seq+1), func(s *served) (*served, error) {
				path := deltaPath(dir, s.base, s.seq+1)
				ds, dense, err := checkpoint.ReadDeltas(path)
				if err != nil {
					return nil, err
				}
				start := time.Now()
				n, err := s.apply(ds, dense, path)
				took = time.Since(start)
				return n, err
			})
			if err != nil {
				rep.Refused++
				fmt.Fprintf(os.Stderr, "delta %d: %v\n", cur.seq+1, err)
				time.Sleep(10 * time.Millisecond)
				continue
			}
			n, now := h.Current().Model, time.Now().UnixNano()
			rep.LagsNs = append(rep.LagsNs, now-n.taken)
			rep.ServedNs = append(rep.ServedNs, now)
			rep.Deltas++
			rep.Rows += int64(n.rows)
			rep.ApplyNs += took.Nanoseconds()
		}
	}()
	r, w := bufio.NewReaderSize(in, 1<<16), bufio.NewWriterSize(out, 1<<16)
	var sc scorer
	var ids [2][]int64
	var p []float32
	for {
		var n uint32
		if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
			stop()
			return err
		}
		if n == 0 { // the end, once every delta published is applied (10 s at most)
			for end := time.Now().Add(10 * time.Second); every == 0 && time.Now().Before(end); time.Sleep(time.Millisecond) {
				cur := h.Current().Model
				if _, err := os.Stat(deltaPath(dir, cur.base, cur.seq+1)); err != nil {
					break
				}
			}
			break
		}
		for f := range ids {
			ids[f] = append(ids[f][:0], make([]int64, n)...)
			if err := binary.Read(r, binary.LittleEndian, ids[f]); err != nil {
				stop()
				return err
			}
		}
		p = append(p[:0], make([]float32, n)...)
		s := h.Current().Model // one version for the whole request
		if err := sc.predict(p, s, ids); err != nil {
			stop()
			return err
		}
		binary.Write(w, binary.LittleEndian, s.seq)
		binary.Write(w, binary.LittleEndian, p)
		if err := w.Flush(); err != nil {
			stop()
			return err
		}
	}
	stop()
	<-done
	if err := json.NewEncoder(w).Encode(rep); err != nil {
		return err
	}
	return w.Flush()
}
