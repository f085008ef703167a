//go:build openblas && cgo

package openblas

// The products go through gonum's cgo binding of the C BLAS interface
// (gonum.org/v1/netlib/blas/netlib); this directive links that interface
// to OpenBLAS.

/*
#cgo LDFLAGS: -lopenblas
*/
import "C"

import (
	"gonum.org/v1/netlib/blas/netlib"
	"gorgonia.org/gorgonia"
)

// Enabled reports whether the package was built with OpenBLAS.
const Enabled = true

// Use makes Gorgonia and gorgonia/tensor run their BLAS calls in OpenBLAS
// (gorgonia.Use(netlib.Implementation{})). It returns nil. Call it before
// building the graphs whose products it should speed up, not while a
// machine runs.
func Use() error {
	gorgonia.Use(netlib.Implementation{})
	return nil
}
