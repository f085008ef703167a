package openblas_test

import (
	"errors"
	"github.com/gathergrad/gather/internal/vmtest"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather"
	"github.com/gathergrad/gather/openblas"
)

// Use switches the products when the package was built with OpenBLAS, and
// says it did not otherwise; a product computed after it is right either
// way.
func TestUse(t *testing.T) {
	err := openblas.Use()
	if openblas.Enabled != (err == nil) {
		t.Fatalf("Enabled = %v, Use() = %v", openblas.Enabled, err)
	}
	if err != nil && !errors.Is(err, gather.ErrOption) {
		t.Fatalf("Use() = %v, want an ErrOption error", err)
	}
	g := gorgonia.NewGraph()
	a := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithName("a"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6}))))
	b := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithName("b"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float32{1, 0, 0, 1, 1, 1}))))
	c := gorgonia.Must(gorgonia.Mul(a, b))
	vm := vmtest.New(t, g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	want := []float32{4, 5, 10, 11}
	got := c.Value().Data().([]float32)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("product %v, want %v", got, want)
		}
	}
}
