// Package openblas switches Gorgonia's matrix products (and gorgonia/tensor's
// BLAS calls) from gonum's pure-Go BLAS to OpenBLAS, which runs them many
// times faster. It is opt-in: build with the tag openblas, which needs cgo
// and OpenBLAS's headers and library (Debian: apt-get install
// libopenblas-dev), and call Use once before building graphs:
//
//	go run -tags openblas ./examples/embedding
//
//	if err := openblas.Use(); err != nil {
//		log.Print(err) // built without the tag: gonum's BLAS stays in use
//	}
//
// Without the tag the package builds everywhere, Use returns an error
// wrapping gather.ErrOption and changes nothing, and the module needs no C
// toolchain.
//
// OpenBLAS starts its own threads for large products; with Go's workers
// beside them two cores oversubscribe. Set OPENBLAS_NUM_THREADS=1 in the
// environment to keep OpenBLAS on the calling goroutine's thread.
package openblas
