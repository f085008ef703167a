package table

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/checkpoint"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/rowcache"
	"github.com/gathergrad/gather/internal/tablerows"
)

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
	cols  []driver.Column
	info  checkpoint.TensorInfo
	dim   int
	half  driver.Format // the values' format, 0 for the tensor's own
	id    string        // "" for a file made before tables had identities
	steps bool          // the file records a step count
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
	var cols []driver.Column
	if len(infos) == 1 {
		if n, ok := strings.CutSuffix(infos[0].Name, rowsSuffix); ok {
			name = n
			if _, cols, err = driver.ParseLayout(meta[driver.LayoutKey]); err != nil {
				return none, fmt.Errorf("table %q: %s: %w", name, path, err)
			}
			if len(cols) == 0 {
				return none, fmt.Errorf("table %q: %s: metadata %q = %q names no state for a table of %q: %w", name, path, driver.LayoutKey, meta[driver.LayoutKey], infos[0].Name, checkpoint.ErrFormat)
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
	var half driver.Format
	if v, ok := meta[valuesKey]; ok {
		for _, f := range []driver.Format{driver.Float16, driver.BFloat16} {
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
	dim, _, _ := driver.ParseLayout(meta[driver.LayoutKey])
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

func openCached(ctx context.Context, f *os.File, path, name string, t rowsFile, cols []driver.Column, o CacheOptions, fo FileOptions) (*Cached, error) {
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
		at, err := stepsOffset(f)
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

// stepsOffset returns the offset in f of the step count's digits, the
// metadata entry stepKey of its header.
func stepsOffset(f *os.File) (int64, error) {
	at, n, err := checkpoint.MetaAt(f, stepKey)
	if err == nil && n != stepDigits {
		err = fmt.Errorf("a step count of %d digits, not %d", n, stepDigits)
	}
	return at, err
}
