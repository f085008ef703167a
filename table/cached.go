package table

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/rowcache"
	"github.com/gathergrad/gather/internal/tablerows"
	"github.com/gathergrad/gather/rule"
)

// A Store holds every row of a table: each row's values and, beside them,
// its optimiser state (WithState), RowBytes bytes in all, little-endian,
// as its Schema says. A Cached table keeps the hot rows of a Store in
// memory. MemoryStore holds the rows in memory, cluster.Store on a Redis
// Cluster; OpenCached keeps a file's rows in a store of its own. A store
// with more to offer says so by implementing more methods, found by
// assertion: one that steps its own rows (rule.Stepper, as MemoryStore
// and cluster.Store do) can back a Shared cache, one that keeps the workers'
// clocks (cluster.Store) an optim.SharedDense of several workers.
//
// A read or write stops when ctx is done and returns an error wrapping
// ctx.Err().
type Store interface {
	Schema() Schema
	RowBytes() int                                                // the size of a row
	Rows() int64                                                  // the number of rows; ids lie in [0, Rows())
	ReadRows(ctx context.Context, ids []int64, dst []byte) error  // row k into dst[k*RowBytes():]
	WriteRows(ctx context.Context, ids []int64, src []byte) error // row k from src[k*RowBytes():]
}

// ErrCapacity: a batch names more distinct rows than a Cached table
// holds, a cache budget is smaller than one row, or a batch has more new
// ids than rows an IDMap may give them (the error says which).
var ErrCapacity = rowcache.ErrCapacity

// The layout of a table file with optimiser state (WithState).
const (
	rowsSuffix = ".rows"
	stepKey    = "gathergrad.step" // the optimiser's step count, stepDigits decimal digits
	idKey      = "gathergrad.id"   // the table's identity, which its journal names
	stepDigits = 20
)

// A Column is one part of the optimiser state each row of a table carries
// beside its values (WithState): Width values of the table's dtype, named
// Name, each Init in a new row (Create, cluster.Create, NewMemoryStore).
// Package optim's sparse optimisers name theirs (optim.Sparse.Columns).
type Column = rule.Column

// layout returns the name of the tensor of a table file of rows dim wide
// with the state cols, its row width and its metadata: a new identity
// (idKey), the step count 0 and, with state, the columns.
func layout(prefix, name string, dim int, cols []Column) (key string, width int, meta map[string]string, err error) {
	meta = map[string]string{idKey: newID(), stepKey: formatSteps(0)}
	if len(cols) == 0 {
		return name + ".weight", dim, meta, nil
	}
	desc, width, err := tablerows.Describe(prefix, dim, cols)
	if err != nil {
		return "", 0, nil, err
	}
	meta[LayoutKey] = desc
	return name + rowsSuffix, width, meta, nil
}

// newID returns a new table identity: 32 random hexadecimal digits.
func newID() string {
	return hex.EncodeToString(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, rand.Uint64()), rand.Uint64()))
}

// journalPath returns the path of the journal of the table file at path.
func journalPath(path string) string { return path + ".journal" }

