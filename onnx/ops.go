package onnx

import (
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/onnxpb"
	"github.com/gathergrad/gather/nn"
)

// An op builds one ONNX operator.
type op struct {
	inputs int      // required inputs
	attrs  []string // the attributes it reads; a node with another is refused
	build  func(c *call) (*gorgonia.Node, error)
}

// ops are the operators Import reads, by op type.
var ops map[string]op

func init() {
	unary := func(f func(*gorgonia.Node) (*gorgonia.Node, error)) op {
		return op{1, nil, func(c *call) (*gorgonia.Node, error) { return f(c.in[0]) }}
	}
	binary := func(plain func(a, b *gorgonia.Node) (*gorgonia.Node, error), bc func(a, b *gorgonia.Node, l, r []byte) (*gorgonia.Node, error)) op {
		return op{2, nil, func(c *call) (*gorgonia.Node, error) { return broadcast(c.in[0], c.in[1], plain, bc) }}
	}
	ops = map[string]op{
		"Gather": {2, []string{"axis"}, func(c *call) (*gorgonia.Node, error) {
			axis, err := c.axis("axis", 0, c.in[0].Dims())
			if err != nil {
				return nil, err
			}
			if emb, ok := c.b.sparse[c.in[0]]; ok {
				if axis != 0 {
					return nil, fmt.Errorf("a sparse table is gathered along axis 0, not %d: %w", axis, errs.ErrOption)
				}
				return emb.Lookup(c.in[1])
			}
			opts := []gather.GatherOption{gather.WithName(c.name)}
			if p, ok := c.b.padding[c.in[0]]; ok && axis == 0 {
				opts = append(opts, gather.WithPaddingIndex(p))
			}
			return gather.Gather(c.in[0], c.in[1], axis, opts...)
		}},
		"GatherElements": {2, []string{"axis"}, func(c *call) (*gorgonia.Node, error) {
			axis, err := c.axis("axis", 0, c.in[0].Dims())
			if err != nil {
				return nil, err
			}
			return gather.GatherElements(c.in[0], c.in[1], axis, gather.WithName(c.name))
		}},
		"Gemm":     {2, []string{"alpha", "beta", "transA", "transB"}, gemm},
		"MatMul":   {2, nil, matMul},
		"Add":      binary(gorgonia.Add, gorgonia.BroadcastAdd),
		"Sub":      binary(gorgonia.Sub, gorgonia.BroadcastSub),
		"Mul":      binary(gorgonia.HadamardProd, gorgonia.BroadcastHadamardProd),
		"Div":      binary(gorgonia.HadamardDiv, gorgonia.BroadcastHadamardDiv),
		"Neg":      unary(gorgonia.Neg),
		"Exp":      unary(gorgonia.Exp),
		"Log":      unary(gorgonia.Log),
		"Relu":     unary(gorgonia.Rectify),
		"Sigmoid":  unary(gorgonia.Sigmoid),
		"Tanh":     unary(gorgonia.Tanh),
		"Identity": unary(func(x *gorgonia.Node) (*gorgonia.Node, error) { return x, nil }),
		"Cast": {1, []string{"to"}, func(c *call) (*gorgonia.Node, error) {
			to := c.int("to", 0)
			if et, ok := elemType(c.in[0].Dtype()); !ok || int64(et) != to {
				return nil, fmt.Errorf("a Cast of %v to %v: Import reads a Cast to the type its input has (a half weight read as float): %w",
					c.in[0].Dtype(), onnxpb.TensorProto_DataType(to), errs.ErrOption)
			}
			return c.in[0], nil
		}},
		"Concat": {1, []string{"axis"}, func(c *call) (*gorgonia.Node, error) {
			axis, err := c.axis("axis", 0, c.in[0].Dims())
			if err != nil {
				return nil, err
			}
			return nn.Concat(axis, c.in...)
		}},
		"Flatten": {1, []string{"axis"}, func(c *call) (*gorgonia.Node, error) {
			x := c.in[0]
			r := x.Dims()
			a := c.int("axis", 1)
			if a < -int64(r) || a > int64(r) {
				return nil, fmt.Errorf("axis %d for rank %d (Flatten takes [-r, r]): %w", a, r, errs.ErrAxisOutOfRange)
			}
			if a < 0 {
				a += int64(r)
			}
			axis, s := int(a), x.Shape()
			return gorgonia.Reshape(x, tensor.Shape{s[:axis].TotalSize(), s[axis:].TotalSize()})
		}},
		"Reshape": {2, []string{"allowzero"}, reshape},
		"Transpose": {1, []string{"perm"}, func(c *call) (*gorgonia.Node, error) {
			perm := c.ints("perm")
			axes := make([]int, len(perm))
			for k, p := range perm {
				axes[k] = int(p)
			}
			return gorgonia.Transpose(c.in[0], axes...)
		}},
		"LogSoftmax": {1, []string{"axis"}, func(c *call) (*gorgonia.Node, error) {
			axis, err := c.axis("axis", -1, c.in[0].Dims())
			if err != nil {
				return nil, err
			}
			return nn.LogSoftmax(c.in[0], axis)
		}},
		"Softmax": {1, []string{"axis"}, func(c *call) (*gorgonia.Node, error) {
			axis, err := c.axis("axis", -1, c.in[0].Dims())
			if err != nil {
				return nil, err
			}
			l, err := nn.LogSoftmax(c.in[0], axis)
			if err != nil {
				return nil, err
			}
			return gorgonia.Exp(l)
		}},
		"ReduceSum":  {1, []string{"keepdims", "noop_with_empty_axes"}, reduce(nn.Sum, true)},
		"ReduceMean": {1, []string{"axes", "keepdims"}, reduce(nn.Mean, false)},
		"Constant": {0, []string{"value"}, func(c *call) (*gorgonia.Node, error) {
			a := c.attr("value")
			if a == nil || a.GetT() == nil || len(c.np.GetAttribute()) != 1 {
				return nil, fmt.Errorf("a Constant is read with its one attribute value (a tensor): %w", errs.ErrOption)
			}
			v, err := decode(a.GetT())
			if err != nil {
				return nil, err
			}
			c.out = v
			return c.b.leaf(c.np.GetOutput()[0], v), nil
		}},
	}
}

