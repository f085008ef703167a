// Package opkit holds what every Gorgonia op of the module shares: its
// identity, which Gorgonia's hash-consing compares, and its answers to
// the questions Gorgonia asks each op about the memory of its output.
package opkit

import (
	"fmt"
	"hash"
	"hash/fnv"
	"io"
)

// Op is embedded in each of the module's Gorgonia ops. It implements
// WriteHash and Hashcode from the op's identity, a text naming everything
// that sets the op's behaviour: Gorgonia merges two nodes whose ops write
// the same hash and whose inputs are the same nodes, so the identity must
// differ wherever a result could. An Op without an identity (the zero Op,
// as an op made only to call its IncrDo has) hashes by its own address and
// is merged with nothing.
//
// It also implements ReturnsPtr, CallsExtern and OverwritesInput: the op's
// output is a new value (New) or its first input itself (PassThrough), and
// no op of the module runs outside Go.
type Op struct {
	id   string
	pass bool
}

// New returns the Op of an op whose output is a new value, with the
// identity parts formats (as fmt.Sprintln does, without the newline).
func New(parts ...any) Op { return Op{id: identity(parts)} }

// PassThrough returns the Op of an op whose output is its first input
// itself, with the identity parts formats.
func PassThrough(parts ...any) Op { return Op{id: identity(parts), pass: true} }

func identity(parts []any) string {
	s := fmt.Sprintln(parts...)
	return s[:len(s)-1]
}

// ID returns the op's identity, for an op derived from it (a gradient op)
// to build its own on.
func (o *Op) ID() string { return o.id }

// WriteHash writes the identity, or without one the Op's address.
func (o *Op) WriteHash(h hash.Hash) {
	if o.id == "" {
		fmt.Fprintf(h, "%p", o)
		return
	}
	io.WriteString(h, o.id)
}

// Hashcode returns the FNV-1a hash of what WriteHash writes.
func (o *Op) Hashcode() uint32 {
	h := fnv.New32a()
	o.WriteHash(h)
	return h.Sum32()
}

// ReturnsPtr reports whether the output is the first input itself.
func (o *Op) ReturnsPtr() bool { return o.pass }

// CallsExtern returns false.
func (o *Op) CallsExtern() bool { return false }

// OverwritesInput returns 0 (the first input) when the output is the
// first input itself, else -1.
func (o *Op) OverwritesInput() int {
	if o.pass {
		return 0
	}
	return -1
}
