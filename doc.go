// Package gather gives Gorgonia the ONNX Gather and GatherElements operators
// as differentiable graph ops, with the same operations on plain tensors.
//
// # Operations
//
// Gather (ONNX Gather-13, NumPy take) selects whole slices of data along
// one axis:
//
//	out[i₀…, j₀…jq, k…] = data[i₀…, indices[j₀…jq], k…]
//
// so data of shape [2, 5, 3] gathered on axis 1 with indices of shape [4, 2]
// gives an output of shape [2, 4, 2, 3].
//
// GatherElements (ONNX GatherElements-13, NumPy take_along_axis, PyTorch
// gather) picks one element per index; indices have the rank of data and the
// output has the shape of indices. On axis 1 of a matrix:
//
//	out[i][j] = data[i][indices[i][j]]
//
// The graph functions Gather and GatherElements add the ops to a
// gorgonia.ExprGraph; Take and TakeAlongAxis compute the same results on
// tensors without a graph; IndexAdd and ScatterAdd are their backward kernels.
//
// Built on them: Embedding, a learnable lookup table (with padding, frozen
// and row-sparse modes, and the SparseSGD and SparseAdam optimisers for the
// last); NLLLoss, the mean negative log-likelihood of integer targets, and
// CrossEntropy, the same after a softmax in one op; and GradCheck, which checks the gradient of any scalar Gorgonia expression
// against finite differences.
//
// # Indices
//
// Indices are tensors of dtype tensor.Int, tensor.Int32 or tensor.Int64. A
// negative index counts from the end of the axis, so for an axis of size s
// the valid range is [-s, s-1]. Anything outside it is an error; nothing is
// ever clamped or wrapped. Data may hold any dtype that gorgonia.org/tensor
// holds; gradients exist for float32 and float64 data.
//
// # Errors
//
// Bad input is reported as an error, never a panic, and before anything is
// written: a failed call leaves its output buffer untouched and never
// modifies its inputs. Errors wrap the sentinels ErrIndexOutOfRange,
// ErrAxisOutOfRange, ErrShape and ErrDtype; an out-of-range index is an
// *IndexError. Gorgonia's machines hide the error an op returned behind a
// wrapper without Unwrap; Cause recovers it.
//
// # Memory
//
// A new output that a kernel writes in full (Take, TakeAlongAxis, the ops'
// Do, the gradient ops' Do) is allocated without the runtime clearing it
// first, through a link to the runtime's allocator in one file
// (alloc_unsafe.go): on a large output the clearing, which Go does on one
// thread, costs more than the parallel kernel. Building with the purego tag
// replaces it with make.
//
// # Prefetching, streaming stores and row assembly
//
// On amd64, the kernels that move whole rows (Gather and its gradient) ask
// the processor for rows eight ahead of the one they move, through a few
// lines of assembly (prefetch_amd64.s), when rows are at least a cache line
// long and the memory they are read from at random is at least 1 MB: such
// reads wait on memory otherwise. A prefetch only hints; it changes no
// result. Gather writes a new output of at least 1 MB, gathered from data
// of at most 32 MB in rows of whole multiples of 16 bytes, with streaming
// (non-temporal) stores (stream_amd64.s), which write memory that is not in
// cache without first reading it; outputs into a caller's buffer use
// ordinary stores. The gradient of Gather writes a block of its destination
// of at least 1 MB the same way: each row as the first index names it, then
// zeros in the rows no index names, with the bits that clearing and adding
// give. On processors with
// AVX, Gather moves rows of whole multiples of 32 bytes eight at a time with
// one assembly call (rows_amd64.s) and 32-byte loads and stores. On
// processors with AVX2, the check of every index before a call writes into
// a buffer the caller can see tests 16 indices per step (check_amd64.s); the
// Go loop then finds the position of the first bad one. Building with the
// purego tag, or on other architectures, leaves these out.
//
// The gradient of Gather adds rows with gonum's axpy (blas/gonum), which
// is assembly on amd64 and gives each element the bits of the plain loop
// d + c*g; the results are the same for every GOMAXPROCS.
package gather