// broadcast applies plain to a and b of one shape, or bc with the
// patterns that broadcast them to one shape as numpy does.
func broadcast(a, b *gorgonia.Node, plain func(a, b *gorgonia.Node) (*gorgonia.Node, error), bc func(a, b *gorgonia.Node, l, r []byte) (*gorgonia.Node, error)) (*gorgonia.Node, error) {
	as, bs := a.Shape(), b.Shape()
	if as.Eq(bs) || a.IsScalar() || b.IsScalar() {
		return plain(a, b)
	}
	r := max(len(as), len(bs))
	var err error
	if a, err = toRank(a, r); err != nil {
		return nil, err
	}
	if b, err = toRank(b, r); err != nil {
		return nil, err
	}
	as, bs = a.Shape(), b.Shape()
	var left, right []byte
	for i := range r {
		switch {
		case as[i] == bs[i]:
		case as[i] == 1:
			left = append(left, byte(i))
		case bs[i] == 1:
			right = append(right, byte(i))
		default:
			return nil, fmt.Errorf("shapes %v and %v do not broadcast: %w", as, bs, errs.ErrShape)
		}
	}
	if left == nil && right == nil {
		return plain(a, b)
	}
	return bc(a, b, left, right)
}

// toRank returns x reshaped to rank r by leading dimensions of 1.
func toRank(x *gorgonia.Node, r int) (*gorgonia.Node, error) {
	s := x.Shape()
	if len(s) == r {
		return x, nil
	}
	to := make(tensor.Shape, r)
	for i := range r - len(s) {
		to[i] = 1
	}
	copy(to[r-len(s):], s)
	return gorgonia.Reshape(x, to)
}

