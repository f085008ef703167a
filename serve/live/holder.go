package live

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// A Loaded is a model a Holder loaded, and the version its answers carry:
// "<n>-<the first 6 bytes of the file's SHA-256, in hex>", n counting the
// Holder's loads from 1.
type Loaded[M any] struct {
	Model   M
	Version string
	stat    os.FileInfo // the file's, when it was read
}

// A Holder holds the model of a file, and loads it again on Reload: the
// new model is loaded beside the current one, then made current, so
// that a request that took Current before answers whole with the model
// it took. A file that does not load leaves the current model. A Holder
// is safe for concurrent use.
type Holder[M any] struct {
	path  string
	load  func(path string) (M, error)
	cur   atomic.Pointer[Loaded[M]]
	loads atomic.Int64                // models loaded, the first part of a version
	mu    sync.Mutex                  // one reload at a time
	tried atomic.Pointer[os.FileInfo] // the file as the last reload found it
	ok    atomic.Int64                // reloads that worked
	bad   atomic.Int64                // reloads that failed

	applied, refused atomic.Int64 // updates (Update) made and refused
	busy             atomic.Int32 // reloads and updates running
}

// Busy reports whether a reload or an update is building a new model
// now: a Gate extended by it (Gate.ExtendWhile) admits more requests
// meanwhile.
func (h *Holder[M]) Busy() bool { return h.busy.Load() > 0 }

// NewHolder returns a Holder of the model load reads from the file at
// path, loaded once; load's error is NewHolder's.
func NewHolder[M any](path string, load func(path string) (M, error)) (*Holder[M], error) {
	h := &Holder[M]{path: path, load: load}
	l, err := h.read()
	if err != nil {
		return nil, err
	}
	h.cur.Store(l)
	return h, nil
}

// read loads the file into a new model, beside the current one. A file
// replaced while it is read is read again (three times at most), so that
// a version's hash is of the bytes its model came from.
func (h *Holder[M]) read() (*Loaded[M], error) {
	for range 3 {
		before, err := os.Stat(h.path)
		if err != nil {
			return nil, err
		}
		sum, err := fileSum(h.path)
		if err != nil {
			return nil, err
		}
		m, err := h.load(h.path)
		if err != nil {
			return nil, err
		}
		after, err := os.Stat(h.path)
		if err != nil {
			return nil, err
		}
		if !sameFile(before, after) {
			continue
		}
		return &Loaded[M]{Model: m, Version: fmt.Sprintf("%d-%s", h.loads.Add(1), hex.EncodeToString(sum[:6])), stat: after}, nil
	}
	return nil, fmt.Errorf("%s changed three times while it was read", h.path)
}

// fileSum returns the SHA-256 of the file at path, read in pieces.
func fileSum(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

func sameFile(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}

// Current returns the current model and its version.
func (h *Holder[M]) Current() *Loaded[M] { return h.cur.Load() }

// Version returns the current model's version.
func (h *Holder[M]) Version() string { return h.cur.Load().Version }

// Path returns the model file's path.
func (h *Holder[M]) Path() string { return h.path }

// Reload loads the model file again and, if it loads, makes it the
// current model and returns its version. A file that does not load is an
// error, and the current model stays.
func (h *Holder[M]) Reload() (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.busy.Add(1)
	defer h.busy.Add(-1)
	if st, err := os.Stat(h.path); err == nil {
		h.tried.Store(&st)
	}
	l, err := h.read()
	if err != nil {
		h.bad.Add(1)
		return "", err
	}
	h.ok.Add(1)
	h.cur.Store(l)
	return l.Version, nil
}

// Update makes next(current model) the current model, as version, and
// returns nil; an error of next is Update's, and the current model stays.
// It is how a server applies a delta (serve.Table.Apply) between
// reloads: next builds the new model beside the current one, which the
// requests that took it keep answering with, whole. Updates and reloads
// run one at a time.
func (h *Holder[M]) Update(version string, next func(cur M) (M, error)) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.busy.Add(1)
	defer h.busy.Add(-1)
	cur := h.cur.Load()
	m, err := next(cur.Model)
	if err != nil {
		h.refused.Add(1)
		return err
	}
	h.applied.Add(1)
	h.cur.Store(&Loaded[M]{Model: m, Version: version, stat: cur.stat})
	return nil
}

// Updates returns how many updates (Update) were made and how many
// refused.
func (h *Holder[M]) Updates() (applied, refused int64) { return h.applied.Load(), h.refused.Load() }

// Reloads returns how many reloads worked and how many failed.
func (h *Holder[M]) Reloads() (ok, failed int64) { return h.ok.Load(), h.bad.Load() }

// Changed reports whether the model file is not the one last loaded or
// tried (a file replaced, or written since): a file that failed to load
// is not Changed until it changes again, so that a watch does not retry
// it at every tick.
func (h *Holder[M]) Changed() bool {
	st, err := os.Stat(h.path)
	if err != nil {
		return false
	}
	if tried := h.tried.Load(); tried != nil && sameFile(st, *tried) {
		return false
	}
	return !sameFile(st, h.cur.Load().stat)
}

// Watch reloads the model at each value from reload (a signal, say
// SIGHUP) and, at each tick, if its file Changed, until ctx is done;
// logf reports each reload, and each failure with the version still
// current. Either channel may be nil.
func (h *Holder[M]) Watch(ctx context.Context, reload <-chan os.Signal, tick <-chan time.Time, logf func(format string, args ...any)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload:
		case <-tick:
			if !h.Changed() {
				continue
			}
		}
		if v, err := h.Reload(); err != nil {
			logf("reload: %v; still serving %s", err, h.Version())
		} else {
			logf("reloaded %s: version %s", h.path, v)
		}
	}
}
