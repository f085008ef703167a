package table

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
)

// idMapMagic opens the state of an IDMap kept in a table's rows.
const idMapMagic = "GGIDMAP1"

// encode returns the map's state as FileOptions.IDMap keeps it: idMapMagic, then
// each tensor of State, little-endian, in a fixed order. Its length
// depends on the options alone.
func (m *IDMap) encode() []byte {
	st, _ := m.State() // State fails only if the generator cannot marshal, which PCG's does not
	b := []byte(idMapMagic)
	for _, key := range m.stateKeys() {
		switch v := st[m.name+".idmap."+key].(*tensor.Dense).Data().(type) {
		case []int64:
			for _, x := range v {
				b = binary.LittleEndian.AppendUint64(b, uint64(x))
			}
		case []int32:
			for _, x := range v {
				b = binary.LittleEndian.AppendUint32(b, uint32(x))
			}
		case []uint32:
			for _, x := range v {
				b = binary.LittleEndian.AppendUint32(b, x)
			}
		case []uint8:
			b = append(b, v...)
		}
	}
	return b
}

// stateKeys returns the keys of the map's State, in encode's order.
func (m *IDMap) stateKeys() []string {
	keys := []string{stateID, stateLast, stateUses, stateLinks, stateFree, stateMeta, stateRNG}
	if m.cms != nil {
		keys = append(keys, stateSketch)
	}
	return keys
}

// decode sets the map from b, as encode wrote it (SetState's checks). It
// reports false, and changes nothing, for bytes that are all zero: rows
// no map was kept in yet.
func (m *IDMap) decode(b []byte) (bool, error) {
	if allZero(b) {
		return false, nil
	}
	if len(b) < len(idMapMagic) || string(b[:len(idMapMagic)]) != idMapMagic {
		return false, m.formatError("the rows kept for it do not start %q", idMapMagic)
	}
	st, _ := m.State() // the shapes and dtypes to read
	b = b[len(idMapMagic):]
	in := map[string]*tensor.Dense{}
	for _, key := range m.stateKeys() {
		t := st[m.name+".idmap."+key].(*tensor.Dense)
		n := t.Shape().TotalSize()
		size := n * int(t.Dtype().Size())
		if len(b) < size {
			return false, m.formatError("the rows kept for it end inside %s", key)
		}
		switch v := t.Data().(type) {
		case []int64:
			for k := range v {
				v[k] = int64(binary.LittleEndian.Uint64(b[8*k:]))
			}
		case []int32:
			for k := range v {
				v[k] = int32(binary.LittleEndian.Uint32(b[4*k:]))
			}
		case []uint32:
			for k := range v {
				v[k] = binary.LittleEndian.Uint32(b[4*k:])
			}
		case []uint8:
			copy(v, b[:n])
		}
		in[m.name+".idmap."+key] = t
		b = b[size:]
	}
	return true, m.SetState(in)
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// IDMapRows returns how many rows of rowBytes bytes (a table file's
// Schema().Rows' bytes: Store.RowBytes) hold the state of an IDMap of
// options o, as FileOptions.IDMap keeps it: make the table that many rows
// larger. It is O(o.Rows).
func IDMapRows(o driver.IDMapOptions, rowBytes int) (int64, error) {
	m, err := NewIDMap("", o)
	if err != nil {
		return 0, err
	}
	if rowBytes <= 0 {
		return 0, fmt.Errorf("table: IDMapRows of rows of %d bytes: %w", rowBytes, errs.ErrOption)
	}
	return int64((len(m.encode()) + rowBytes - 1) / rowBytes), nil
}

// keepIDMap keeps m in the table file's rows from first on
// (FileOptions.IDMap).
func (c *Cached) keepIDMap(ctx context.Context, m *IDMap, first int64) error {
	if c.closed {
		return fmt.Errorf("table %q: %w", c.name, ErrClosed)
	}
	if c.journal == nil {
		return fmt.Errorf("table %q: an id map is kept in a table file's rows (OpenCached): %w", c.name, errs.ErrOption)
	}
	rb := c.journal.RowBytes()
	k, err := IDMapRows(m.o, rb)
	if err != nil {
		return err
	}
	if first <= int64(m.o.Rows) || first+k > c.journal.Rows() {
		return fmt.Errorf("table %q: the id map %q needs rows %d to %d, past its %d rows and default row, of the table's %d: %w",
			c.name, m.name, first, first+k-1, m.o.Rows, c.journal.Rows(), errs.ErrOption)
	}
	ids := make([]int64, k)
	for i := range ids {
		ids[i] = first + int64(i)
	}
	c.cache.Wait()
	buf := make([]byte, int(k)*rb)
	if err := c.journal.ReadRows(ctx, ids, buf); err != nil {
		return fmt.Errorf("table %q: %w", c.name, err)
	}
	if c.steps == 0 && string(buf[:len(idMapMagic)]) != idMapMagic {
		// A table not stepped yet: its rows hold Create's values, no map.
	} else if _, err := m.decode(buf); err != nil {
		return fmt.Errorf("table %q: %w", c.name, err)
	}
	c.idmap, c.idmapRows = m, ids
	return nil
}

// writeIDMap writes the kept map's state into its rows (of the journal,
// committed by the Sync that follows).
func (c *Cached) writeIDMap(ctx context.Context) error {
	if c.idmap == nil {
		return nil
	}
	b := c.idmap.encode()
	b = append(b, make([]byte, len(c.idmapRows)*c.journal.RowBytes()-len(b))...)
	return c.journal.WriteRows(ctx, c.idmapRows, b)
}
