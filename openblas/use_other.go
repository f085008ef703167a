//go:build !openblas || !cgo

package openblas

import (
	"fmt"

	"github.com/gathergrad/gather"
)

// Enabled reports whether the package was built with OpenBLAS.
const Enabled = false

// Use returns an error wrapping gather.ErrOption and changes nothing: the
// package was built without the tag openblas (or without cgo), so
// Gorgonia keeps gonum's pure-Go BLAS.
func Use() error {
	return fmt.Errorf("openblas: built without -tags openblas (and cgo); gonum's pure-Go BLAS stays in use: %w", gather.ErrOption)
}