// gemm builds Gemm: alpha·A'·B' + beta·C, A' = Aᵀ if transA, B' = Bᵀ if
// transB, C broadcast. PyTorch's nn.Linear (transB 1, alpha and beta 1,
// C of [out]) is nn.Linear.
func gemm(c *call) (*gorgonia.Node, error) {
	a, b := c.in[0], c.in[1]
	var cc *gorgonia.Node
	if len(c.in) > 2 {
		cc = c.in[2]
	}
	alpha, beta := c.float("alpha", 1), c.float("beta", 1)
	transA, transB := c.int("transA", 0), c.int("transB", 0)
	if a.Dims() != 2 || b.Dims() != 2 {
		return nil, fmt.Errorf("A and B of shapes %v and %v must be matrices: %w", a.Shape(), b.Shape(), errs.ErrShape)
	}
	if transA == 0 && transB == 1 && isOne(alpha) && isOne(beta) && (cc == nil || (cc.Dims() == 1 && cc.Shape()[0] == b.Shape()[0])) {
		return nn.Linear(a, b, cc)
	}
	var err error
	if transA != 0 {
		if a, err = gorgonia.Transpose(a); err != nil {
			return nil, err
		}
	}
	if transB != 0 {
		if b, err = gorgonia.Transpose(b); err != nil {
			return nil, err
		}
	}
	y, err := gorgonia.Mul(a, b)
	if err != nil {
		return nil, err
	}
	if !isOne(alpha) {
		if y, err = gorgonia.Mul(y, c.scalar(y, alpha)); err != nil {
			return nil, err
		}
	}
	if cc == nil {
		return y, nil
	}
	if !isOne(beta) {
		if cc, err = gorgonia.Mul(cc, c.scalar(cc, beta)); err != nil {
			return nil, err
		}
	}
	return broadcast(y, cc, gorgonia.Add, gorgonia.BroadcastAdd)
}

// matMul builds MatMul of two matrices, a matrix and a vector, two
// vectors, or two stacks of matrices (rank 3, one batch dimension).
func matMul(c *call) (*gorgonia.Node, error) {
	a, b := c.in[0], c.in[1]
	switch {
	case a.Dims() == 2 && (b.Dims() == 2 || b.Dims() == 1), a.Dims() == 1 && b.Dims() == 1:
		return gorgonia.Mul(a, b)
	case a.Dims() == 3 && b.Dims() == 3 && a.Shape()[0] == b.Shape()[0]:
		return gorgonia.BatchedMatMul(a, b)
	}
	return nil, fmt.Errorf("inputs of shapes %v and %v: Import reads MatMul of matrices, a matrix and a vector, vectors, and stacks of matrices of one batch: %w", a.Shape(), b.Shape(), errs.ErrOption)
}

// reshape builds Reshape to a shape known when the graph is built: 0
// keeps the input's dimension (allowzero 0), -1 takes what is left.
func reshape(c *call) (*gorgonia.Node, error) {
	if c.int("allowzero", 0) != 0 {
		return nil, fmt.Errorf("allowzero 1: %w", errs.ErrOption)
	}
	want, err := c.constInts(1, "the shape")
	if err != nil {
		return nil, err
	}
	x := c.in[0]
	s := x.Shape()
	to := make(tensor.Shape, len(want))
	infer, known := -1, 1
	for k, d := range want {
		switch {
		case d == 0 && k < len(s):
			to[k] = s[k]
		case d == -1 && infer < 0:
			infer = k
			continue
		case d > 0 && d <= maxElements:
			to[k] = int(d)
		default:
			return nil, fmt.Errorf("shape %v for an input of shape %v: %w", want, s, errs.ErrShape)
		}
		known *= to[k]
	}
	if infer >= 0 {
		if known == 0 || s.TotalSize()%known != 0 {
			return nil, fmt.Errorf("shape %v for an input of shape %v: %w", want, s, errs.ErrShape)
		}
		to[infer] = s.TotalSize() / known
	}
	if to.TotalSize() != s.TotalSize() {
		return nil, fmt.Errorf("shape %v for an input of shape %v: %w", want, s, errs.ErrShape)
	}
	return gorgonia.Reshape(x, to)
}

// reduce builds ReduceSum (its axes an input from opset 13) or
// ReduceMean (its axes an attribute), keepdims honoured.
func reduce(f func(*gorgonia.Node, bool, ...int) (*gorgonia.Node, error), axesInput bool) func(c *call) (*gorgonia.Node, error) {
	return func(c *call) (*gorgonia.Node, error) {
		x := c.in[0]
		var axes []int64
		if axesInput {
			if len(c.in) > 1 && c.in[1] != nil {
				var err error
				if axes, err = c.constInts(1, "the axes"); err != nil {
					return nil, err
				}
			}
		} else {
			axes = c.ints("axes")
		}
		if len(axes) == 0 {
			if c.int("noop_with_empty_axes", 0) != 0 {
				return x, nil
			}
			for k := range x.Dims() {
				axes = append(axes, int64(k))
			}
		}
		r := x.Dims()
		along := make([]int, 0, len(axes))
		for _, a := range axes {
			k, err := normAxis("axis", a, r)
			if err != nil {
				return nil, err
			}
			along = append(along, k)
		}
		return f(x, c.int("keepdims", 1) != 0, along...)
	}
}