// writeTable writes a table file at path as fileio.WriteAtomic does, and
// then removes the journal an earlier table at path left: the new file's
// identity (idKey) differs from the one the journal names, so a crash
// between the two leaves a journal that OpenCached refuses, never one it
// applies to the new table.
func writeTable(path string, write func(f *os.File) error) error {
	if err := fileio.WriteAtomic(path, write); err != nil {
		return err
	}
	if err := fileio.Remove(journalPath(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return fileio.SyncDir(filepath.Dir(path))
}

// LayoutKey is the metadata entry of a table file with optimiser state
// (WithState) that describes its rows: "weight:<dim>,<column>:<width>,..."
// (ParseLayout).
const LayoutKey = "gathergrad.columns"

// ParseLayout returns the values and the state of a row that desc, a
// table file's LayoutKey metadata, describes: "weight:64,sum:1" is rows
// of 64 values and one column "sum" one value wide. A description that
// is not one is an error wrapping checkpoint.ErrFormat.
func ParseLayout(desc string) (dim int, cols []Column, err error) {
	parts := strings.Split(desc, ",")
	for k, p := range parts {
		name, w, ok := strings.Cut(p, ":")
		n, err := strconv.Atoi(w)
		if !ok || err != nil || n <= 0 || (k == 0) != (name == "weight") || name == "" {
			return 0, nil, fmt.Errorf("metadata %s = %q does not describe a table's rows (\"weight:<dim>,<column>:<width>,...\"): %w", LayoutKey, desc, checkpoint.ErrFormat)
		}
		if k == 0 {
			dim = n
			continue
		}
		if slices.ContainsFunc(cols, func(c Column) bool { return c.Name == name }) {
			return 0, nil, fmt.Errorf("metadata %s = %q names the column %q twice: %w", LayoutKey, desc, name, checkpoint.ErrFormat)
		}
		cols = append(cols, Column{Name: name, Width: n})
	}
	if _, _, err := tablerows.Describe("", dim, cols); err != nil {
		return 0, nil, fmt.Errorf("metadata %s = %q: %v: %w", LayoutKey, desc, err, checkpoint.ErrFormat)
	}
	return dim, cols, nil
}

func formatSteps(n int64) string { return fmt.Sprintf("%0*d", stepDigits, n) }

func parseSteps(b []byte) (int64, bool) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil && len(b) == stepDigits && n >= 0
}

// slotOverhead is the memory of a cache's index per row: its entry in
// the map from ids to slots (in the Go heap, 20 to 40 bytes by the map's
// load) and its slot's bookkeeping (41 bytes).
const slotOverhead = 72

// CacheOptions configure the cache of any table, NewCached's and
// OpenCached's.
type CacheOptions struct {
	// Budget is the memory the cache takes, in bytes: its rows (each
	// row's values and state) and its index, about 72 bytes a row. A
	// budget smaller than one row is an error wrapping ErrCapacity.
	Budget int64
	// LFU evicts, of 16 rows drawn at random, the one named least often
	// since it came in, instead of the least recently used.
	LFU bool
	// Preload fills the cache when it opens with the table's first rows,
	// as many as it holds, read in order: for a table whose ids are
	// numbered by frequency (a vocabulary sorted by count, as word2vec's
	// and fastText's are), the rows a cache of its size should hold, so
	// that training starts at the hit rate a long warm-up would reach.
	Preload bool
	// Shared, if not nil, makes the cache Shared: other workers update
	// the store's rows at the same time (NewCached of a store that steps
	// its own rows, rule.Stepper, such as a cluster.Store, whose servers
	// apply the rule, or a MemoryStore; a table file has one writer).
	Shared *SharedOptions
	// Rounding says how a half table's stepped values are rounded.
	Rounding Rounding
}

// SharedOptions configure a Shared cache. Step has the store step the
// rows first and steps the cached rows alike, which it does not mark
// dirty: the store's rows are the table, the cache's a copy, read again
// once MaxAge batches old.
type SharedOptions struct {
	// MaxAge is how many batches (NewBatch) a row the cache read is
	// served before it is read again, so that a row is at most MaxAge
	// batches stale to this worker: the other workers' updates made
	// since it was read are missing from it (its own are not). 0 means
	// 1: each batch reads its rows afresh.
	MaxAge int
}

// Rounding says how a half table's stepped values are rounded to its
// format. Nearest rounds to nearest even. Without it they are rounded
// stochastically (up or down at random, unbiased), from a hash of Seed,
// the step, the row and the column: the same on any store. Small updates
// then survive on average where rounding to nearest would drop them.
type Rounding struct {
	Nearest bool
	Seed    uint64
}

// FileOptions configure what only a table in a file has (OpenCached):
// its reads and writes, its journal, and an id map kept in its rows.
type FileOptions struct {
	// Depth is how many reads or writes of rows the file keeps in
	// flight; 0 means 32.
	Depth int
	// JournalLimit bounds the table's journal, in bytes. Changed rows
	// that leave the cache between syncs go to the journal, which
	// therefore grows with every batch until Sync empties it. Once it
	// holds more than JournalLimit bytes, the next Fetch syncs the table
	// first, so the journal stays within the limit and one batch's
	// evictions. 0 means 4 × the cache's Budget, and at least 64 MB; a
	// negative limit means none.
	JournalLimit int64
	// ManualSync makes a Fetch that finds the journal past JournalLimit
	// fail with an error wrapping ErrJournalFull instead of syncing, for
	// a program that chooses its own moments to Sync.
	ManualSync bool
	// IDMap, if not nil, is kept in the file's rows from IDMapRow on
	// (IDMapRows of them, past the rows the map hands out and its
	// default row): OpenCached loads into it the map an earlier Sync kept
	// there (a table not stepped yet, or rows of zeros, leave it as it
	// is), and every Sync (and Close) writes its state into those rows in
	// the same commit as the table's rows and step count. After a crash,
	// OpenCached finds the map and the rows of the same Sync. Rows
	// outside the table or overlapping the map's, or a map of other
	// options, is an error; a kept state that does not describe a map
	// wraps checkpoint.ErrFormat, and the map is unchanged.
	IDMap    *IDMap
	IDMapRow int64
}

// ErrJournalFull: the journal of a table in a file is past
// FileOptions.JournalLimit and FileOptions.ManualSync is set: call Sync.
var ErrJournalFull = errors.New("journal full")

// journalLimit returns the journal bound o asks for, -1 for none.
func (f FileOptions) journalLimit(budget int64) int64 {
	switch {
	case f.JournalLimit < 0:
		return -1
	case f.JournalLimit > 0:
		return f.JournalLimit
	}
	return max(4*budget, 64<<20)
}

// A Cached table keeps the hot rows of a Store, with their optimiser
// state, in memory: rows, not pages. Fetch brings a batch's rows in and
// tells where they are (their slots in Weight, which lookups read), Step
// steps them there by a rule, Sync writes the changed rows back.
// Prefetch reads the next batch's rows while the current batch computes.
// nn.CachedEmbedding makes an embedding of it. A Cached is not safe for
// concurrent use.
//
// A table in a file (OpenCached) writes no row into the file between
// syncs: rows that leave the cache go to a journal beside it, and Sync
// commits the journal and then applies it. After a crash at any moment,
// OpenCached finds the table and its optimiser state exactly as the last
// Sync that returned left them.
type Cached struct {
	name   string
	dim    int
	dt     tensor.Dtype
	cols   []Column
	store  rowcache.Store
	cache  *rowcache.Cache
	shared bool
	weight *tensor.Dense   // [slots, dim]
	state  []*tensor.Dense // per column, [slots, width]
	steps  int64
	slots  []int64 // the slots of a step's rows

	file      *os.File            // OpenCached's file, else nil
	release   func()              // fileio.Hold's, for file
	journal   *rowcache.Journaled // its journal
	keepSteps bool                // the file records the step count
	limit     int64               // the journal's bound, -1 for none
	manual    bool                // past limit, Fetch fails instead of syncing
	closed    bool

	idmap     *IDMap  // the map FileOptions.IDMap keeps in the file's rows, or nil
	idmapRows []int64 // its rows

	half    Format // the store's values, 0 for full precision
	nearest bool   // round stepped values to nearest, not stochastically
	seed    uint64 // the stochastic rounding's
}

// NewCached returns a cache in front of store, holding as many of its
// rows as o.Budget allows: rows of the store's Schema (float32 or
// float64 values, or half-precision values that the cache holds as
// float32, then the state). The store's rows start with step count 0
// (see Stats).
func NewCached(ctx context.Context, store Store, o CacheOptions) (*Cached, error) {
	if store == nil {
		return nil, fmt.Errorf("table: NewCached needs a store: %w", errs.ErrOption)
	}
	sc := store.Schema()
	prefix := fmt.Sprintf("table %q", sc.Name)
	dt, dim, cols := sc.Dtype, sc.Dim, sc.Columns
	if err := operand.CheckFloat(prefix, "dtype", dt); err != nil {
		return nil, err
	}
	if dim <= 0 {
		return nil, fmt.Errorf("%s: dimension %d must be positive: %w", prefix, dim, errs.ErrShape)
	}
	_, width, err := tablerows.Describe(prefix, dim, cols)
	if err != nil {
		return nil, err
	}
	var rs rowcache.Store = store
	var half Format
	if sc.Format.isHalf() {
		if dt != tensor.Float32 || o.Shared != nil {
			return nil, fmt.Errorf("%s: a half table (%v) is float32 and not Shared: %w", prefix, sc.Format, errs.ErrOption)
		}
		if rb := 2*dim + 4*(width-dim); store.RowBytes() != rb {
			return nil, fmt.Errorf("%s: the store's rows are %d bytes; %d half values and %d float32 of state are %d: %w",
				prefix, store.RowBytes(), dim, width-dim, rb, errs.ErrShape)
		}
		rs, half = &halfStore{inner: store, f: sc.Format, dim: dim}, sc.Format
	} else if rb := width * int(dt.Size()); store.RowBytes() != rb {
		return nil, fmt.Errorf("%s: the store's rows are %d bytes; %d values of %v (%d of them state) are %d: %w",
			prefix, store.RowBytes(), width, dt, width-dim, rb, errs.ErrShape)
	}
	return newCached(ctx, rs, sc.Name, dim, dt, cols, half, o)
}

// newCached returns a cache of o in front of store, whose values are in
// the half format half (0 for none).
func newCached(ctx context.Context, store rowcache.Store, name string, dim int, dt tensor.Dtype, cols []Column, half Format, o CacheOptions) (*Cached, error) {
	prefix := fmt.Sprintf("table %q", name)
	rb := int64(store.RowBytes())
	maxAge := 0
	if o.Shared != nil {
		if maxAge = max(o.Shared.MaxAge, 1); o.Shared.MaxAge < 0 {
			return nil, fmt.Errorf("%s: MaxAge %d must be at least 0: %w", prefix, o.Shared.MaxAge, errs.ErrOption)
		}
	}
	slots := o.Budget / (rb + slotOverhead)
	if slots < 1 || slots > int64(^uint32(0)>>1) {
		return nil, fmt.Errorf("%s: a cache budget of %d bytes holds %d rows of %d bytes (and %d bytes of index each); "+
			"give it room for one batch's rows at least: %w", prefix, o.Budget, slots, rb, slotOverhead, ErrCapacity)
	}
	slots = min(slots, store.Rows())
	es := int(dt.Size())
	widths := []int{dim * es}
	for _, c := range cols {
		widths = append(widths, c.Width*es)
	}
	policy := rowcache.LRU
	if o.LFU {
		policy = rowcache.LFU
	}
	cache, err := rowcache.New(store, int(slots), policy, widths...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", prefix, err)
	}
	c := &Cached{name: name, dim: dim, dt: dt, cols: cols, store: store, cache: cache, shared: o.Shared != nil,
		half: half, nearest: o.Rounding.Nearest, seed: o.Rounding.Seed}
	if c.shared {
		if _, ok := store.(rule.Stepper); !ok {
			cache.Close()
			return nil, fmt.Errorf("%s: a Shared table needs a store that steps its rows itself (a rule.Stepper, such as a cluster.Store), not %T: %w", prefix, store, errs.ErrOption)
		}
	}
	cache.SetMaxAge(maxAge)
	if o.Preload {
		if _, err := cache.Preload(ctx, int(slots)); err != nil {
			cache.Close()
			return nil, fmt.Errorf("%s: %w", prefix, err)
		}
	}
	if c.weight, err = column(cache, 0, int(slots), dim, dt); err != nil {
		cache.Close()
		return nil, fmt.Errorf("%s: %w", prefix, err)
	}
	for k, col := range cols {
		t, err := column(cache, k+1, int(slots), col.Width, dt)
		if err != nil {
			cache.Close()
			return nil, fmt.Errorf("%s: %w", prefix, err)
		}
		c.state = append(c.state, t)
	}
	return c, nil
}

// column returns column k of cache as a [slots, width] tensor of dtype dt.
func column(cache *rowcache.Cache, k, slots, width int, dt tensor.Dtype) (*tensor.Dense, error) {
	return floatsAt(cache.Column(k), 0, dt, slots, width)
}

// OpenCached opens the table file at path, as Create makes it (with
// WithState or without), behind a cache of o.Budget bytes: its name, rows
// and state come from the file (Schema), and a Step by a rule of other
// columns is an error naming both. Rows are read and written with
// fo.Depth positioned reads or writes in flight, never through a mapping.
// A table in a file has one writer: o.Shared is an error wrapping
// gather.ErrOption.
//
// A file that is not one table (a checkpoint of several tensors) is an
// error wrapping checkpoint.ErrMismatch; a malformed or truncated file is
// checkpoint.ErrFormat. A file is opened by one table at a time
// (ErrInUse, as Open).
//
// Its journal is the file path + ".journal". A journal a crash left is
// dealt with first: if the crash came after a Sync's commit, the commit
// is applied; otherwise the rows written since the last Sync are dropped.
// A journal names the table it belongs to (the identity Create gives the
// file): a journal of another table, such as one a table replaced since
// (Create with WithReplace) left, or one with a committed part that does
// not match its checksum, is an error wrapping ErrJournal naming it, and
// nothing is changed.
func OpenCached(ctx context.Context, path string, o CacheOptions, fo FileOptions) (*Cached, error) {
	t, err := inspectRows(path)
	if err != nil {
		return nil, err
	}
	name, cols := t.name, t.cols
	prefix := fmt.Sprintf("table %q", name)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", prefix, err)
	}
	c, err := openCached(ctx, f, path, name, t, cols, o, fo)
	if err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// ErrJournal: OpenCached found a journal beside a table file that is not
// that table's (another table's identity, shape, or not a journal at
// all), or whose committed part does not match its checksum.
var ErrJournal = rowcache.ErrJournal

// A rowsFile is what inspectRows found in a table file.
type rowsFile struct {
	name  string
	cols  []Column
	info  checkpoint.TensorInfo
	dim   int
	half  Format // the values' format, 0 for the tensor's own
	id    string // "" for a file made before tables had identities
	steps bool   // the file records a step count
}

// inspectRows checks that the file at path holds one table, as Create
// makes it (with WithState or without), and returns what it holds.
func inspectRows(path string) (rowsFile, error) {
	var none rowsFile
	infos, meta, err := checkpoint.Inspect(path)
	if err != nil {
		return none, err
	}
	var name string
	var cols []Column
	if len(infos) == 1 {
		if n, ok := strings.CutSuffix(infos[0].Name, rowsSuffix); ok {
			name = n
			if _, cols, err = ParseLayout(meta[LayoutKey]); err != nil {
				return none, fmt.Errorf("table %q: %s: %w", name, path, err)
			}
			if len(cols) == 0 {
				return none, fmt.Errorf("table %q: %s: metadata %q = %q names no state for a table of %q: %w", name, path, LayoutKey, meta[LayoutKey], infos[0].Name, checkpoint.ErrFormat)
			}
		} else {
			name, _ = strings.CutSuffix(infos[0].Name, ".weight")
		}
	}
	key := name + rowsSuffix
	if len(cols) == 0 {
		key = name + ".weight"
	}
	prefix := fmt.Sprintf("table %q", name)
	if len(infos) != 1 || infos[0].Name != key {
		names := make([]string, 0, 4)
		for _, in := range infos[:min(len(infos), 4)] {
			names = append(names, strconv.Quote(in.Name))
		}
		return none, fmt.Errorf("table: %s holds %d tensors (%s), not a table, which holds \"<name>.weight\" or \"<name>.rows\" alone (as Create makes it): %w",
			path, len(infos), strings.Join(names, ", "), checkpoint.ErrMismatch)
	}
	info := infos[0]
	var half Format
	if v, ok := meta[valuesKey]; ok {
		for _, f := range []Format{Float16, BFloat16} {
			if f.Safetensors() == v {
				half = f
			}
		}
		want := v
		if len(cols) > 0 {
			want = "U8"
		}
		if half == 0 || info.Format != want {
			return none, fmt.Errorf("%s: %s: metadata %q = %q for a tensor of %s: %w", prefix, path, valuesKey, v, info.Format, checkpoint.ErrFormat)
		}
		info.Dtype = tensor.Float32
	} else if info.Format != "F32" && info.Format != "F64" {
		return none, fmt.Errorf("%s: %s's %q is %s; a table is F32 or F64, or half (Create with WithHalf): %w",
			prefix, path, key, info.Format, checkpoint.ErrMismatch)
	}
	if len(info.Shape) != 2 || info.Shape[0] == 0 || info.Shape[1] == 0 {
		return none, fmt.Errorf("%s: %s's %q has shape %v; a table is [vocab, width]: %w",
			prefix, path, key, info.Shape, checkpoint.ErrMismatch)
	}
	id := meta[idKey]
	if len(id) > rowcache.IDBytes {
		return none, fmt.Errorf("%s: %s: metadata %q = %q is not a table identity: %w", prefix, path, idKey, id, checkpoint.ErrFormat)
	}
	_, steps := meta[stepKey]
	if len(cols) == 0 {
		return rowsFile{name: name, info: info, dim: info.Shape[1], half: half, id: id, steps: steps}, nil
	}
	dim, _, _ := ParseLayout(meta[LayoutKey])
	want, width, err := tablerows.Describe(prefix, dim, cols)
	if err != nil {
		return none, err
	}
	if half != 0 && info.Shape[1] != 2*dim+4*(width-dim) {
		return none, fmt.Errorf("%s: %s's rows are %d bytes; %q of half values makes %d: %w", prefix, path, info.Shape[1], want, 2*dim+4*(width-dim), checkpoint.ErrFormat)
	}
	if half == 0 && info.Shape[1] != width {
		return none, fmt.Errorf("%s: %s's rows are %d values wide; %q makes %d: %w", prefix, path, info.Shape[1], want, width, checkpoint.ErrFormat)
	}
	if !steps {
		return none, fmt.Errorf("%s: %s: no step count (metadata %q): %w", prefix, path, stepKey, checkpoint.ErrFormat)
	}
	return rowsFile{name: name, cols: cols, info: info, dim: dim, half: half, id: id, steps: true}, nil
}

func openCached(ctx context.Context, f *os.File, path, name string, t rowsFile, cols []Column, o CacheOptions, fo FileOptions) (*Cached, error) {
	prefix := fmt.Sprintf("table %q", name)
	if o.Shared != nil {
		return nil, fmt.Errorf("%s: a table in a file has one writer: it is not Shared: %w", prefix, errs.ErrOption)
	}
	if err := fileio.Lock(f); err != nil {
		return nil, fmt.Errorf("%s: %w", prefix, err)
	}
	depth := fo.Depth
	if depth <= 0 {
		depth = 32
	}
	dt := t.info.Dtype
	rb := int(t.info.Size) / t.info.Shape[0]
	fs, err := rowcache.NewFileStore(f, t.info.Offset, rb, int64(t.info.Shape[0]), depth)
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", prefix, err, checkpoint.ErrFormat)
	}
	if t.steps {
		at, err := stepsOffset(f, t.info.Offset)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %v: %w", prefix, path, err, checkpoint.ErrFormat)
		}
		if err := fs.SetMeta(at, stepDigits); err != nil {
			return nil, fmt.Errorf("%s: %w", prefix, err)
		}
	}
	j, err := rowcache.OpenJournaled(fs, journalPath(path), t.id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", prefix, err)
	}
	var steps int64
	if t.steps {
		var ok bool
		if steps, ok = parseSteps(j.Meta()); !ok {
			j.Close()
			return nil, fmt.Errorf("%s: %s: step count %q: %w", prefix, path, j.Meta(), checkpoint.ErrFormat)
		}
	}
	var store rowcache.Store = j
	if t.half != 0 {
		store = &halfStore{inner: j, f: t.half, dim: t.dim}
	}
	c, err := newCached(ctx, store, name, t.dim, dt, cols, t.half, o)
	if err != nil {
		j.Close()
		return nil, err
	}
	c.steps, c.file, c.journal, c.keepSteps = steps, f, j, t.steps
	c.limit, c.manual = fo.journalLimit(o.Budget), fo.ManualSync
	c.release = fileio.Hold(path, f)
	if fo.IDMap != nil {
		if err := c.keepIDMap(ctx, fo.IDMap, fo.IDMapRow); err != nil {
			c.free() // without a Sync: the file stays as it was
			return nil, err
		}
	}
	return c, nil
}

