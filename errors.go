package gather

import (
	"github.com/gathergrad/gather/internal/errs"
)

// Sentinel errors: the errors this module's packages return wrap one, so
// that callers can test the class with errors.Is (serve/live also passes
// on the errors of the caller's load function, the file system and the
// request's context as they are). The six below are the root's, and the
// comment after each gives its text. The other packages export these
// more, each wrapped by the errors of its own calls (a name in two
// packages is one value, as a test checks):
//
//   - checkpoint: ErrFormat, ErrMismatch, ErrInUse, ErrSameFile, ErrDelta
//   - cluster: ErrFewReplicas, ErrUnknownOutcome, ErrNoDelta
//   - feed: ErrFormat, ErrMismatch (checkpoint's)
//   - gradcheck: ErrMismatch
//   - machine: ErrClosed, ErrBusy
//   - metrics: ErrNotFinite
//   - optim: ErrNotFinite, ErrStale
//   - serve: ErrIndexOutOfRange, ErrShape, ErrOption (the root's), ErrClosed, ErrSameFile, ErrDelta (checkpoint's)
//   - serve/live: ErrFull
//   - table: ErrClosed, ErrInUse, ErrSameFile, ErrCapacity, ErrJournal, ErrJournalFull
//   - table/driver: ErrFormat, ErrMismatch (checkpoint's), ErrClosed (table's)
var (
	// ErrIndexOutOfRange: an index lies outside [-s, s-1] for an axis of size s.
	ErrIndexOutOfRange = errIndexOutOfRange() // "index out of range"
	// ErrAxisOutOfRange: the axis lies outside [-r, r-1] for data of rank r.
	ErrAxisOutOfRange = errAxisOutOfRange() // "axis out of range"
	// ErrShape: the shapes, ranks or layouts of the arguments do not fit
	// together, or a size overflows int.
	ErrShape = errShape() // "shape mismatch"
	// ErrDtype: an argument has a dtype or type the operation does not accept.
	ErrDtype = errDtype() // "unsupported dtype"
	// ErrOption: an option that does not apply to the call, or options
	// that contradict each other.
	ErrOption = errOption() // "option does not apply"
	// ErrGraph: Gorgonia refused to build or differentiate a node; the
	// error wraps Gorgonia's own as well.
	ErrGraph = errGraph() // "graph error"
)

// The sentinels are made in package errs, which the module's internal
// packages share.
func errIndexOutOfRange() error { return errs.ErrIndexOutOfRange }
func errAxisOutOfRange() error  { return errs.ErrAxisOutOfRange }
func errShape() error           { return errs.ErrShape }
func errDtype() error           { return errs.ErrDtype }
func errOption() error          { return errs.ErrOption }
func errGraph() error           { return errs.ErrGraph }

// An IndexError records an index outside the valid range of its axis.
// It unwraps to ErrIndexOutOfRange. Its message names the operation, the
// node or table when it has a name, and the argument:
//
//	gather: indices[1,0] = 7 is out of range [-5, 4] for axis 0 of size 5
//	embedding "words": ids[1] = -1 is out of range [0, 4] for axis 0 of size 5
type IndexError = errs.IndexError

// Cause returns the error that an operation of this package returned inside
// err. Gorgonia's machines wrap an op's error in a type that has an Err method
// but no Unwrap, so errors.Is and errors.As cannot see through a RunAll error;
// they can through Cause's result:
//
//	if err := vm.RunAll(); err != nil {
//		var ie *gather.IndexError
//		if errors.As(gather.Cause(err), &ie) { ... ie.Value, ie.Pos ... }
//	}
//
// If err holds no error of this package, Cause returns err unchanged.
// Errors of packages nn and gradcheck are found the same way.
func Cause(err error) error {
	if e := errs.Ours(err); e != nil {
		return e
	}
	return err
}
