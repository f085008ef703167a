package table

import (
	"github.com/gathergrad/gather/table/driver"
	"gorgonia.org/gorgonia"
)

// WithInit sets the initialiser: fn(dt, rows, dim) is called once per
// block of up to 4,096 rows and must return a []float32 or []float64 (as
// dt says) of rows×dim values, row-major. The default draws from N(0, 1)
// with WithSeed's seed.
func WithInit(fn gorgonia.InitWFn) driver.Option { return func(c *driver.Config) { c.Init = fn } }

// WithSeed seeds the default initialiser (0 without it): the table holds
// the values nn.NewEmbedding draws with nn.WithSeed(seed).
func WithSeed(seed uint64) driver.Option { return func(c *driver.Config) { c.Seed = seed } }

// WithPadding starts row i at zero (PyTorch's padding_idx); negative i
// counts from the end of the vocabulary. Give nn.OpenEmbedding
// nn.WithPadding(i) too, so that the row receives no gradient.
func WithPadding(i int) driver.Option { return func(c *driver.Config) { c.HasPad, c.Pad = true, i } }

// WithReplace lets Create replace a file that exists at path (unless an
// open table holds it: that is ErrInUse whatever the options). Without
// it, an existing file is an error wrapping os.ErrExist.
func WithReplace() driver.Option { return func(c *driver.Config) { c.Replace = true } }

// WithState gives each row of the table the optimiser state cols, each
// value its column's Init to start, stored beside its values: the file then holds
// "<name>.rows", a [vocab, dim + the columns' widths] tensor, each row its
// dim values and then its state, so that one read brings both in. Open
// such a file with OpenCached. optim's sparse optimisers give their
// columns (optim.SparseAdam.Columns, ...).
func WithState(cols ...driver.Column) driver.Option { return func(c *driver.Config) { c.State = cols } }

// WithHalf stores the table's values in the half format f, two bytes
// each, rounded to nearest from the initial values (float32 tables only):
// without state the file holds "<name>.weight" as F16 or BF16, which
// PyTorch's safetensors loads as torch.half or torch.bfloat16; with
// state, "<name>.rows" as bytes (U8), each row its dim half values and
// then its float32 state. OpenCached trains it, its steps computed in
// float32 and rounded back (CacheOptions.Rounding).
func WithHalf(f driver.Format) driver.Option { return func(c *driver.Config) { c.Half = int(f) } }