// stepsOffset returns the offset in f of the step count's digits in the
// header, which ends at end.
func stepsOffset(f *os.File, end int64) (int64, error) {
	h := make([]byte, end)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, end), h); err != nil {
		return 0, err
	}
	pat := []byte(`"` + stepKey + `":"`)
	i := bytes.Index(h, pat)
	if i < 0 || bytes.Count(h, pat) != 1 || int64(i+len(pat)+stepDigits) > end || h[i+len(pat)+stepDigits] != '"' {
		return 0, fmt.Errorf("no step count of %d digits in the header", stepDigits)
	}
	return int64(i + len(pat)), nil
}

// Schema returns what the table's rows are.
func (c *Cached) Schema() Schema {
	return Schema{Name: c.name, Rows: c.store.Rows(), Dim: c.dim, Dtype: c.dt, Format: c.format(), Columns: c.cols}
}

// Weight returns the cache's rows' values, a [slots, dim] tensor: the row
// Fetch put in slot s is row s. Lookups read it; Step updates it in
// place.
func (c *Cached) Weight() *tensor.Dense { return c.weight }

// Fetch sets slots[k] to the slot of row ids[k], adding the rows to the
// current batch: it reads the rows the cache misses (from the last
// Prefetch, or from the store, together) and evicts the least recently
// used rows the batch does not name, dirty ones written back first. The
// batch's rows stay in their slots until NewBatch. An id outside [0,
// vocab), or a batch of more distinct rows than the cache holds
// (ErrCapacity, naming both), is an error.
//
// For a table in a file, a Fetch that finds the journal past
// FileOptions.JournalLimit syncs the table first (Sync), or fails with
// ErrJournalFull under FileOptions.ManualSync.
func (c *Cached) Fetch(ctx context.Context, ids []int64, slots []int32) error {
	if c.closed {
		return fmt.Errorf("table %q: %w", c.name, ErrClosed)
	}
	if c.journal != nil && c.limit >= 0 && c.journal.Size() > c.limit {
		if c.manual {
			return fmt.Errorf("table %q: the journal holds %d bytes, past the limit of %d; call Sync: %w", c.name, c.journal.Size(), c.limit, ErrJournalFull)
		}
		if err := c.Sync(ctx); err != nil {
			return err
		}
	}
	if err := c.cache.FetchMore(ctx, ids, slots); err != nil {
		return fmt.Errorf("table %q: %w", c.name, err)
	}
	return nil
}

