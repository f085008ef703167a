package nn

import (
	"context"
	"fmt"
	"slices"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/kernel"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
	"github.com/gathergrad/gather/internal/parallel"
	"github.com/gathergrad/gather/internal/rowgrad"
	"github.com/gathergrad/gather/internal/shapes"
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
	IDs table.Mapper
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
	Init table.RowInit
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
	ids   []int64 // this run's ids (table rows)
	rows  []int64 // their rows of the home's tensor: ids itself, or a cache's slots
	slots []int32
	raw   *RawIDs      // the table's id map, if its features' ids are raw
	rawM  table.Mapper // its map
	pad   int          // the padding row of the home's tensor, or -1

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
		if weights.Dtype() != c.dtype || !shapes.SameShape(weights.Shape(), values.Shape()) {
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

// Step updates every trainable table by opt from the gradient the
// backward pass of the last run that computed it captured, as
// Embedding.Step does for its lookups: each table once, from the
// gradients of all its features (in feature order), as one step of its
// home (a cache's Step, a file's mapping, the heap's table), each
// table's rows split across goroutines by its rule; tables in caches by
// table.StepShared, which steps the Shared tables of one Redis Cluster
// together, in one pipelined round trip per master for all of them. Unfused, each table's
// row gradient is built in memory kept for the next step; Fused, none is
// built (CollectionOptions.Fused). Once its memory has grown, a step of
// tables in memory allocates nothing.
//
// opt's settings are checked before any table moves. A Step with no run
// that computed the gradient since the last Step is an error wrapping
// gather.ErrGraph and changes nothing. A table's home that fails (a cache
// whose store is gone) is an error naming the table; the other tables
// have moved.
func (c *Collection) Step(ctx context.Context, opt optim.Sparse) error {
	if opt == nil {
		return fmt.Errorf("collection: Step needs an optimiser, such as &optim.SparseSGD{...}: %w", gather.ErrOption)
	}
	if err := c.checkCaptured(); err != nil {
		return err
	}
	for _, g := range c.groups {
		if g.e.cfg.frozen {
			continue
		}
		dim := g.dim
		if g.empty == nil {
			g.empty = &optim.RowGrad{Values: tensor.New(tensor.Of(c.dtype), tensor.WithShape(0, dim))}
		}
		if err := opt.Check(1, g.empty, dim); err != nil {
			return fmt.Errorf("collection: table %q: %w", g.e.Name(), err)
		}
	}
	if c.opts.Fused {
		if err := c.checkFinite(); err != nil {
			return err
		}
	}
	if tapCheckDue(c.grads) {
		if err := checkTap(fmt.Sprintf("collection of %q", c.groups[0].e.Name()), c.tap); err != nil {
			return err
		}
	}
	c.grads++
	// The tables in memory and files, then those in caches together.
	for _, g := range c.local {
		g.err = c.stepGroup(ctx, g, opt)
	}
	c.stepCaches(ctx, opt)
	var first error
	for _, g := range c.groups {
		if g.e.cfg.frozen {
			continue
		}
		g.fresh = false
		if g.err == nil {
			g.e.markChanged(g.cids)
		} else if first == nil {
			first = fmt.Errorf("collection: table %q: %w", g.e.Name(), g.err)
		}
		g.err = nil
	}
	return first
}

// local reports whether g's table is in memory or a file (the heap's
// table or a mapping), which no other table's step touches.
func (g *collGroup) local() bool {
	switch g.e.home.(type) {
	case *heap, *mapped:
		return true
	}
	return false
}

// checkCaptured reports an error unless every trainable table's gradient
// was captured since the last Step.
func (c *Collection) checkCaptured() error {
	if c.op == nil {
		return fmt.Errorf("collection: Step before Bag: %w", gather.ErrGraph)
	}
	for _, g := range c.groups {
		if g.e.closed {
			return fmt.Errorf("collection: table %q: %w", g.e.Name(), table.ErrClosed)
		}
		if !g.e.cfg.frozen && !g.fresh {
			return fmt.Errorf("collection: no run of the graph computed a gradient since the last Step: run it (vm.RunAll) with the gradient of GradNodes first: %w", gather.ErrGraph)
		}
	}
	return nil
}

// stepCaches steps the trainable tables in caches (CachedEmbedding), by
// table.StepShared: the Shared tables of a Redis Cluster together, in
// one pipelined round trip per master. Each group's error is set in
// g.err.
func (c *Collection) stepCaches(ctx context.Context, opt optim.Sparse) {
	var caches []*table.Cached
	var grads []*optim.RowGrad
	var groups []*collGroup
	for _, g := range c.groups {
		if g.e.cfg.frozen || g.local() {
			continue
		}
		rg, err := c.rowGrad(g)
		if err != nil {
			g.err = err
			return
		}
		caches, grads, groups = append(caches, g.e.home.(*cached).c), append(grads, rg), append(groups, g)
	}
	if len(groups) == 0 {
		return
	}
	if err := table.StepShared(ctx, opt, caches, grads); err != nil {
		groups[0].err = err
		return
	}
	for _, g := range groups {
		g.e.home.(*cached).fetched = 0
	}
}

// stepGroup steps the table of g.
func (c *Collection) stepGroup(ctx context.Context, g *collGroup, opt optim.Sparse) error {
	if c.opts.Fused {
		if b, ok := g.e.home.(blockStepper); ok {
			g.order, g.at = kernel.SortRows(g.cids, g.e.home.Vocab(), &g.sort), 0
			if g.next == nil {
				g.next = func(rg *optim.RowGrad) bool { return c.nextBlock(g, rg) }
			}
			return b.stepBlocks(ctx, opt, g.next)
		}
	}
	rg, err := c.rowGrad(g)
	if err != nil {
		return err
	}
	return g.e.home.step(ctx, opt, rg)
}

// rowGrad returns the row gradient of g's table, built in g's memory.
func (c *Collection) rowGrad(g *collGroup) (*optim.RowGrad, error) {
	e, dim := g.e, g.dim
	if c.opts.Fused { // a home that steps no blocks: each id's gradient, now
		operand.PickFloat(c.dtype, fusedPositions[float32], fusedPositions[float64])(g, dim)
	}
	n := len(g.cids)
	if n == 0 {
		g.idsT = tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(0))
		g.posT = tensor.New(tensor.Of(c.dtype), tensor.WithShape(0, dim))
	} else {
		g.idsT = operand.Header(g.idsT, g.cids, n)
		if c.dtype == tensor.Float32 {
			g.posT = operand.Header(g.posT, g.pos.f32[:n*dim], n, dim)
		} else {
			g.posT = operand.Header(g.posT, g.pos.f64[:n*dim], n, dim)
		}
	}
	return rowgrad.Build(g.idsT, g.posT, e.home.Vocab(), e.padding(), &g.buf)
}

// A blockStepper is a home that steps its rows from a row gradient given
// in blocks (optim.MemoryTable.StepBlocks).
type blockStepper interface {
	stepBlocks(ctx context.Context, opt optim.Sparse, next func(g *optim.RowGrad) bool) error
}

func (h *heap) stepBlocks(ctx context.Context, opt optim.Sparse, next func(g *optim.RowGrad) bool) error {
	t, err := h.rows(opt)
	if err != nil {
		return err
	}
	return t.StepBlocks(ctx, opt, next)
}

func (m *mapped) stepBlocks(ctx context.Context, opt optim.Sparse, next func(g *optim.RowGrad) bool) error {
	return m.file.Guard(func() error { return m.heap.stepBlocks(ctx, opt, next) })
}

// fusedBlock is how many rows a block of the fused step holds.
const fusedBlock = 256

// nextBlock sets rg to the next block of the fused step of g's table, at
// most fusedBlock rows from g.order on, and reports whether there was
// one: the rows in ascending order, each the sum, in the order of its
// ids, of what each id received, as rowgrad.Build sums them.
func (c *Collection) nextBlock(g *collGroup, rg *optim.RowGrad) bool {
	order, k, start := g.order, g.at, g.at
	rows := g.block[:0]
	for k < len(order) && len(rows) < fusedBlock {
		r := order[k].Row
		if r != g.pad {
			rows = append(rows, int64(r))
		}
		for k < len(order) && order[k].Row == r { // a row's pairs stay in one block
			k++
		}
	}
	g.block, g.at = rows, k
	if len(rows) == 0 {
		return false
	}
	dim := g.dim
	if g.blockT == nil {
		g.blockT = map[int]*tensor.Dense{}
	}
	vals := g.blockT[len(rows)]
	if c.dtype == tensor.Float32 {
		v := grow[float32](&g.vals, fusedBlock*dim)
		vals = operand.Header(vals, v[:len(rows)*dim], len(rows), dim)
		sumBlock(v, g.grad.f32, g, order[start:k], dim)
	} else {
		v := grow[float64](&g.vals, fusedBlock*dim)
		vals = operand.Header(vals, v[:len(rows)*dim], len(rows), dim)
		sumBlock(v, g.grad.f64, g, order[start:k], dim)
	}
	g.blockT[len(rows)] = vals
	rg.Rows, rg.Values = rows, vals
	return true
}

// sumBlock sets dst to the gradients of the rows of order (sorted by row,
// then position) but padding, one after another: each id's gradient is
// coef·grad[its bag], rounded, and a row's are summed in the order of its
// positions, as kernel.BagPositionGrad and kernel.SumRows compute them.
func sumBlock[T kernel.Float](dst, grad []T, g *collGroup, order []kernel.RowPos, dim int) {
	slot, prev := -1, -1
	for _, o := range order {
		if o.Row == g.pad {
			continue
		}
		off := g.gOff[o.Pos]
		src, c := grad[off:off+dim], T(g.coef[o.Pos])
		if o.Row != prev { // the row's first id
			slot, prev = slot+1, o.Row
			out := dst[slot*dim : slot*dim+dim]
			if c == 1 { // T(1·v) is v
				copy(out, src)
				continue
			}
			for j, v := range src {
				out[j] = T(c * v)
			}
			continue
		}
		out := dst[slot*dim : slot*dim+dim]
		if c == 1 {
			for j, v := range src {
				out[j] += v
			}
			continue
		}
		for j, v := range src {
			out[j] += T(c * v)
		}
	}
}

// fusedPositions sets g.pos to the gradient each id of g received, from
// the captured gradient.
func fusedPositions[T kernel.Float](g *collGroup, dim int) {
	p, gs := grow[T](&g.pos, len(g.cids)*dim), *slot[T](&g.grad)
	for i := range g.cids {
		out := p[i*dim : (i+1)*dim]
		if g.gOff[i] < 0 {
			clear(out)
			continue
		}
		c, src := T(g.coef[i]), gs[g.gOff[i]:][:dim]
		for j := range out {
			out[j] = T(c * src[j])
		}
	}
}

// collectionOp is the op of Collection.Bag: values, offsets, weights (if
// weighted) and the tap in, [batch, width] out. Its gradient with respect
// to the tap is a collCaptureOp of the output's.
type collectionOp struct {
	passGrad
	c        *Collection
	batch    int
	shape    tensor.Shape
	weighted bool

	run collRun // a run's work on the features
}

// Do pools into a new tensor.
func (o *collectionOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) { return o.do(nil, in) }

// UsePreallocDo pools into prealloc when it can hold the result.
func (o *collectionOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	out, ok := prealloc.(*tensor.Dense)
	if !ok || out.Dtype() != o.c.dtype || !shapes.SameShape(out.Shape(), o.shape) || !shapes.Writable(out) {
		out = nil
	}
	for _, v := range in {
		if out != nil && overlapsValue(out, v) {
			out = nil
		}
	}
	return o.do(out, in)
}

// do checks the run's input, brings each table's rows where it reads
// them and pools every feature into out (new if nil).
func (o *collectionOp) do(out *tensor.Dense, in []gorgonia.Value) (gorgonia.Value, error) {
	c := o.c
	if err := operand.CheckArity("collection", "", len(in), o.Arity()); err != nil {
		return nil, err
	}
	values, offsets, wv, err := o.read(in)
	if err != nil {
		return nil, err
	}
	// Each group's ids, checked, and their rows.
	for _, g := range c.groups {
		if g.e.closed {
			return nil, fmt.Errorf("collection: table %q: the graph ran after Close: %w", g.e.Name(), table.ErrClosed)
		}
		g.ids = g.ids[:0]
		vocab := g.e.home.Vocab()
		for _, k := range g.feats {
			f := &c.feats[k]
			lo, hi := int(offsets[k*o.batch]), int(offsets[(k+1)*o.batch])
			f.lo = len(g.ids)
			for p, id := range values[lo:hi] {
				if id < 0 || id >= int64(vocab) {
					return nil, &errs.IndexError{Op: "collection", Name: g.e.Name(), Arg: fmt.Sprintf("values (feature %q)", f.key),
						Pos: []int{lo + p}, Value: id, Size: vocab, NonNegative: true}
				}
			}
			g.ids = append(g.ids, values[lo:hi]...)
		}
		if err := g.fetch(); err != nil {
			return nil, err
		}
	}
	if out == nil {
		out = operand.NewOutput(c.dtype, o.shape)
	}
	o.features(collRun{o: o, offsets: offsets, weights: wv, out: out})
	return out, nil
}

// read reads and checks the run's values, offsets and weights.
func (o *collectionOp) read(in []gorgonia.Value) (values, offsets []int64, weights *tensor.Dense, err error) {
	v, err := operand.Read("collection", "values", in[0])
	if err != nil {
		return nil, nil, nil, err
	}
	off, err := operand.Read("collection", "offsets", in[1])
	if err != nil {
		return nil, nil, nil, err
	}
	if v.Dtype() != tensor.Int64 || off.Dtype() != tensor.Int64 || off.Shape().TotalSize() != len(o.c.feats)*o.batch+1 {
		return nil, nil, nil, fmt.Errorf("collection: values (%v) and offsets (%v %v) must be Int64, offsets of %d entries: %w",
			v.Dtype(), off.Dtype(), off.Shape(), len(o.c.feats)*o.batch+1, gather.ErrShape)
	}
	values, offsets = v.Int64s(), off.Int64s()
	if offsets[0] != 0 {
		return nil, nil, nil, fmt.Errorf("collection: offsets[0] is %d, want 0: %w", offsets[0], gather.ErrShape)
	}
	for k := 1; k < len(offsets); k++ {
		if offsets[k] < offsets[k-1] || offsets[k] > int64(len(values)) {
			return nil, nil, nil, fmt.Errorf("collection: offsets[%d] = %d is below offsets[%d] = %d or past the %d values: %w",
				k, offsets[k], k-1, offsets[k-1], len(values), gather.ErrShape)
		}
	}
	if o.weighted {
		if weights, err = operand.Read("collection", "weights", in[2]); err != nil {
			return nil, nil, nil, err
		}
		if weights.Dtype() != o.c.dtype || weights.Shape().TotalSize() != len(values) {
			return nil, nil, nil, fmt.Errorf("collection: weights are %v of shape %v, want %v of %d: %w",
				weights.Dtype(), weights.Shape(), o.c.dtype, len(values), gather.ErrShape)
		}
	}
	return values, offsets, weights, nil
}

// fetch sets g.rows to the rows of its home's tensor that g.ids name: the
// ids themselves, or, in a cache, the slots the rows are brought to (one
// fetch for all the table's features, which starts the cache's batch).
func (g *collGroup) fetch() error {
	h, ok := g.e.home.(*cached)
	if !ok {
		g.rows = g.ids
		return nil
	}
	n := len(g.ids)
	g.slots = slices.Grow(g.slots[:0], n)[:n]
	h.c.NewBatch()
	if err := h.c.Fetch(h.context(), g.ids, g.slots); err != nil {
		return fmt.Errorf("collection: table %q: %w", g.e.Name(), err)
	}
	if len(h.next) > 0 {
		h.c.Prefetch(h.context(), h.next)
		h.next = h.next[:0]
	}
	g.rows = slices.Grow(g.rows[:0], n)[:n]
	for p, s := range g.slots {
		g.rows[p] = int64(s)
	}
	return nil
}

// featureBags returns feature k's bags over its ids (in its bounds).
func (o *collectionOp) featureBags(k int, offsets []int64) kernel.Bags {
	f := &o.c.feats[k]
	base := offsets[k*o.batch]
	f.bounds = slices.Grow(f.bounds[:0], o.batch+1)[:o.batch+1]
	for b := range o.batch + 1 {
		f.bounds[b] = int(offsets[k*o.batch+b] - base)
	}
	return kernel.Bags{Bounds: f.bounds, Pad: f.group.pad, Mode: f.mode}
}

// collRun is a run's work on the features, split across goroutines by
// feature (parallel.Run): pooling them (grad nil) or, in the backward
// pass, the gradient each of their ids received.
type collRun struct {
	o       *collectionOp
	offsets []int64
	weights *tensor.Dense
	out     *tensor.Dense // pooling: the output
	grad    *tensor.Dense // the backward pass: the output's gradient
}

func (r *collRun) Part(lo, hi int) int {
	for k := lo; k < hi; k++ {
		if r.grad == nil {
			operand.PickFloat(r.o.c.dtype, collPool[float32], collPool[float64])(r, k)
		} else if !r.o.c.feats[k].group.e.cfg.frozen {
			operand.PickFloat(r.o.c.dtype, captureFeature[float32], captureFeature[float64])(r, k)
		}
	}
	return -1
}

// features runs r on every feature.
func (o *collectionOp) features(r collRun) {
	o.run = r
	parallel.Run(len(o.c.feats), o.batch*o.c.width, &o.run)
	o.run = collRun{}
}

// weightsOf returns feature k's weights (nil without), n of them.
func weightsOf[T kernel.Float](wt *tensor.Dense, offsets []int64, k, batch, n int) []T {
	if wt == nil {
		return nil
	}
	return operand.Floats[T](wt)[offsets[k*batch]:][:n]
}

// collPool pools feature k into its columns of the output.
func collPool[T kernel.Float](r *collRun, k int) {
	o := r.o
	c, dst := o.c, operand.Floats[T](r.out)
	f := &c.feats[k]
	g := f.group
	bg := o.featureBags(k, r.offsets)
	bg.Stride = c.width
	n := bg.Bounds[o.batch]
	kernel.BagPool(dst[f.col:], operand.Floats[T](g.e.home.rowTensor()), g.rows[f.lo:f.lo+n], weightsOf[T](r.weights, r.offsets, k, o.batch, n), f.dim, &bg)
}

// SymDiff gives the tap a collCaptureOp of the output's gradient.
func (o *collectionOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if err := errs.CheckGradSize(o.what, grad); err != nil {
		return nil, err
	}
	inputs = append(gorgonia.Nodes{grad}, inputs[:len(inputs)-1]...)
	types := make([]hm.Type, len(inputs))
	for k, n := range inputs {
		types[k] = n.Type()
	}
	op := &collCaptureOp{o: o, Op: opkit.New(opkit.Sig{Name: "CollectionCapture", PassThrough: true, In: types, Dtype: o.c.dtype, Shape: o.shape}, fmt.Sprintf("%p", o))}
	n, err := gorgonia.ApplyOp(op, inputs...)
	if err != nil {
		return nil, fmt.Errorf("collection: %w", errs.Graph(err))
	}
	out := make(gorgonia.Nodes, len(inputs))
	out[len(out)-1] = n
	return out, nil
}

// DoDiff captures the gradient, for Gorgonia's LispMachine.
func (o *collectionOp) DoDiff(ctx gorgonia.ExecutionContext, inputs gorgonia.Nodes, output *gorgonia.Node) error {
	if err := o.passGrad.DoDiff(ctx, inputs, output); err != nil {
		return err
	}
	up, err := output.Grad()
	if err != nil {
		return fmt.Errorf("collection: %w", errs.Graph(err))
	}
	vals := make([]gorgonia.Value, len(inputs)-1)
	for k, n := range inputs[:len(inputs)-1] {
		vals[k] = n.Value()
	}
	return o.capture(up, vals)
}

// collCaptureOp is the gradient of the collection's tap: it records the
// run's ids and gradient (collectionOp.capture) and returns the gradient.
type collCaptureOp struct {
	opkit.Op
	o *collectionOp
}

func (op *collCaptureOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity("collection", " capture", len(in), op.Arity()); err != nil {
		return nil, err
	}
	if err := op.o.capture(in[0], in[1:]); err != nil {
		return nil, err
	}
	return in[0], nil
}

// capture records, for each table, the ids of the run and the gradient
// each received (unfused), or the ids, the output gradient and what each
// id's gradient is of it (fused), from the upstream gradient up and the
// op's inputs (values, offsets, weights). On error the tables' captures
// are not fresh.
func (o *collectionOp) capture(up gorgonia.Value, in []gorgonia.Value) error {
	c := o.c
	for _, g := range c.groups {
		g.fresh = false
	}
	gt, err := operand.Read("collection", "gradient", up)
	if err != nil {
		return err
	}
	if gt.Dtype() != c.dtype || !shapes.SameShape(gt.Shape(), o.shape) {
		return fmt.Errorf("collection gradient: %v of shape %v, want %v of shape %v: %w", gt.Dtype(), gt.Shape(), c.dtype, o.shape, gather.ErrShape)
	}
	_, offsets, wt, err := o.read(in)
	if err != nil {
		return err
	}
	for _, g := range c.groups {
		if g.e.cfg.frozen {
			continue
		}
		g.cids = append(g.cids[:0], g.ids...)
		n, m := len(g.ids)*g.dim, len(g.feats)*o.batch*g.dim
		if c.dtype == tensor.Float32 {
			grow[float32](&g.grad, m)
		} else {
			grow[float64](&g.grad, m)
		}
		if c.opts.Fused {
			g.gOff, g.coef = slices.Grow(g.gOff[:0], len(g.ids))[:len(g.ids)], slices.Grow(g.coef[:0], len(g.ids))[:len(g.ids)]
		} else if c.dtype == tensor.Float32 {
			grow[float32](&g.pos, n)
		} else {
			grow[float64](&g.pos, n)
		}
	}
	o.features(collRun{o: o, offsets: offsets, weights: wt, grad: gt})
	for _, g := range c.groups {
		g.fresh = !g.e.cfg.frozen
	}
	return nil
}

// captureFeature copies feature k's columns of the output's gradient into
// its block of its table's gradient; then, fused, it finds the block's
// first value that is not finite and sets, for each of its ids, where its
// bag's gradient is and the coefficient of it that is the id's gradient
// (its weight, over the bag's count for a mean); unfused, it sets its part
// of the table's pos to the gradient each id received. Both are as
// EmbeddingBag's backward computes them (kernel.BagPositionGrad).
func captureFeature[T kernel.Float](r *collRun, k int) {
	o := r.o
	c, f := o.c, &o.c.feats[k]
	g, dim := f.group, f.dim
	up := operand.Floats[T](r.grad)
	block := (*slot[T](&g.grad))[f.gi*o.batch*dim:][:o.batch*dim]
	for b := range o.batch {
		copy(block[b*dim:(b+1)*dim], up[b*c.width+f.col:][:dim])
	}
	bg := o.featureBags(k, r.offsets)
	n := bg.Bounds[o.batch]
	fw := weightsOf[T](r.weights, r.offsets, k, o.batch, n)
	rows := g.rows[f.lo : f.lo+n]
	if c.opts.Fused {
		f.bad = kernel.FirstNonFinite(block)
		for b := range o.batch {
			lo, hi := bg.Bounds[b], bg.Bounds[b+1]
			inv := T(1)
			if f.mode == kernel.BagMean {
				m := 0
				for _, r := range rows[lo:hi] {
					if int(r) != g.pad {
						m++
					}
				}
				if m > 0 {
					inv = 1 / T(m)
				}
			}
			for i := lo; i < hi; i++ {
				p := f.lo + i
				if int(rows[i]) == g.pad {
					g.gOff[p] = -1
					continue
				}
				cf := inv
				if fw != nil {
					cf = fw[i] * inv
				}
				g.gOff[p], g.coef[p] = (f.gi*o.batch+b)*dim, float64(cf)
			}
		}
		return
	}
	table := operand.Floats[T](g.e.home.rowTensor())
	var arg []int32
	if f.mode == kernel.BagMax {
		m := o.batch * dim
		f.arg, f.best = slices.Grow(f.arg[:0], m)[:m], slices.Grow(f.best[:0], m)[:m]
		kernel.BagArgmaxInto(f.arg, f.best, table, rows, fw, dim, &bg)
		arg = f.arg
	}
	pos := *slot[T](&g.pos)
	kernel.BagPositionGrad(pos[f.lo*dim:(f.lo+n)*dim], block, rows, fw, len(table)/dim, dim, &bg, arg)
}

// checkFinite reports an error wrapping optim.ErrNotFinite if the captured
// gradient of a trainable table holds a NaN or an infinity: the fused step
// refuses it before any row moves, whatever the rule.
func (c *Collection) checkFinite() error {
	for _, f := range c.feats {
		if !f.group.e.cfg.frozen && f.bad >= 0 {
			b, d := f.bad/f.dim, f.bad%f.dim
			return fmt.Errorf("collection: the gradient of feature %q, sample %d, column %d, is not finite; the fused step moves no row: %w",
				f.key, b, d, optim.ErrNotFinite)
		}
	}
	return nil
}

var (
	_ gorgonia.SDOp            = (*collectionOp)(nil)
	_ gorgonia.ADOp            = (*collectionOp)(nil)
	_ gorgonia.UsePreallocDoer = (*collectionOp)(nil)
)
