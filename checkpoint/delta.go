package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
)

// ErrDelta: a delta that does not follow the version it is applied to
// (another base, or a sequence number not one more than the served one).
var ErrDelta = errors.New("delta does not follow the served version")

// The metadata keys of a delta file: base and sequence, and the tables
// with their times as JSON ([{"table": name, "time": ns}]).
const (
	deltaBaseKey   = "gathergrad.delta.base"
	deltaSeqKey    = "gathergrad.delta.seq"
	deltaTablesKey = "gathergrad.delta.tables"
	// deltaSumKey holds the CRC-32C (Castagnoli) of the rest of the
	// delta's header as deltaSum writes it: its version, its tables and
	// the names, dtypes and shapes of its tensors, whose data the
	// tensors' own checksums cover.
	deltaSumKey = "gathergrad.delta.sum"
)

// deltaSum returns the checksum deltaSumKey holds for a delta file's
// metadata meta and tensors ts.
func deltaSum[T tensor.Tensor](meta map[string]string, ts map[string]T) string {
	var b strings.Builder
	for _, k := range []string{deltaBaseKey, deltaSeqKey, deltaTablesKey} {
		fmt.Fprintf(&b, "%s=%q\n", k, meta[k])
	}
	names := make([]string, 0, len(ts))
	for name := range ts {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(&b, "%q %v %v\n", name, ts[name].Dtype(), []int(ts[name].Shape()))
	}
	return fmt.Sprintf("%08x", crc32.Checksum([]byte(b.String()), castagnoli))
}

// deltaEntry is a table's entry in a delta file's metadata.
type deltaEntry struct {
	Table string `json:"table"`
	Time  int64  `json:"time,omitempty"`
}

// WriteDelta writes d to path as WriteDeltas writes a delta of one table
// and no dense parameters.
func WriteDelta(path string, d *driver.Delta) error {
	return WriteDeltas(path, []*driver.Delta{d}, nil)
}

// ReadDelta reads a file of one delta (WriteDelta). A file of other
// deltas or with dense parameters is an error wrapping ErrFormat, as
// every file ReadDeltas refuses.
func ReadDelta(path string) (*driver.Delta, error) {
	ds, dense, err := ReadDeltas(path)
	if err != nil {
		return nil, err
	}
	if len(ds) != 1 || len(dense) != 0 {
		return nil, formatError(path, "a file of %d deltas and %d dense tensors, not of one delta", len(ds), len(dense))
	}
	return ds[0], nil
}

// WriteDeltas writes, into one file at path, one version of a model that
// keeps training: the deltas ds of its tables (of one Base and Seq, each
// table once) and, whole, its dense parameters (say, the layers' weights,
// which every step changes), as a safetensors file: for each table
// "<table>.rows", int64 [n], "<table>.values", float32 [n, dim], and with
// assignments "<table>.assigned", int64 [m, 2] of (row, id); each dense
// tensor under its name; the version and the tables in its metadata. It
// writes as Write writes: atomically (a server that polls for the file
// sees all of it or none), every tensor's CRC-32C beside it, and a
// CRC-32C of the delta's header (its version, tables, and its tensors'
// names, dtypes and shapes). No delta, a
// delta not well formed (Check), deltas of different versions, a table
// twice, or a dense name that is one of the tables' tensors is an error
// wrapping ErrShape, and nothing is written. It is O(the rows' values and
// the dense values).
func WriteDeltas(path string, ds []*driver.Delta, dense map[string]tensor.Tensor) error {
	ts, meta, err := deltaTensors(ds, dense)
	if err != nil {
		return err
	}
	return Write(path, ts, meta)
}

// EncodeDeltas returns the bytes of the file WriteDeltas writes, for a
// store that is not a file system (say, cluster.Store.PublishDelta); its
// errors are WriteDeltas'.
func EncodeDeltas(ds []*driver.Delta, dense map[string]tensor.Tensor) ([]byte, error) {
	ts, meta, err := deltaTensors(ds, dense)
	if err != nil {
		return nil, err
	}
	return encode(ts, meta)
}

// DecodeDeltas reads the bytes EncodeDeltas returns (or of a file
// WriteDeltas wrote) as ReadDeltas reads the file; name names them in
// errors.
func DecodeDeltas(b []byte, name string) ([]*driver.Delta, map[string]*tensor.Dense, error) {
	ts, meta, err := decode(b, name)
	if err != nil {
		return nil, nil, err
	}
	return fromTensors(ts, meta, name)
}

