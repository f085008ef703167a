// Package errs holds the module's sentinel errors, which package gather
// exports under the same names, and the helpers that bring errors from
// Gorgonia's machines back to them. Every error of the module wraps one.
package errs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The sentinels every error of the module wraps; package gather documents
// them.
var (
	ErrIndexOutOfRange = errors.New("index out of range")
	ErrAxisOutOfRange  = errors.New("axis out of range")
	ErrShape           = errors.New("shape mismatch")
	ErrDtype           = errors.New("unsupported dtype")
	ErrOption          = errors.New("option does not apply")
	ErrGraph           = errors.New("graph error")

	// ErrClosed is driver.ErrClosed, table.ErrClosed and machine.ErrClosed: a table, file or
	// machine used after its Close.
	ErrClosed = errors.New("used after Close")
	// ErrInUse is table.ErrInUse and checkpoint.ErrInUse.
	ErrInUse = errors.New("the file is in use by an open table")
	// ErrNotFinite is optim.ErrNotFinite.
	ErrNotFinite = errors.New("value is not finite")
	// ErrSameFile is checkpoint.ErrSameFile, table.ErrSameFile and
	// serve.ErrSameFile.
	ErrSameFile = errors.New("the destination is a file being read")
	// ErrFormat is driver.ErrFormat and checkpoint.ErrFormat.
	ErrFormat = errors.New("malformed file")
	// ErrMismatch is driver.ErrMismatch and checkpoint.ErrMismatch.
	ErrMismatch = errors.New("checkpoint does not match the model")
)

var sentinels = []error{ErrIndexOutOfRange, ErrAxisOutOfRange, ErrShape, ErrDtype, ErrOption, ErrGraph, ErrClosed, ErrInUse}

// Prefix returns err with prefix and ": " before its message, unless
// its message starts with them already (an error that names the same
// thing), so that a message names each thing once.
func Prefix(prefix string, err error) error {
	if strings.HasPrefix(err.Error(), prefix+": ") {
		return err
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// Ours returns the first error in err's chain that wraps one of the
// sentinels, or nil. It follows Unwrap (one error or several) and, for
// the wrappers of Gorgonia's machines, which have no Unwrap, Err.
func Ours(err error) error {
	if err == nil {
		return nil
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return err
		}
	}
	switch x := err.(type) {
	case interface{ Unwrap() error }:
		return Ours(x.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range x.Unwrap() {
			if o := Ours(e); o != nil {
				return o
			}
		}
	case interface{ Err() error }:
		return Ours(x.Err())
	}
	return nil
}

// Graph returns an error from Gorgonia as one of the module's: the error
// of an op of the module that it holds (see Ours), or err wrapped with
// ErrGraph.
func Graph(err error) error {
	if o := Ours(err); o != nil {
		return o
	}
	return fmt.Errorf("%w: %w", err, ErrGraph)
}

// CheckGradSize reports an error, for the SymDiff of the op named op, if
// a zero-sized value would have to be made by Gorgonia's TapeMachine,
// which panics when it allocates one: if up (the upstream gradient node)
// or one of ins (the inputs the op differentiates) has no elements and is
// computed by an op. A zero-sized upstream gradient the user gives as a
// value is fine: the gradient of an empty lookup is then zeros. So
// gorgonia.Grad of a cost over an empty batch is refused here, while the
// graph is built.
func CheckGradSize(op string, up *gorgonia.Node, ins ...*gorgonia.Node) error {
	if up != nil && up.Op() != nil && len(up.Shape()) > 0 && up.Shape().TotalSize() == 0 {
		return emptyBatch(op, "its output's gradient", up.Shape())
	}
	for _, n := range ins {
		if n != nil && n.Op() != nil && n.Shape().TotalSize() == 0 {
			return emptyBatch(op, "an input", n.Shape())
		}
	}
	return nil
}

func emptyBatch(op, what string, s tensor.Shape) error {
	return fmt.Errorf("%s: %s has shape %v, no elements: an empty batch cannot be differentiated, "+
		"as Gorgonia's TapeMachine panics on zero-sized values; leave empty batches out of training graphs: %w", op, what, s, ErrShape)
}

// IndexError is gather.IndexError, which documents it.
type IndexError struct {
	Op    string // "gather", "gather_elements", or an nn operation such as "embedding" or "cross_entropy"
	Name  string // the node's name (WithName) or the table's (an nn lookup); "" for none
	Arg   string // the argument holding the index: "indices" if empty, "ids", "targets"
	Pos   []int  // position of the bad value in that argument
	Value int64  // the bad value
	Axis  int    // the data axis it indexes (normalised, >= 0)
	Size  int    // the size of that axis

	// NonNegative: the argument takes indices in [0, Size) only, as the
	// ids and targets of package nn do (PyTorch's rule); the root ops take
	// [-Size, Size-1] (ONNX's).
	NonNegative bool
}

func (e *IndexError) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if e.Name != "" {
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(e.Name))
	}
	b.WriteString(": ")
	if e.Arg == "" {
		b.WriteString("indices")
	} else {
		b.WriteString(e.Arg)
	}
	b.WriteByte('[')
	for i, p := range e.Pos {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(p))
	}
	b.WriteString("] = ")
	b.WriteString(strconv.FormatInt(e.Value, 10))
	if e.Size == 0 {
		fmt.Fprintf(&b, " is out of range: axis %d has size 0", e.Axis)
	} else {
		lo := -e.Size
		if e.NonNegative {
			lo = 0
		}
		fmt.Fprintf(&b, " is out of range [%d, %d] for axis %d of size %d", lo, e.Size-1, e.Axis, e.Size)
	}
	return b.String()
}

// Unwrap returns ErrIndexOutOfRange.
func (e *IndexError) Unwrap() error { return ErrIndexOutOfRange }