// NewBatch ends the current batch: its rows may be evicted from now on.
func (c *Cached) NewBatch() {
	if !c.closed {
		c.cache.NewBatch()
	}
}

// Prefetch starts reading, on another goroutine, the rows of ids the
// cache does not hold, for the next Fetch: call it with the next batch's
// ids after the current batch's Fetch, and the reads overlap the current
// step. It is a hint: it never changes what Fetch returns, and rows it
// reads enter the cache only at the Fetch that names them. While it
// reads, the caller may read and change the slots (lookups, optimiser
// steps); Fetch, Sync, Read and Close wait for it.
func (c *Cached) Prefetch(ctx context.Context, ids []int64) {
	if !c.closed {
		c.cache.Prefetch(ctx, ids)
	}
}

// Pin fetches row id and keeps it in the cache until Close, such as a
// padding row every batch may name; call it before the first Fetch.
func (c *Cached) Pin(ctx context.Context, id int64) (int32, error) {
	if c.closed {
		return 0, fmt.Errorf("table %q: %w", c.name, ErrClosed)
	}
	s, err := c.cache.Pin(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("table %q: %w", c.name, err)
	}
	return s, nil
}

// Step applies r to the rows g names and their state where the cache
// holds them, as step Stats().Steps+1, and counts the step: the rows must be in
// the cache, fetched since the last NewBatch. r must keep the table's
// columns. A half table's stepped values are then rounded to its format
// (its Schema's Format). The rows are written back to the store before
// they leave the cache, and at Sync.
//
// A Shared table is stepped first where its rows live: its store's
// servers apply r (rule.Stepper, such as a cluster.Store), as the store's
// step; the cached rows are then stepped alike, as a copy, as this
// cache's step. (A cluster.Store counts the steps made through it, one
// worker's, as the cache does.) On error the step is not counted and no
// cached row changed.
func (c *Cached) Step(ctx context.Context, r rule.Rule, g *rule.RowGrad) error {
	if c.closed {
		return fmt.Errorf("table %q: %w", c.name, ErrClosed)
	}
	if err := c.prepareStep(r, g); err != nil {
		return err
	}
	if c.shared {
		if err := c.store.(rule.Stepper).Step(ctx, r, g); err != nil {
			return err
		}
	}
	return c.stepCached(r, g)
}

