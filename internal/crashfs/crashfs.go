// Package crashfs simulates power cuts for the tests of the module's
// files, as SQLite's crash-test VFS, LazyFS and ALICE do: a Recorder is a
// fileio.FS that performs every write path's operations on the system and
// records them, and State rebuilds, from that record, what a directory
// would hold after a power cut at any operation: a file's writes since
// its last fsync lost, all kept, or the last of them torn at a sector
// boundary; a new directory entry (a created file, a rename, a removal)
// undone unless its directory was synced since.
package crashfs

import (
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/gathergrad/gather/internal/fileio"
)

// A Kind is the kind of an operation.
type Kind uint8

const (
	Create  Kind = iota // a new file, or one truncated by O_TRUNC
	Write               // bytes written at an offset
	Size                // the file's size set (Truncate), or grown (Allocate)
	Sync                // fsync of a file
	Flush               // a shared mapping's contents made durable (msync, fsync)
	Rename              // Path renamed to To
	Remove              // Path removed
	SyncDir             // the directory Path synced
)

var kindNames = [...]string{"create", "write", "size", "sync", "flush", "rename", "remove", "syncdir"}

func (k Kind) String() string { return kindNames[k] }

// An Op is one recorded operation.
type Op struct {
	Kind     Kind
	Path, To string // absolute
	Off      int64
	Data     []byte // Write's bytes; Flush's whole mapping
	Size     int64
	Grow     bool // Size: grow only (Allocate)
}

// A Recorder records the operations of the write paths under one
// directory tree, performing them on the system as fileio.OS does.
type Recorder struct {
	mu   sync.Mutex
	dir  string
	init map[string][]byte // the tree's files when recording began
	ops  []Op
}

// Record returns a Recorder of dir, holding its files' contents now as
// their durable state.
func Record(dir string) (*Recorder, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	r := &Recorder{dir: dir, init: map[string][]byte{}}
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		r.init[p] = b
		return err
	})
	return r, err
}

var _ fileio.FS = (*Recorder)(nil)

// Len returns the number of operations recorded so far: a point a test
// marks (a Sync that returned) to compare crash states with.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

// Ops returns a copy of the operations recorded.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

func (r *Recorder) add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

func abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	return a
}

func (r *Recorder) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	_, err := os.Stat(name)
	existed := err == nil
	f, err := fileio.OS.OpenFile(name, flag, perm)
	if err == nil && (!existed && flag&os.O_CREATE != 0 || flag&os.O_TRUNC != 0) {
		r.add(Op{Kind: Create, Path: abs(name)})
	}
	return f, err
}

func (r *Recorder) WriteAt(f *os.File, b []byte, off int64) (int, error) {
	n, err := fileio.OS.WriteAt(f, b, off)
	if n > 0 {
		r.add(Op{Kind: Write, Path: abs(f.Name()), Off: off, Data: slices.Clone(b[:n])})
	}
	return n, err
}

func (r *Recorder) Truncate(f *os.File, size int64) error {
	err := fileio.OS.Truncate(f, size)
	if err == nil {
		r.add(Op{Kind: Size, Path: abs(f.Name()), Size: size})
	}
	return err
}

func (r *Recorder) Allocate(f *os.File, size int64) error {
	err := fileio.OS.Allocate(f, size)
	if err == nil {
		r.add(Op{Kind: Size, Path: abs(f.Name()), Size: size, Grow: true})
	}
	return err
}

func (r *Recorder) Sync(f *os.File) error {
	err := fileio.OS.Sync(f)
	if err == nil {
		r.add(Op{Kind: Sync, Path: abs(f.Name())})
	}
	return err
}

func (r *Recorder) Flush(f *os.File, data []byte) error {
	err := fileio.OS.Flush(f, data)
	if err == nil {
		r.add(Op{Kind: Flush, Path: abs(f.Name()), Data: slices.Clone(data)})
	}
	return err
}

func (r *Recorder) Rename(oldpath, newpath string) error {
	err := fileio.OS.Rename(oldpath, newpath)
	if err == nil {
		r.add(Op{Kind: Rename, Path: abs(oldpath), To: abs(newpath)})
	}
	return err
}

func (r *Recorder) Remove(name string) error {
	err := fileio.OS.Remove(name)
	if err == nil {
		r.add(Op{Kind: Remove, Path: abs(name)})
	}
	return err
}

