// Package openblas switches Gorgonia's matrix products (and gorgonia/tensor's
// BLAS calls) from the module's own GEMM (pure Go with AVX2 and FMA
// assembly, in use by default) to OpenBLAS, for those who have it. It is
// opt-in: build with the tag openblas, which needs cgo and OpenBLAS's
// headers and library (Debian: apt-get install libopenblas-dev), and call
// Use once before building graphs:
//
//	go run -tags openblas ./examples/embedding
//
//	if err := openblas.Use(); err != nil {
//		log.Print(err) // built without the tag: the module's GEMM stays in use
//	}
//
// Without the tag the package builds everywhere, Use returns an error
// wrapping gather.ErrOption and changes nothing, and the module needs no C
// toolchain.
//
// OpenBLAS starts threads of its own for large products; with Go's workers
// beside them the cores oversubscribe. Use therefore sets OpenBLAS to one
// thread, unless the environment sets OPENBLAS_NUM_THREADS, which it then
// leaves to OpenBLAS (Threads reports the count).
package openblas
