package driver

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gathergrad/gather/internal/errs"
)

// LayoutKey is the metadata entry of a table file with optimiser state
// (table.WithState) that describes its rows: "weight:<dim>,<column>:<width>,..."
// (ParseLayout).
const LayoutKey = "gathergrad.columns"

// ParseLayout returns the values and the state of a row that desc, a
// table file's LayoutKey metadata, describes: "weight:64,sum:1" is rows
// of 64 values and one column "sum" one value wide. A description that
// is not one is an error wrapping ErrFormat.
func ParseLayout(desc string) (dim int, cols []Column, err error) {
	parts := strings.Split(desc, ",")
	for k, p := range parts {
		name, w, ok := strings.Cut(p, ":")
		n, err := strconv.Atoi(w)
		if !ok || err != nil || n <= 0 || (k == 0) != (name == "weight") || name == "" {
			return 0, nil, fmt.Errorf("metadata %s = %q does not describe a table's rows (\"weight:<dim>,<column>:<width>,...\"): %w", LayoutKey, desc, ErrFormat)
		}
		if k == 0 {
			dim = n
			continue
		}
		if slices.ContainsFunc(cols, func(c Column) bool { return c.Name == name }) {
			return 0, nil, fmt.Errorf("metadata %s = %q names the column %q twice: %w", LayoutKey, desc, name, ErrFormat)
		}
		cols = append(cols, Column{Name: name, Width: n})
	}
	if _, _, err := Layout(dim, cols); err != nil {
		return 0, nil, fmt.Errorf("metadata %s = %q: %v: %w", LayoutKey, desc, err, ErrFormat)
	}
	return dim, cols, nil
}

// Layout returns the LayoutKey description of rows of dim values with the
// state cols ("weight:64,sum:1") and the rows' width in values. A column
// without a name, named "weight", with ',' or ':' in its name, narrower
// than 1 or with an Init that is not finite is an error wrapping
// gather.ErrOption.
func Layout(dim int, cols []Column) (desc string, width int, err error) {
	parts := []string{fmt.Sprintf("weight:%d", dim)}
	width = dim
	for _, c := range cols {
		if c.Name == "" || c.Name == "weight" || strings.ContainsAny(c.Name, ",:") || c.Width <= 0 || math.IsNaN(c.Init) || math.IsInf(c.Init, 0) {
			return "", 0, fmt.Errorf("state column %+v: a column needs a name other than \"weight\", without ',' or ':', "+
				"a width of at least 1 and a finite Init: %w", c, errs.ErrOption)
		}
		parts = append(parts, fmt.Sprintf("%s:%d", c.Name, c.Width))
		width += c.Width
	}
	return strings.Join(parts, ","), width, nil
}