func (r *Recorder) SyncDir(dir string) error {
	err := fileio.OS.SyncDir(dir)
	if err == nil {
		r.add(Op{Kind: SyncDir, Path: abs(dir)})
	}
	return err
}

// A Mode is what a power cut does to the writes since a file's last
// fsync.
type Mode uint8

const (
	Lost Mode = iota // none of them reached the disk
	Kept             // all of them did
	Torn             // all but the last did, and the last up to a sector boundary
)

var modeNames = [...]string{"lost", "kept", "torn"}

func (m Mode) String() string { return modeNames[m] }

// Sector is the size a torn write is cut at a multiple of.
const Sector = 512

// file is a file of the simulation: its contents now, as last made
// durable, and the writes since.
type file struct {
	data, durable []byte
	pending       []Op
}

func (f *file) apply(op Op) {
	switch op.Kind {
	case Write:
		end := op.Off + int64(len(op.Data))
		if end > int64(len(f.data)) {
			f.data = append(f.data, make([]byte, end-int64(len(f.data)))...)
		}
		copy(f.data[op.Off:], op.Data)
	case Size:
		if op.Size > int64(len(f.data)) {
			f.data = append(f.data, make([]byte, op.Size-int64(len(f.data)))...)
		} else if !op.Grow {
			f.data = f.data[:op.Size]
		}
	}
}

// State returns the files of the recorded tree (by absolute path) after a
// power cut just after the first n operations, in mode m.
func (r *Recorder) State(n int, m Mode) map[string][]byte {
	ops := r.Ops()[:n]
	cur := map[string]*file{} // the directory entries now
	dur := map[string]*file{} // the directory entries made durable
	for p, b := range r.init {
		f := &file{data: slices.Clone(b), durable: slices.Clone(b)}
		cur[p], dur[p] = f, f
	}
	at := func(p string) *file {
		f, ok := cur[p]
		if !ok { // written without being seen created: a file outside the tree's start
			f = &file{}
			cur[p] = f
		}
		return f
	}
	for _, op := range ops {
		switch op.Kind {
		case Create:
			f := &file{}
			if old, ok := cur[op.Path]; ok {
				// O_TRUNC of a file that exists: the same file, emptied.
				f = old
				f.apply(Op{Kind: Size, Size: 0})
				f.pending = append(f.pending, Op{Kind: Size, Size: 0})
			}
			cur[op.Path] = f
		case Write, Size:
			f := at(op.Path)
			f.apply(op)
			f.pending = append(f.pending, op)
		case Sync:
			f := at(op.Path)
			f.durable, f.pending = slices.Clone(f.data), nil
		case Flush:
			f := at(op.Path)
			f.data, f.durable, f.pending = slices.Clone(op.Data), slices.Clone(op.Data), nil
		case Rename:
			if f, ok := cur[op.Path]; ok {
				cur[op.To] = f
				delete(cur, op.Path)
			}
		case Remove:
			delete(cur, op.Path)
		case SyncDir:
			for p := range dur {
				if filepath.Dir(p) == op.Path {
					delete(dur, p)
				}
			}
			for p, f := range cur {
				if filepath.Dir(p) == op.Path {
					dur[p] = f
				}
			}
		}
	}
	out := map[string][]byte{}
	for p, f := range dur {
		if !inTree(r.dir, p) {
			continue
		}
		switch {
		case m == Kept || len(f.pending) == 0:
			if m == Kept {
				out[p] = slices.Clone(f.data)
			} else {
				out[p] = slices.Clone(f.durable)
			}
		case m == Lost:
			out[p] = slices.Clone(f.durable)
		case m == Torn:
			g := &file{data: slices.Clone(f.durable)}
			last := len(f.pending) - 1
			for _, op := range f.pending[:last] {
				g.apply(op)
			}
			if op := f.pending[last]; op.Kind == Write {
				keep := (len(op.Data) - 1) / Sector * Sector
				op.Data = op.Data[:keep]
				g.apply(op)
			}
			out[p] = g.data
		}
	}
	return out
}

func inTree(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !filepath.IsAbs(rel) && (len(rel) < 3 || rel[:3] != "../")
}

// Materialize writes the files of state, which are under the recorded
// tree, to the same relative paths under dst.
func (r *Recorder) Materialize(state map[string][]byte, dst string) error {
	for p, b := range state {
		rel, err := filepath.Rel(r.dir, p)
		if err != nil {
			return err
		}
		q := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(q), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(q, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