// prepareStep checks a step of r with g and sets c.slots to the slots
// of g's rows.
func (c *Cached) prepareStep(r rule.Rule, g *rule.RowGrad) error {
	if c.closed {
		return fmt.Errorf("table %q: %w", c.name, ErrClosed)
	}
	if r == nil || g == nil {
		return fmt.Errorf("table %q: Step needs a rule and a gradient: %w", c.name, errs.ErrOption)
	}
	if err := rule.CheckColumns(r, c.dim, c.cols); err != nil {
		return fmt.Errorf("table %q: %w", c.name, err)
	}
	c.slots = c.slots[:0]
	for _, id := range g.Rows {
		s, ok := c.cache.Slot(id)
		if !ok {
			return fmt.Errorf("table %q: row %d of the gradient is not in the cache: step after the run that fetched it: %w", c.name, id, errs.ErrGraph)
		}
		c.slots = append(c.slots, int64(s))
	}
	return nil
}

// stepCached steps the cached rows of c.slots (prepareStep) and counts
// the step; unless the table is Shared, whose store has stepped them,
// it marks them for writing back.
func (c *Cached) stepCached(r rule.Rule, g *rule.RowGrad) error {
	t := c.steps + 1
	if err := r.StepRows(rule.Rows{Weight: c.weight, State: c.state, Slots: c.slots, Step: t}, g); err != nil {
		return err
	}
	c.round(c.slots, t)
	c.steps = t
	if !c.shared {
		for _, s := range c.slots {
			c.cache.MarkDirty(int32(s))
		}
	}
	return nil
}

