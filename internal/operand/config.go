package operand

import (
	"fmt"
	"strconv"

	"github.com/gathergrad/gather/internal/errs"
)

// Config holds the options of package gather's ops (gather.Option), read
// by package gather and, for the ops it builds on them, by package nn.
type Config struct {
	GradScale float64 // multiplies the gradient sent to data
	NoGrad    bool    // no gradient flows to data
	Name      string  // node name; empty for Gorgonia's default
	HasPad    bool    // a padding index was given
	Pad       int     // the padding index, normalised once the op is built
	Layer     Label   // how index errors name the layer; Op "" for none

	ScaleByFreq bool // divide each slice's gradient by its index's count
}

// A Func sets options of either op: it is a gather.Option (and so a
// gather.GatherOption). A GatherFunc sets options of Gather alone: it is
// a gather.GatherOption only. Their methods' parameter is this internal
// package's type, so that only this module makes options.
type (
	Func       func(*Config)
	GatherFunc func(*Config)
)

// ApplyGather sets f's options for a Gather.
func (f Func) ApplyGather(c *Config) { f(c) }

// ApplyElements sets f's options for a GatherElements.
func (f Func) ApplyElements(c *Config) { f(c) }

// ApplyGather sets f's options for a Gather.
func (f GatherFunc) ApplyGather(c *Config) { f(c) }

// A Label is how an index error names where it happened: the operation,
// the node or table, and the argument (see gather.IndexError). With
// NonNegative the argument takes indices in [0, s) only, as package nn's
// ids and targets do; otherwise negative indices count from the end.
type Label struct {
	Op, Name, Arg string
	NonNegative   bool
}

// String returns the op and, if it has one, the quoted name, as error
// messages start: `embedding "words"`.
func (l Label) String() string {
	if l.Name == "" {
		return l.Op
	}
	return l.Op + " " + strconv.Quote(l.Name)
}

// String lists the options that differ from the defaults, e.g. ", gradScale=2, noGrad".
func (c Config) String() string {
	s := ""
	if c.GradScale != 1 {
		s += ", gradScale=" + strconv.FormatFloat(c.GradScale, 'g', -1, 64)
	}
	if c.NoGrad {
		s += ", noGrad"
	}
	if c.HasPad {
		s += ", padding=" + strconv.Itoa(c.Pad)
	}
	if c.Name != "" {
		s += fmt.Sprintf(", name=%q", c.Name)
	}
	if c.Layer.Op != "" {
		s += fmt.Sprintf(", layer=%s %q %s", c.Layer.Op, c.Layer.Name, c.Layer.Arg)
		if c.Layer.NonNegative {
			s += " [0, s)"
		}
	}
	if c.ScaleByFreq {
		s += ", scaleGradByFreq"
	}
	return s
}

// NormIndex returns the padding index i of an axis of size s normalised
// to [0, s): i lies in [-s, s-1], negative counting from the end, as
// PyTorch's padding_idx and ONNX's indices do. Any other i is an error
// wrapping gather.ErrIndexOutOfRange, its message starting with prefix.
func NormIndex(prefix string, i, s int) (int, error) {
	if i < -s || i >= s {
		return 0, fmt.Errorf("%s: padding index %d is out of range [%d, %d] for an axis of size %d: %w", prefix, i, -s, s-1, s, errs.ErrIndexOutOfRange)
	}
	if i < 0 {
		i += s
	}
	return i, nil
}
