package table

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/rowcache"
	"github.com/gathergrad/gather/internal/tablerows"
)

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

// layout returns the name of the tensor of a table file of rows dim wide
// with the state cols, its row width and its metadata: a new identity
// (idKey), the step count 0 and, with state, the columns.
func layout(prefix, name string, dim int, cols []driver.Column) (key string, width int, meta map[string]string, err error) {
	meta = map[string]string{idKey: newID(), stepKey: formatSteps(0)}
	if len(cols) == 0 {
		return name + ".weight", dim, meta, nil
	}
	desc, width, err := tablerows.Describe(prefix, dim, cols)
	if err != nil {
		return "", 0, nil, err
	}
	meta[driver.LayoutKey] = desc
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
	// its own rows, driver.Stepper, such as a cluster.Store, whose servers
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
	cols   []driver.Column
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

	half    driver.Format // the store's values, 0 for full precision
	nearest bool          // round stepped values to nearest, not stochastically
	seed    uint64        // the stochastic rounding's
}

// NewCached returns a cache in front of store, holding as many of its
// rows as o.Budget allows: rows of the store's Schema (float32 or
// float64 values, or half-precision values that the cache holds as
// float32, then the state). The store's rows start with step count 0
// (see Stats).
func NewCached(ctx context.Context, store driver.Store, o CacheOptions) (*Cached, error) {
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
	var half driver.Format
	if isHalf(sc.Format) {
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
func newCached(ctx context.Context, store rowcache.Store, name string, dim int, dt tensor.Dtype, cols []driver.Column, half driver.Format, o CacheOptions) (*Cached, error) {
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
		if _, ok := store.(driver.Stepper); !ok {
			cache.Close()
			return nil, fmt.Errorf("%s: a Shared table needs a store that steps its rows itself (a driver.Stepper, such as a cluster.Store), not %T: %w", prefix, store, errs.ErrOption)
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
