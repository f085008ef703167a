// Package tablerows makes the rows of a new table, for every home that
// writes one (a file, a Redis Cluster): the options of a new table, its
// initial blocks of rows, the description of a row's layout, and the
// initial row of a raw id.
package tablerows

import (
	"fmt"
	"math/rand/v2"

	"github.com/gathergrad/gather/table/driver"

	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/kernel"
)

// Block returns the rows rows of a table from row r0 on (a multiple of
// kernel.NormalBlock), width values each, of dtype dt (Go type T): the
// dim values cfg's initialiser gives (Init, called once for the block,
// or N(0, 1) drawn as nn.NewEmbedding draws with Seed; the padding row
// zero), then the state's Init values. buf holds at least rows*dim
// values, and wide rows*width when width > dim; the result is in one of
// them. Errors start with prefix.
func Block[T float32 | float64](cfg driver.Config, prefix string, dt tensor.Dtype, r0 int64, rows, dim, width int, buf, wide []T) ([]T, error) {
	v := buf[:rows*dim]
	if cfg.Init == nil {
		// One block per call: kernel.Normal seeds it by its row.
		kernel.Normal(v, cfg.Seed, dim, int(r0))
	} else {
		got, ok := cfg.Init(dt, rows, dim).([]T)
		if !ok || len(got) != len(v) {
			return nil, fmt.Errorf("%s: the initialiser returned a %T of %d values for a block of (%d, %d): %w", prefix, got, len(got), rows, dim, errs.ErrShape)
		}
		copy(v, got)
	}
	if p := int64(cfg.Pad); cfg.HasPad && p >= r0 && p < r0+int64(rows) {
		clear(v[(p-r0)*int64(dim):][:dim])
	}
	if width == dim {
		return v, nil
	}
	w := wide[:rows*width]
	for r := range rows {
		copy(w[r*width:r*width+dim], v[r*dim:(r+1)*dim])
		InitState(w[r*width+dim:(r+1)*width], cfg.State)
	}
	return w, nil
}

// InitState sets the state of a new row, the values after its dim
// values, to each column's Init.
func InitState[T float32 | float64](state []T, cols []driver.Column) {
	for _, c := range cols {
		for j := range c.Width {
			state[j] = T(c.Init)
		}
		state = state[c.Width:]
	}
}

// Describe returns the description of rows of dim values and the state
// cols that a table's metadata holds ("weight:64,sum:1"), and the rows'
// width in values. A column without a name, named "weight", with ',' or
// ':' in its name, narrower than 1 or with an Init that is not finite is
// an error wrapping errs.ErrOption; errors start with prefix.
func Describe(prefix string, dim int, cols []driver.Column) (string, int, error) {
	desc, width, err := driver.Layout(dim, cols)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", prefix, err)
	}
	return desc, width, nil
}

// Mix hashes x with the seed d (SplitMix64's finaliser): the hash of an
// id map's sketch, its tags and its initial rows.
func Mix(x, d uint64) uint64 {
	x += (d + 1) * 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// FillRow sets dst to the initial values of the row of raw id id: std
// times N(0, 1) draws from a generator seeded by (seed, id), each the
// float64 product rounded once to T; zeros for std 0.
func FillRow[T float32 | float64](seed uint64, std float64, dst []T, id int64) {
	if std == 0 {
		clear(dst)
		return
	}
	r := rand.New(rand.NewPCG(seed, Mix(uint64(id), 7)))
	for i := range dst {
		dst[i] = T(r.NormFloat64() * std)
	}
}
