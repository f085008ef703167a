// Package serve answers requests with trained embedding tables outside any
// graph: read-only tables of float32 or float16 rows, or of FBGEMM's
// row-wise 8-bit and 4-bit rows (PyTorch's quantized embedding bags), in
// memory or mapped from a file, with lookups and bags into buffers the
// caller owns; raw ids mapped to rows as training's id map left them
// (IDs); and a model that keeps training served as it goes, each delta
// applied to a new version that shares what did not change (Table.Apply,
// IDs.Apply), while requests keep the version they started on.
package serve

import "github.com/gathergrad/gather/internal/errs"

// The sentinels this package's errors wrap (package gather's).
var (
	ErrIndexOutOfRange = errs.ErrIndexOutOfRange
	ErrShape           = errs.ErrShape
	ErrOption          = errs.ErrOption
	ErrClosed          = errs.ErrClosed // a call on a table after its Close
	// ErrSameFile: Save or QuantizeFile onto their source, or onto
	// another file this process reads, under any of its names; the
	// error names both and nothing is written.
	ErrSameFile = errs.ErrSameFile
)
