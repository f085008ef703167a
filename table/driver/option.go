package driver

import "gorgonia.org/gorgonia"

// An Option says how a new table's rows start and what each row carries:
// table.WithInit, WithSeed, WithPadding, WithReplace, WithState and
// WithHalf make them, and table.Create and cluster.Create take them.
type Option func(*Config)

// A Config is what the Options of one new table set.
type Config struct {
	Init    gorgonia.InitWFn // nil: N(0, 1) from Seed
	Seed    uint64
	HasPad  bool
	Pad     int
	Replace bool
	State   []Column
	Half    int // a Format of two bytes a value, or 0
}
