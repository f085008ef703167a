// Package gather gives Gorgonia the ONNX Gather and GatherElements operators
// as differentiable graph ops, with the same operations on plain tensors.
//
// # Operations
//
// Gather (ONNX Gather-13, NumPy take, PyTorch index_select) selects whole
// slices of data along one axis:
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
// tensors without a graph, into a new tensor or, with tensor.WithReuse and
// tensor.WithIncr, into one of the caller's; IndexAdd and ScatterAdd are
// their backward kernels.
//
// Package nn builds training pieces on these ops (embedding layers, pooled
// lookups, losses, row-sparse optimisers, tables in files); package
// checkpoint saves and loads them as safetensors files; package gradcheck
// checks gradients against finite differences; package openblas runs
// Gorgonia's matrix products in OpenBLAS (build tag openblas).
//
// # Indices
//
// Indices are tensors of dtype tensor.Int, tensor.Int32 or tensor.Int64. A
// negative index counts from the end of the axis, so for an axis of size s
// the valid range is [-s, s-1]. Anything outside it is an error; nothing is
// ever clamped or wrapped. Data may hold any dtype that gorgonia.org/tensor
// holds in Go memory; gradients exist for float32 and float64 data.
//
// # Errors
//
// Bad input is reported as an error, never a panic, and before anything is
// written: a failed call leaves its output buffer untouched and never
// modifies its inputs. Errors wrap one of the sentinels
// ErrIndexOutOfRange, ErrAxisOutOfRange, ErrShape, ErrDtype, ErrOption and
// ErrGraph (packages nn, checkpoint and gradcheck add
// ErrClosed, ErrInUse, ErrFormat and ErrMismatch); an out-of-range index is an
// *IndexError. Gorgonia's machines hide the error an op returned behind a
// wrapper without Unwrap; Cause recovers it.
//
// # Gradients
//
// Both of Gorgonia's machines differentiate the ops: the TapeMachine
// through SymDiff (gorgonia.Grad), the LispMachine through DoDiff, which
// adds into the gradient data already has. Repeated indices accumulate.
// The gradient is the same, bit for bit, for every GOMAXPROCS: each
// destination row or element sums its contributions in index order.
//
// # Speed
//
// Large calls are split across GOMAXPROCS goroutines. A new output is
// allocated without the runtime clearing it first, since every element is
// written. On amd64, a few assembly routines move and prefetch rows,
// write large new outputs with streaming stores and check indices 16 at a
// time; each has a Go twin of the same signature, which the purego build
// tag (and every other architecture) uses instead. bench/README.md gives
// the measurements.
package gather
