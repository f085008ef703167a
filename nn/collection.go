package nn

import (
	"fmt"
	"slices"

	"github.com/gathergrad/gather/table/driver"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
	"github.com/gathergrad/gather/internal/rowgrad"
	"github.com/gathergrad/gather/optim"
	"github.com/gathergrad/gather/table"
)

// A Feature is one sparse feature of a Collection: its key, the table its
// ids name rows of and how a sample's ids pool. Two features may name one
// table (TorchRec's shared tables): its rows are looked up for both and
// stepped once, from both gradients.
type Feature struct {
	Key   string
	Table *Embedding // a row-sparse (WithSparse) or frozen embedding, in any home
	Mode  BagMode
	// IDs, if set, maps the feature's raw 64-bit ids to the table's rows
	// (Collection.Map), as RawIDs does: the table has IDs.Rows()+1 rows,
	// its padding row IDs.Rows(). Every feature of a table names the same
	// map, or none does.
	IDs driver.Mapper
}

// CollectionOptions are a Collection's options.
type CollectionOptions struct {
	// Weighted: Bag takes a weight for every id (per-sample weights),
	// which multiplies its row; the weights are data and get no gradient.
	// Sum and mean bags only. PyTorch's per_sample_weights are sum mode's
	// alone: a weighted mean, Σ wᵢ·rowᵢ divided by the bag's number of ids,
	// is this package's extension beyond it.
	Weighted bool
	// Init is how the rows an id map (Feature.IDs) gives new ids start.
	Init driver.RowInit
	// Fused: Step updates each table straight from the gradient of the
	// pooled output, summing each row's gradient for a block of rows at a
	// time, without building the table's row gradient (FBGEMM's fused
	// optimiser): the same values as the unfused step, to the bit. It
	// saves the row gradient's memory, not time: the unfused step's sums
	// run in parallel, the fused blocks one after another. It applies to
	// tables in memory and in files (Weights homes) with sum and mean
	// bags; a cache's table is stepped as without it.
	Fused bool
}

// A Collection is many sparse features looked up, pooled and stepped as
// one, PyTorch TorchRec's EmbeddingBagCollection: one graph node pools
// every feature of a batch (Bag), one backward op captures the gradient
// of all of them, and one Step updates every table.
//
//	c, _ := nn.NewCollection([]nn.Feature{{Key: "user", Table: users}, {Key: "ad", Table: ads}}, nn.CollectionOptions{})
//	pooled, _ := c.Bag(values, offsets, nil)        // [batch, users' dim + ads' dim]
//	gorgonia.Grad(loss, append(dense, c.GradNodes()...)...)
//	...
//	vm.RunAll()
//	c.Step(ctx, &optim.SparseSGD{LearnRate: 0.01})  // every table
//
// Its input is one jagged batch of all features (KeyedJagged, packed by
// Pack): values, the ids of every feature one after another, and
// offsets, where each feature's bags start. A Collection's methods must
// not run concurrently, nor with a run of its graph.
type Collection struct {
	feats  []collFeature
	groups []*collGroup // one per distinct table, in the order of the features that first name them
	width  int          // the output's columns: the features' dims summed
	dtype  tensor.Dtype
	opts   CollectionOptions
	graph  *gorgonia.ExprGraph

	op     *collectionOp // nil before Bag
	tap    *gorgonia.Node
	grads  int          // the row gradients built (see tapCheckDue)
	local  []*collGroup // the groups of trainable tables in memory or files
	mapped []int64      // Map's rows
}

// collFeature is a feature as the collection runs it.
type collFeature struct {
	key   string
	group *collGroup
	mode  kernel.BagMode
	dim   int
	col   int // its first column in the output
	lo    int // where its ids start in its group's ids, this run

	gi     int     // its place among its group's features
	bad    int     // fused: the first value of its gradient that is not finite, or -1
	bounds []int   // its bags' bounds, relative to its first id
	arg    []int32 // a max bag's argmax
	best   []float64
}

// collGroup is one table of a collection with the run's ids of every
// feature that names it, concatenated in feature order.
type collGroup struct {
	e     *Embedding
	dim   int
	feats []int
	ids   []int64       // this run's ids (table rows)
	rows  []int64       // their rows of the home's tensor: ids itself, or a cache's slots
	raw   *RawIDs       // the table's id map, if its features' ids are raw
	rawM  driver.Mapper // its map
	pad   int           // the padding row of the home's tensor, or -1

	// The capture of the backward pass (see collectionOp.capture).
	cids  []int64   // the ids
	grad  floatBuf  // its features' pooled rows' gradient, [len(feats)·batch, dim]
	pos   floatBuf  // unfused: each id's gradient, [len(cids), dim]
	coef  []float64 // fused: each id's coefficient of its bag's gradient
	gOff  []int     // fused: where each id's bag gradient starts in the output's, -1 for padding
	fresh bool

	// The step's memory, kept from one step to the next.
	err    error                     // the step's outcome
	buf    rowgrad.Buffer            // unfused: the row gradient's
	idsT   *tensor.Dense             // unfused: cids as a tensor
	posT   *tensor.Dense             // unfused: pos as a tensor
	empty  *optim.RowGrad            // a gradient of no rows, for the rule's Check
	sort   kernel.RowSort            // fused: the sort's
	order  []kernel.RowPos           // fused: this step's ids, sorted
	at     int                       // fused: the next pair of order
	block  []int64                   // fused: a block's rows
	vals   floatBuf                  // fused: a block's values
	blockT map[int]*tensor.Dense     // fused: vals as [n, dim] tensors, by n
	next   func(*optim.RowGrad) bool // fused: the blocks, one after another
}