// A GroupStep is one table's part of a GroupStepper's step: its store,
// the rule and the gradient of its rows.
type GroupStep struct {
	Store Store
	Rule  rule.Rule
	Grad  *rule.RowGrad
}

// A GroupStepper is a store that steps several tables of its kind
// together, each as its own Step would, in fewer round trips than a Step
// each: cluster.Store, one pipelined round trip per master for all of
// them. StepTables is given its own store among the others.
type GroupStepper interface {
	StepTables(ctx context.Context, steps []GroupStep) error
}

// StepShared steps each of caches by r with its gradient, grads[k] for
// caches[k], as its Step does: the Shared tables whose stores are
// GroupSteppers together, on their stores, by the first such store's
// StepTables, and then each in its cache; the others one after another.
// A table's error stops the step and names the table; on an error of the
// stores' step no cached row has moved. It is how nn.Collection steps a
// model's Shared tables.
func StepShared(ctx context.Context, r rule.Rule, caches []*Cached, grads []*rule.RowGrad) error {
	if len(caches) != len(grads) {
		return fmt.Errorf("table: %d tables and %d gradients: %w", len(caches), len(grads), errs.ErrShape)
	}
	var group []GroupStep
	var grouped []int
	for k, c := range caches {
		if c == nil {
			return fmt.Errorf("table: StepShared: table %d is nil: %w", k, errs.ErrOption)
		}
		_, ok := c.store.(GroupStepper)
		st, isStore := c.store.(Store)
		if !ok || !isStore || !c.shared {
			continue
		}
		if err := c.prepareStep(r, grads[k]); err != nil {
			return err
		}
		group = append(group, GroupStep{Store: st, Rule: r, Grad: grads[k]})
		grouped = append(grouped, k)
	}
	if len(group) > 0 {
		if err := group[0].Store.(GroupStepper).StepTables(ctx, group); err != nil {
			return err
		}
		for _, k := range grouped {
			c := caches[k]
			if err := c.prepareStep(r, grads[k]); err != nil {
				return err
			}
			if err := c.stepCached(r, grads[k]); err != nil {
				return fmt.Errorf("table %q: %w", c.name, err)
			}
		}
	}
	for k, c := range caches {
		if len(grouped) > 0 && slices.Contains(grouped, k) {
			continue
		}
		if err := c.Step(ctx, r, grads[k]); err != nil {
			return err
		}
	}
	return nil
}

