//go:build openblas && cgo

package openblas

// The products go through gonum's cgo binding of the C BLAS interface
// (gonum.org/v1/netlib/blas/netlib); this directive links that interface
// to OpenBLAS.

/*
#cgo LDFLAGS: -lopenblas
void openblas_set_num_threads(int);
int openblas_get_num_threads(void);
*/
import "C"

import (
	"os"

	"gonum.org/v1/netlib/blas/netlib"
	"gorgonia.org/gorgonia"
)

// Enabled reports whether the package was built with OpenBLAS.
const Enabled = true

// Use makes Gorgonia and gorgonia/tensor run their BLAS calls in OpenBLAS
// (gorgonia.Use(netlib.Implementation{})), on one thread of OpenBLAS's
// (openblas_set_num_threads(1)) unless the environment sets
// OPENBLAS_NUM_THREADS: the module's own loops already split their work
// across GOMAXPROCS, and OpenBLAS's threads beside them would contend for
// the same cores. It returns nil. Call it before building the graphs
// whose products it should speed up, not while a machine runs.
func Use() error {
	if _, set := os.LookupEnv("OPENBLAS_NUM_THREADS"); !set {
		C.openblas_set_num_threads(1)
	}
	gorgonia.Use(netlib.Implementation{})
	return nil
}

// Threads returns the number of threads OpenBLAS runs a product on.
func Threads() int { return int(C.openblas_get_num_threads()) }
