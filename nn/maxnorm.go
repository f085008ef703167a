package nn

import (
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/opconfig"
	"github.com/gathergrad/gather/internal/operand"
	"github.com/gathergrad/gather/internal/opkit"
	"github.com/gathergrad/gather/internal/shapes"
)

// renormOp rescales in place each row of the table that its ids name and
// whose L2 norm exceeds maxNorm, by maxNorm/(norm+1e-7) (PyTorch's
// max_norm), and returns the table itself: a lookup after it reads the
// rescaled rows. Its gradient is the identity, so the gradient of the
// table is that of a lookup of the rescaled table. Running it twice on the
// same rows changes nothing more, so several lookups of one table, in any
// order, each read rows no longer than maxNorm.
type renormOp struct {
	opkit.Op
	maxNorm    float64
	dtype      tensor.Dtype
	idType     tensor.Dtype
	vocab, dim int
	idDims     int
	lbl        opconfig.Label
}

func (o *renormOp) Arity() int { return 2 }

func (o *renormOp) Type() hm.Type {
	return hm.NewFnType(operand.Type(2, o.dtype), operand.Type(o.idDims, o.idType), operand.Type(2, o.dtype))
}

func (o *renormOp) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{o.vocab, o.dim}, nil
}

// Do rescales the named rows of the table and returns it.
func (o *renormOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity("embedding", " max-norm", len(in), 2); err != nil {
		return nil, err
	}
	t, ok := in[0].(*tensor.Dense)
	if !ok || !operand.Writable(t) || t.Dtype() != o.dtype || !shapes.SameShape(t.Shape(), []int{o.vocab, o.dim}) {
		return nil, fmt.Errorf("embedding %q: max-norm needs the table as a row-major %v tensor of shape (%d, %d), got %v: %w",
			o.lbl.Name, o.dtype, o.vocab, o.dim, in[0], gather.ErrShape)
	}
	ix, err := operand.ReadIndices("embedding", "ids", in[1])
	if err != nil {
		return nil, err
	}
	if err := operand.CheckIndices(o.lbl, ix, 0, o.vocab); err != nil {
		return nil, err
	}
	floatsFor(o.dtype).renorm(t, ix, o.dim, o.maxNorm)
	return t, nil
}

func (o *renormOp) String() string {
	return fmt.Sprintf("MaxNorm{%v, %q}", o.maxNorm, o.lbl.Name)
}

// DiffWRT: the table, by the identity.
func (o *renormOp) DiffWRT(int) []bool { return []bool{true, false} }

// SymDiff passes the gradient through unchanged.
func (o *renormOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	return gorgonia.Nodes{grad, nil}, nil
}

// DoDiff adds the output's gradient into the table's.
func (o *renormOp) DoDiff(ctx gorgonia.ExecutionContext, inputs gorgonia.Nodes, output *gorgonia.Node) error {
	up, err := output.Grad()
	if err != nil {
		return fmt.Errorf("embedding %q: max-norm: %w", o.lbl.Name, errs.Graph(err))
	}
	dg, err := inputs[0].Grad()
	if err != nil {
		return fmt.Errorf("embedding %q: max-norm: %w", o.lbl.Name, errs.Graph(err))
	}
	addGrad(dg, up)
	return nil
}

// addGrad adds the gradient up into dg, both float tensors of one shape,
// for the DoDiff of ops whose gradient is the identity. It does nothing
// when either is not a *tensor.Dense or both are the same tensor.
func addGrad(dg, up gorgonia.Value) {
	d, ok1 := dg.(*tensor.Dense)
	u, ok2 := up.(*tensor.Dense)
	if !ok1 || !ok2 || d == u {
		return
	}
	floatsFor(d.Dtype()).addInto(d, u)
}

var (
	_ gorgonia.SDOp = (*renormOp)(nil)
	_ gorgonia.ADOp = (*renormOp)(nil)
)