// Reset starts the rows of fresh (IDMap.Map's assignments) afresh: row
// a.Row gets init's values for a.ID (a half table's rounded to its
// format, to nearest) and each state column its Init. It brings the rows
// into the cache as a batch of their own and marks them for writing
// back, so call it between batches, before the batch's Fetch.
//
// A Shared table's rows live where its store keeps them. If its store
// has a map beside its rows (a MappedStore, such as cluster.Store with a
// cluster.IDMap), whose Map starts the rows it gives, Reset drops the
// cache's copies of every row that Map gave (fresh and init aside), so
// that the batch's Fetch takes them from what the Map read. Otherwise
// Reset of a Shared table is an error wrapping gather.ErrOption.
func (c *Cached) Reset(ctx context.Context, fresh []Assignment, init RowInit) error {
	if c.closed {
		return fmt.Errorf("table %q: %w", c.name, ErrClosed)
	}
	if c.shared {
		var rows []int64
		ms, ok := c.store.(MappedStore)
		if ok {
			rows, ok = ms.MappedRows()
		}
		if !ok {
			return fmt.Errorf("table %q: a Shared table's rows are started where they live, by a map beside them (a MappedStore's), not by Reset: %w", c.name, errs.ErrOption)
		}
		c.cache.NewBatch()
		for _, row := range rows {
			c.cache.Forget(row)
		}
		return nil
	}
	if len(fresh) == 0 {
		return nil
	}
	if err := init.Check(); err != nil {
		return fmt.Errorf("table %q: %w", c.name, err)
	}
	ids, slots := make([]int64, len(fresh)), make([]int32, len(fresh))
	for k, a := range fresh {
		ids[k] = a.Row
	}
	c.cache.NewBatch()
	if err := c.Fetch(ctx, ids, slots); err != nil {
		return err
	}
	at := make([]int64, len(slots))
	for k, s := range slots {
		at[k] = int64(s)
	}
	initialRows(c.weight, c.state, c.cols, fresh, at, init)
	c.roundNearest(at)
	for _, s := range slots {
		c.cache.MarkDirty(s)
	}
	return nil
}

