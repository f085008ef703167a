package nn

import (
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/internal/operand"
)

// renormOp rescales in place each row of the table that its ids name and
// whose L2 norm exceeds maxNorm, by maxNorm/(norm+1e-7) (PyTorch's
// max_norm), and returns the table itself: a lookup after it reads the
// rescaled rows. Its gradient is the identity, so the gradient of the
// table is that of a lookup of the rescaled table. Running it twice on the
// same rows changes nothing more, so several lookups of one table, in any
// order, each read rows no longer than maxNorm.
type renormOp struct {
	passGrad
	maxNorm    float64
	dtype      tensor.Dtype
	idType     tensor.Dtype
	vocab, dim int
	idDims     int
	lbl        operand.Label
}

// Do rescales the named rows of the table and returns it.
func (o *renormOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := operand.CheckArity("embedding", " max-norm", len(in), 2); err != nil {
		return nil, err
	}
	t, ok := in[0].(*tensor.Dense)
	if !ok || !operand.Writable(t) || t.Dtype() != o.dtype || !operand.SameShape(t.Shape(), []int{o.vocab, o.dim}) {
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

var _ gorgonia.ADOp = (*renormOp)(nil)