// A floatBuf is memory of float32 or float64 values kept for reuse.
type floatBuf struct {
	f32 []float32
	f64 []float64
}

// slot returns b's slice of values of type T.
func slot[T kernel.Float](b *floatBuf) *[]T {
	p, ok := any(&b.f32).(*[]T)
	if !ok {
		p, _ = any(&b.f64).(*[]T)
	}
	return p
}

// grow returns n values of type T in b's memory, growing it if need be.
func grow[T kernel.Float](b *floatBuf, n int) []T {
	p := slot[T](b)
	*p = slices.Grow((*p)[:0], n)[:n]
	return *p
}

// NewCollection returns a collection of features, whose output is their
// pooled rows side by side in the order given. Each table must be
// row-sparse (WithSparse, as CachedEmbedding's are) or frozen, without
// WithMaxNorm or WithScaleGradByFreq, in one graph, of one dtype, and not
// looked up on its own (Lookup, Bag) before or after: the collection
// captures its gradient and steps it. Keys must be distinct and not empty.
// Anything else is an error wrapping gather.ErrOption.
func NewCollection(features []Feature, o CollectionOptions) (*Collection, error) {
	if len(features) == 0 {
		return nil, fmt.Errorf("collection: no features: %w", gather.ErrOption)
	}
	c := &Collection{opts: o}
	seen := map[string]bool{}
	byTable := map[*Embedding]*collGroup{}
	for k, f := range features {
		prefix := fmt.Sprintf("collection: feature %d (%q)", k, f.Key)
		e := f.Table
		switch {
		case f.Key == "" || seen[f.Key]:
			return nil, fmt.Errorf("%s: keys must be distinct and not empty: %w", prefix, gather.ErrOption)
		case e == nil:
			return nil, fmt.Errorf("%s: no table: %w", prefix, gather.ErrOption)
		case e.closed:
			return nil, fmt.Errorf("%s: %w", prefix, table.ErrClosed)
		case !e.cfg.sparse && !e.cfg.frozen:
			return nil, fmt.Errorf("%s: table %q is dense; a collection's tables are row-sparse (WithSparse) or frozen: %w", prefix, e.Name(), gather.ErrOption)
		case e.cfg.maxNorm != 0 || e.cfg.freq:
			return nil, fmt.Errorf("%s: table %q: a collection takes no WithMaxNorm or WithScaleGradByFreq: %w", prefix, e.Name(), gather.ErrOption)
		case len(e.lookups) > 0 || e.coll != nil && e.coll != c:
			return nil, fmt.Errorf("%s: table %q is looked up elsewhere (a Lookup, a Bag or another collection): %w", prefix, e.Name(), gather.ErrOption)
		case f.Mode != BagSum && f.Mode != BagMean && f.Mode != BagMax:
			return nil, fmt.Errorf("%s: unknown pooling mode %v: %w", prefix, f.Mode, gather.ErrOption)
		case o.Weighted && f.Mode == BagMax:
			return nil, fmt.Errorf("%s: weights apply to sum and mean bags: %w", prefix, gather.ErrOption)
		case o.Fused && f.Mode == BagMax:
			return nil, fmt.Errorf("%s: the fused step applies to sum and mean bags: %w", prefix, gather.ErrOption)
		}
		if c.graph == nil {
			c.graph, c.dtype = e.Table.Graph(), e.Table.Dtype()
		} else if e.Table.Graph() != c.graph || e.Table.Dtype() != c.dtype {
			return nil, fmt.Errorf("%s: table %q is in another graph or of another dtype (%v) than the first (%v): %w",
				prefix, e.Name(), e.Table.Dtype(), c.dtype, gather.ErrOption)
		}
		seen[f.Key] = true
		g := byTable[e]
		if g == nil {
			g = &collGroup{e: e, dim: e.Table.Shape()[1], pad: -1}
			if e.cfg.hasPad {
				g.pad = e.home.padRow(e.cfg.pad)
			}
			byTable[e] = g
			c.groups = append(c.groups, g)
		}
		dim := e.Table.Shape()[1]
		c.feats = append(c.feats, collFeature{key: f.Key, group: g, mode: bagKernel(f.Mode), dim: dim, col: c.width, gi: len(g.feats)})
		if len(g.feats) > 0 && g.rawM != f.IDs {
			return nil, fmt.Errorf("%s: table %q is named by features with different id maps (or one with and one without): %w", prefix, e.Name(), gather.ErrOption)
		}
		if f.IDs != nil && g.raw == nil {
			r, err := NewRawIDs(e, f.IDs, o.Init)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", prefix, err)
			}
			g.raw, g.rawM = r, f.IDs
		}
		g.feats = append(g.feats, k)
		c.width += dim
	}
	for _, g := range c.groups {
		g.e.coll = c
		if g.local() && !g.e.cfg.frozen {
			c.local = append(c.local, g)
		}
	}
	return c, nil
}

