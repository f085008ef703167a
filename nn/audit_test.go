package nn_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/gradcheck"
	"github.com/gathergrad/gather/nn"
	"github.com/gathergrad/gather/optim"
)

// The module's exported functions answer nil and misshapen arguments with
// an error, never a panic from Gorgonia, tensor or a nil pointer.
func TestExportedFunctionsDoNotPanic(t *testing.T) {
	g := gorgonia.NewGraph()
	f := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(2, 2), gorgonia.WithName("f"))
	sparse := func() error {
		g2 := gorgonia.NewGraph()
		e, err := nn.NewEmbedding(g2, "x", 3, 2, tensor.Float64, nn.WithSparse())
		if err != nil {
			return err
		}
		return e.Step(context.Background(), nil)
	}
	calls := map[string]func() error{
		"gradcheck.Check(nil)": func() error { return gradcheck.Check(nil, nil) },
		"gradcheck.Check(nil cost)": func() error {
			return gradcheck.Check(func(*gorgonia.ExprGraph, []*gorgonia.Node) (*gorgonia.Node, error) { return nil, nil }, []tensor.Tensor{nil})
		},
		"RowGradient(nil)":    func() error { _, err := optim.RowGradient(nil, nil, 3, -1); return err },
		"IndexAdd(nil)":       func() error { return gather.IndexAdd(nil, nil, nil, 0) },
		"ScatterAdd(nil)":     func() error { return gather.ScatterAdd(nil, nil, nil, 0) },
		"Take(nil)":           func() error { _, err := gather.Take(nil, nil, 0); return err },
		"TakeAlongAxis(nil)":  func() error { _, err := gather.TakeAlongAxis(nil, nil, 0); return err },
		"Gather(nil)":         func() error { _, err := gather.Gather(nil, nil, 0); return err },
		"GatherElements(nil)": func() error { _, err := gather.GatherElements(nil, nil, 0); return err },
		"CrossEntropy(scalar)": func() error {
			_, err := nn.CrossEntropy(gorgonia.NewScalar(g, tensor.Float64), gorgonia.NewScalar(g, tensor.Int))
			return err
		},
		"NLLLoss(scalar)": func() error {
			_, err := nn.NLLLoss(gorgonia.NewScalar(g, tensor.Float64), gorgonia.NewScalar(g, tensor.Int))
			return err
		},
		"EmbeddingBag(scalar)": func() error {
			_, err := nn.EmbeddingBag(gorgonia.NewScalar(g, tensor.Float64), gorgonia.NewScalar(g, tensor.Int), nil, nil, nn.BagSum)
			return err
		},
		"EmbeddingBag(float ids)":  func() error { _, err := nn.EmbeddingBag(f, f, nil, nil, nn.BagSum); return err },
		"SparseSGD.StepRows(nil)":  func() error { return (&optim.SparseSGD{}).StepRows(optim.Rows{}, nil) },
		"SparseAdam.StepRows(nil)": func() error { return optim.NewSparseAdam(1).StepRows(optim.Rows{}, &optim.RowGrad{}) },
		"SparseAdagrad.Check(nil)": func() error { return optim.NewSparseAdagrad(1).Check(1, nil, 4) },
		"NewMemoryTable(nil)":      func() error { _, err := optim.NewMemoryTable(nil, &optim.SparseSGD{}); return err },
		"(*MemoryTable).Step(nil)": func() error { return (&optim.MemoryTable{}).Step(context.Background(), &optim.SparseSGD{}, nil) },
		"NewEmbedding(huge)":       func() error { _, err := nn.NewEmbedding(g, "h", math.MaxInt/2, 4, tensor.Float32); return err },
		"(*Embedding).Step(nil)":   sparse,
		"PackBags(nil)":            func() error { return nn.PackBags(nil, nil, nil, 0) },
		"NewEmbedding(nil graph)":  func() error { _, err := nn.NewEmbedding(nil, "x", 3, 2, tensor.Float64); return err },
		"NewEmbedding(bad dtype)":  func() error { _, err := nn.NewEmbedding(g, "i", 3, 2, tensor.Int); return err },
		"NewEmbedding(zero option)": func() error {
			_, err := nn.NewEmbedding(g, "z", 3, 2, tensor.Float64, nil)
			return err
		},
	}
	for name, call := range calls {
		var err error
		assert.NotPanics(t, func() { err = call() }, name)
		assert.Error(t, err, name)
	}
}
