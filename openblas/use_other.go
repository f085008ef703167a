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
// Gorgonia's products stay in the module's own GEMM.
func Use() error {
	return fmt.Errorf("openblas: built without -tags openblas (and cgo); the module's own GEMM stays in use: %w", gather.ErrOption)
}

// Threads returns 0: there is no OpenBLAS.
func Threads() int { return 0 }
