package driver

import "github.com/gathergrad/gather/internal/errs"

// ErrFormat: a file or a store's record is not well formed. Every error
// about a file's contents wraps it. It is checkpoint.ErrFormat.
var ErrFormat = errs.ErrFormat

// ErrMismatch: a well-formed file or store does not fit what reads it: a
// tensor or a column missing, or of another shape, dtype or layout. The
// error names both sides. It is checkpoint.ErrMismatch.
var ErrMismatch = errs.ErrMismatch

// ErrClosed: a table, a store or a map used after its Close. It is
// table.ErrClosed.
var ErrClosed = errs.ErrClosed
