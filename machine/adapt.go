package machine

import "gorgonia.org/gorgonia"

// adapt returns this package's equivalent of s's op, writing into a
// buffer what the op's Do returns, or nil if it has none.
func adapt(s *step, in gorgonia.Nodes) func(dst gorgonia.Value, in []gorgonia.Value) error {
	return nil
}
