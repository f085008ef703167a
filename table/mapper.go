package table

import (
	"fmt"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/table/driver"
)

// CheckMapper returns nil if the rows m gives can be read and started
// through c: c is a Shared table of m's store for a StoreMapper, and not
// Shared for any other map (its Reset starts the rows). Anything else is
// an error wrapping gather.ErrOption.
func CheckMapper(c *Cached, m driver.Mapper) error {
	if c == nil || m == nil {
		return fmt.Errorf("table: CheckMapper needs a table and a map: %w", errs.ErrOption)
	}
	sm, ok := m.(driver.StoreMapper)
	switch {
	case ok && (!c.shared || c.store != sm.Store()):
		return fmt.Errorf("table %q: the map %q starts its rows on its store: they are read and stepped through a Shared Cached table of that store: %w", c.name, m.Name(), errs.ErrOption)
	case !ok && c.shared:
		return fmt.Errorf("table %q: a Shared table's rows are started where they live, by a map beside them (a StoreMapper, such as cluster.IDMap), not by %T: %w", c.name, m, errs.ErrOption)
	}
	return nil
}