// Keys returns the features' keys in order.
func (c *Collection) Keys() []string {
	keys := make([]string, len(c.feats))
	for k, f := range c.feats {
		keys[k] = f.key
	}
	return keys
}

// Width returns the number of the output's columns: the features' dims
// summed.
func (c *Collection) Width() int { return c.width }

// Bag adds to the graph the pooled lookup of every feature: a [batch,
// Width()] node whose columns are each feature's pooled rows, in feature
// order (feature k's dim columns after those of features 0..k-1).
//
// values is an Int64 vector of any length, the ids of every feature one
// after another; offsets is an Int64 vector of len(features)·batch+1
// entries, TorchRec's offsets: sample b's ids of feature k are
// values[offsets[k·batch+b]:offsets[k·batch+b+1]]. offsets[0] must be 0,
// offsets non-decreasing and the last at most len(values): the values
// after it are not read, so a values vector of fixed capacity takes
// batches of any number of ids. weights is nil or, with Weighted, a
// vector shaped like values of the tables' dtype.
//
// Each feature pools as EmbeddingBag of its table with its mode (its
// table's padding id skipped), to the same bits as that table's own Bag;
// an id outside [0, vocab) of its table is an *gather.IndexError naming
// the table, and bad offsets an error wrapping gather.ErrShape, when the
// graph runs, before the output is written. A collection has one Bag.
func (c *Collection) Bag(values, offsets, weights *gorgonia.Node) (*gorgonia.Node, error) {
	const prefix = "collection"
	if c.op != nil {
		return nil, fmt.Errorf("%s: Bag was called already; a collection pools one batch input: %w", prefix, gather.ErrGraph)
	}
	for _, g := range c.groups {
		if g.e.closed {
			return nil, fmt.Errorf("%s: table %q: %w", prefix, g.e.Name(), table.ErrClosed)
		}
	}
	if values == nil || offsets == nil {
		return nil, fmt.Errorf("%s: values and offsets must be nodes: %w", prefix, gather.ErrShape)
	}
	if values.Dtype() != tensor.Int64 || offsets.Dtype() != tensor.Int64 || values.Dims() != 1 || offsets.Dims() != 1 {
		return nil, fmt.Errorf("%s: values and offsets must be Int64 vectors, got %v %v and %v %v: %w",
			prefix, values.Dtype(), values.Shape(), offsets.Dtype(), offsets.Shape(), gather.ErrShape)
	}
	nf := len(c.feats)
	no := offsets.Shape()[0]
	if no < 1 || (no-1)%nf != 0 {
		return nil, fmt.Errorf("%s: offsets has %d entries; want len(features)·batch+1 = %d·batch+1: %w", prefix, no, nf, gather.ErrShape)
	}
	if (weights != nil) != c.opts.Weighted {
		return nil, fmt.Errorf("%s: weights are given exactly when the collection is Weighted: %w", prefix, gather.ErrOption)
	}
	in := gorgonia.Nodes{values, offsets}
	if weights != nil {
		if weights.Dtype() != c.dtype || !operand.SameShape(weights.Shape(), values.Shape()) {
			return nil, fmt.Errorf("%s: weights are %v of shape %v; want %v of shape %v: %w",
				prefix, weights.Dtype(), weights.Shape(), c.dtype, values.Shape(), gather.ErrShape)
		}
		in = append(in, weights)
	}
	batch := (no - 1) / nf
	shape := tensor.Shape{batch, c.width}
	c.tap = gorgonia.NewMatrix(c.graph, c.dtype, gorgonia.WithShape(batch, c.width), gorgonia.WithName(fmt.Sprintf("collection%p/tap", c)),
		gorgonia.WithValue(tensor.New(tensor.Of(c.dtype), tensor.WithShape(batch, c.width))))
	in = append(in, c.tap)
	types := make([]hm.Type, len(in))
	diff := make([]bool, len(in))
	for k, n := range in {
		types[k] = n.Type()
	}
	diff[len(in)-1] = true
	o := &collectionOp{c: c, batch: batch, shape: shape, weighted: weights != nil}
	o.passGrad = passGrad{what: prefix, Op: opkit.New(opkit.Sig{Name: "Collection", Diff: diff, In: types, Dtype: c.dtype, Shape: shape}, fmt.Sprintf("%p", c))}
	out, err := opkit.Apply(prefix, o, in...)
	if err != nil {
		return nil, err
	}
	c.op = o
	return out, nil
}

// GradNodes returns the node to differentiate with respect to alongside
// the model's other learnables, as Embedding.GradNodes: an input of zeros
// added to the output, whose gradient is the output's, O(batch × Width()).
// It is nil before Bag.
func (c *Collection) GradNodes() gorgonia.Nodes {
	if c.tap == nil {
		return nil
	}
	return gorgonia.Nodes{c.tap}
}
