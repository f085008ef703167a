package driver

import (
	"gorgonia.org/tensor"
)

// A RowGrad is the gradient of an embedding table held as the rows a batch
// touched: Values[k] is the gradient of row Rows[k], and every other row's
// gradient is zero. Its size is O(batch × dim), whatever the vocabulary
// (TensorFlow's IndexedSlices, PyTorch's sparse embedding gradient).
// optim.RowGradient builds one from a lookup's ids and gradient.
type RowGrad struct {
	Rows   []int64       // distinct row ids in ascending order
	Values *tensor.Dense // [len(Rows), dim], the dtype of the table
}
