package driver

import "fmt"

// A BagMode says how the rows of a bag pool into one: nn.EmbeddingBag's
// and serve.Table.Bag's mode (PyTorch's embedding_bag mode).
type BagMode int

// The pooling modes.
const (
	BagSum  BagMode = iota // Σ wᵢ·rowᵢ
	BagMean                // (1/m)·Σ wᵢ·rowᵢ, m the number of non-padding ids
	BagMax                 // the elementwise maximum of wᵢ·rowᵢ
)

// String returns "sum", "mean" or "max", PyTorch's names of the modes.
func (m BagMode) String() string {
	if m >= BagSum && m <= BagMax {
		return [...]string{"sum", "mean", "max"}[m]
	}
	return fmt.Sprintf("BagMode(%d)", int(m))
}
