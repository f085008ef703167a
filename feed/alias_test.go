package feed

import "gorgonia.org/tensor"

type (
	tensorT = tensor.Tensor
	denseT  = tensor.Dense
)