// Read returns the rows ids names as they are now, from the cache or the
// store, without bringing them into the cache: a [len(ids), width] tensor,
// each row its dim values and then its state.
func (c *Cached) Read(ctx context.Context, ids []int64) (*tensor.Dense, error) {
	if c.closed {
		return nil, fmt.Errorf("table %q: %w", c.name, ErrClosed)
	}
	c.cache.Wait()
	rb := c.store.RowBytes()
	buf := make([]byte, len(ids)*rb)
	var from []int64
	var at []int
	n := c.store.Rows()
	for k, id := range ids {
		if id < 0 || id >= n {
			return nil, fmt.Errorf("table %q: ids[%d] = %d is outside [0, %d): %w", c.name, k, id, n, errs.ErrIndexOutOfRange)
		}
		if s, ok := c.cache.Slot(id); ok {
			c.cache.CopyRow(s, buf[k*rb:(k+1)*rb])
			continue
		}
		from, at = append(from, id), append(at, k)
	}
	if len(from) > 0 {
		tmp := make([]byte, len(from)*rb)
		if err := c.store.ReadRows(ctx, from, tmp); err != nil {
			return nil, fmt.Errorf("table %q: %w", c.name, err)
		}
		for i, k := range at {
			copy(buf[k*rb:(k+1)*rb], tmp[i*rb:(i+1)*rb])
		}
	}
	return floatsAt(buf, 0, c.dt, len(ids), rb/int(c.dt.Size()))
}

// Sync writes every changed row back to the store, with the step count.
// For a table in a file it is durable when Sync returns: the rows and the
// step count go to the journal, which is committed (fsync), applied to
// the file (fsync) and emptied; a crash at any moment leaves the table as
// this Sync or the one before left it, never a mix. Between syncs the
// journal grows with the changed rows the cache evicts; a Fetch syncs on
// its own once it passes FileOptions.JournalLimit.
func (c *Cached) Sync(ctx context.Context) error {
	if c.closed {
		return fmt.Errorf("table %q: %w", c.name, ErrClosed)
	}
	if c.keepSteps {
		if err := c.journal.SetMeta([]byte(formatSteps(c.steps))); err != nil {
			return fmt.Errorf("table %q: %w", c.name, err)
		}
	}
	if err := c.writeIDMap(ctx); err != nil {
		return fmt.Errorf("table %q: %w", c.name, err)
	}
	if err := c.cache.Sync(ctx); err != nil {
		return fmt.Errorf("table %q: %w", c.name, err)
	}
	return nil
}

// CacheStats counts what a Cached table did: the optimiser's steps kept
// with the table (Steps, the t of SparseAdam's bias corrections, saved
// by Sync with the rows), and what Fetch found: ids in the cache (Hits),
// ids it had to bring in (Misses), and of those, how many a Prefetch had
// read (Prefetched).
type CacheStats struct {
	Steps                    int64
	Hits, Misses, Prefetched uint64
}

// HitRate returns Hits / (Hits + Misses), 0 before any Fetch.
func (s CacheStats) HitRate() float64 {
	if s.Hits+s.Misses == 0 {
		return 0
	}
	return float64(s.Hits) / float64(s.Hits+s.Misses)
}

// Stats returns the steps taken and what the cache's Fetches found so far.
func (c *Cached) Stats() CacheStats {
	h, m, p := c.cache.Stats()
	return CacheStats{Steps: c.steps, Hits: h, Misses: m, Prefetched: p}
}

// Close syncs the table, frees the cache's memory and, for a file, closes
// it and frees it for another open. After it, the tensors of Weight and
// State must not be used, and Fetch, Read and Sync fail with ErrClosed.
// A second Close does nothing. ctx bounds the Sync.
func (c *Cached) Close(ctx context.Context) error {
	if c.closed {
		return nil
	}
	err := c.Sync(ctx)
	if e := c.free(); err == nil {
		err = e
	}
	return err
}

// free closes the table without syncing it: it frees the cache's memory
// and, for a file, closes its journal and the file and frees it for
// another open. It returns the first error of those closes.
func (c *Cached) free() error {
	var err error
	c.closed = true
	c.cache.Close()
	if c.journal != nil {
		err = c.journal.Close()
	}
	if c.file != nil {
		c.release()
		if e := c.file.Close(); err == nil {
			err = e
		}
	}
	return err
}