// deltaTensors returns the tensors and metadata of WriteDeltas' file.
func deltaTensors(ds []*driver.Delta, dense map[string]tensor.Tensor) (map[string]tensor.Tensor, map[string]string, error) {
	if len(ds) == 0 {
		return nil, nil, fmt.Errorf("checkpoint: no delta to write: %w", errs.ErrShape)
	}
	ts := make(map[string]tensor.Tensor, 3*len(ds)+len(dense))
	entries := make([]deltaEntry, len(ds))
	for k, d := range ds {
		if err := d.Check(); err != nil {
			return nil, nil, err
		}
		if d.Base != ds[0].Base || d.Seq != ds[0].Seq {
			return nil, nil, fmt.Errorf("checkpoint: delta of %q is %d of base %d, of %q %d of base %d: one file holds one version: %w",
				d.Table, d.Seq, d.Base, ds[0].Table, ds[0].Seq, ds[0].Base, errs.ErrShape)
		}
		if _, ok := ts[d.Table+".rows"]; ok {
			return nil, nil, fmt.Errorf("checkpoint: two deltas of %q: %w", d.Table, errs.ErrShape)
		}
		entries[k] = deltaEntry{Table: d.Table, Time: d.Time}
		rows := tensor.New(tensor.WithShape(len(d.Rows)), tensor.WithBacking(d.Rows))
		vals := tensor.New(tensor.WithShape(len(d.Rows), d.Dim), tensor.WithBacking(d.Values))
		if len(d.Rows) == 0 {
			rows = tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(0))
			vals = tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(0, d.Dim))
		}
		ts[d.Table+".rows"], ts[d.Table+".values"] = rows, vals
		if n := len(d.AssignedRows); n > 0 {
			pairs := make([]int64, 0, 2*n)
			for k, r := range d.AssignedRows {
				pairs = append(pairs, r, d.AssignedIDs[k])
			}
			ts[d.Table+".assigned"] = tensor.New(tensor.WithShape(n, 2), tensor.WithBacking(pairs))
		}
	}
	for _, d := range ds { // after all tables' names are known
		if _, ok := dense[d.Table+".assigned"]; ok {
			return nil, nil, fmt.Errorf("checkpoint: a dense tensor named %q, a delta's: %w", d.Table+".assigned", errs.ErrShape)
		}
	}
	for name, t := range dense {
		if _, ok := ts[name]; ok {
			return nil, nil, fmt.Errorf("checkpoint: a dense tensor named %q, a delta's: %w", name, errs.ErrShape)
		}
		ts[name] = t
	}
	tables, err := json.Marshal(entries)
	if err != nil {
		return nil, nil, err
	}
	meta := map[string]string{
		deltaBaseKey:   strconv.FormatUint(ds[0].Base, 10),
		deltaSeqKey:    strconv.FormatUint(ds[0].Seq, 10),
		deltaTablesKey: string(tables),
	}
	meta[deltaSumKey] = deltaSum(meta, ts)
	return ts, meta, nil
}

// ReadDeltas reads a file WriteDeltas (or WriteDelta) wrote: its deltas in
// the order written and its dense tensors by name. A file that is not one
// (no delta metadata, a table's tensors missing or of shapes or dtypes
// that do not fit, a delta not well formed), or whose bytes or header
// fail their CRC-32C (a changed sequence number, say), is an error
// wrapping ErrFormat, never a panic.
func ReadDeltas(path string) ([]*driver.Delta, map[string]*tensor.Dense, error) {
	ts, meta, err := Read(path)
	if err != nil {
		return nil, nil, err
	}
	return fromTensors(ts, meta, path)
}

// fromTensors returns the deltas and dense tensors of a delta file's
// tensors and metadata (the file at path).
func fromTensors(ts map[string]*tensor.Dense, meta map[string]string, path string) ([]*driver.Delta, map[string]*tensor.Dense, error) {
	base, berr := strconv.ParseUint(meta[deltaBaseKey], 10, 64)
	seq, serr := strconv.ParseUint(meta[deltaSeqKey], 10, 64)
	var entries []deltaEntry
	if berr != nil || serr != nil || json.Unmarshal([]byte(meta[deltaTablesKey]), &entries) != nil || len(entries) == 0 {
		return nil, nil, formatError(path, "not a delta: its metadata (%q %q %q)", meta[deltaBaseKey], meta[deltaSeqKey], meta[deltaTablesKey])
	}
	if sum, ok := meta[deltaSumKey]; !ok || sum != deltaSum(meta, ts) {
		return nil, nil, formatError(path, "the delta's header fails its checksum %q: its version, tables or shapes changed since it was written", sum)
	}
	ds := make([]*driver.Delta, len(entries))
	for k, e := range entries {
		name := e.Table
		rows, vals := ts[name+".rows"], ts[name+".values"]
		if rows == nil || vals == nil || rows.Dtype() != tensor.Int64 || vals.Dtype() != tensor.Float32 ||
			rows.Dims() != 1 || vals.Dims() != 2 || vals.Shape()[0] != rows.Shape()[0] {
			return nil, nil, formatError(path, "not a delta of %q: its tensors %q and %q", name, name+".rows", name+".values")
		}
		d := &driver.Delta{Table: name, Base: base, Seq: seq, Dim: vals.Shape()[1], Time: e.Time}
		if rows.Shape()[0] > 0 {
			d.Rows, d.Values = rows.Int64s(), vals.Float32s()
		}
		delete(ts, name+".rows")
		delete(ts, name+".values")
		if assigned := ts[name+".assigned"]; assigned != nil {
			if assigned.Dtype() != tensor.Int64 || assigned.Dims() != 2 || assigned.Shape()[1] != 2 {
				return nil, nil, formatError(path, "not a delta of %q: its tensor %q", name, name+".assigned")
			}
			for k, v := range assigned.Int64s() {
				if k%2 == 0 {
					d.AssignedRows = append(d.AssignedRows, v)
				} else {
					d.AssignedIDs = append(d.AssignedIDs, v)
				}
			}
			delete(ts, name+".assigned")
		}
		if err := d.Check(); err != nil {
			return nil, nil, formatError(path, "%v", err)
		}
		ds[k] = d
	}
	return ds, ts, nil
}
