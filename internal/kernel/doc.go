// Package kernel holds the slice-level loops of package gather and the
// machinery under them: Take and TakeAlong (the forward kernels), IndexAdd
// and ScatterAdd (their backward), BagPool (pooled lookups), FirstBad (the
// index check), RowMaxShift32, Exp32 and RowSums32 (the float32 softmax
// rows of the losses), AdamRow32 (SparseAdam's float32 step), the row
// updates of the optimisers, the losses' and BatchDot's loops, and Uninit
// (allocation without clearing); package parallel runs them on several
// goroutines.
// It is the only package of the module that links into the runtime or
// holds assembly, and with internal/fileio (mapped files) the only one that
// imports unsafe: in two files, unsafe.go (the conversions between slices
// and the addresses the assembly takes) and alloc_unsafe.go.
//
// Every assembly routine, in a file named *_amd64.s, has a Go twin named
// with the suffix Go (copyRowsGo, sumRowsGo, inRange64Go, exp32Go,
// rowMaxShift32Go, rowSums32Go, adamRow32Go, streamCopyGo, ...) that
// documents what it computes and is the reference TestAssemblyTwins checks
// it against. With the purego build tag, or on another architecture, the
// routines are their twins. A routine that needs a processor feature (AVX,
// AVX2) is called only where the feature was detected at start-up
// (hasRowAsm, hasCheckAsm, hasExpAsm, hasSoftmaxAsm, hasAdamAsm).
//
// The kernels take row-major slices and the sizes that describe them; the
// caller converts tensors to slices once (package operand) and checks
// shapes. Forward kernels report the first index out of range; backward
// kernels expect indices already checked.
package kernel
