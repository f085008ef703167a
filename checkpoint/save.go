package checkpoint

import (
	"fmt"
	"slices"
	"strings"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gathergrad/gather/internal/errs"
	"github.com/gathergrad/gather/internal/fileio"
	"github.com/gathergrad/gather/internal/operand"
)

// A Part is a piece of a model with named state: Save writes its tensors,
// Load restores them. Package nn's *Embedding (its table, under
// "<name>.weight") and optim.State are Parts, and so is Nodes.
type Part interface {
	// State returns the part's tensors by name, as they are now. Save
	// writes them; Load reads a tensor of each name and checks its shape
	// and dtype against them.
	State() (map[string]tensor.Tensor, error)
	// SetState copies tensors into the part: Load calls it once every
	// part's tensors are in the file with the right shapes and dtypes,
	// with exactly the names State returned.
	SetState(tensors map[string]*tensor.Dense) error
}

// Save writes the state of parts, and meta, to path with Write: one
// safetensors file, written atomically. Two parts that name one tensor are
// an ErrOption error, and then nothing is written.
func Save(path string, meta map[string]string, parts ...Part) error {
	all, _, err := states(parts)
	if err != nil {
		return err
	}
	return Write(path, all, meta)
}

// states returns the tensors of all parts, and each part's.
func states(parts []Part) (map[string]tensor.Tensor, []map[string]tensor.Tensor, error) {
	all := map[string]tensor.Tensor{}
	each := make([]map[string]tensor.Tensor, len(parts))
	for i, p := range parts {
		if p == nil {
			return nil, nil, fmt.Errorf("checkpoint: part %d is nil: %w", i, errs.ErrOption)
		}
		st, err := p.State()
		if err != nil {
			return nil, nil, err
		}
		for name, t := range st {
			if _, dup := all[name]; dup {
				return nil, nil, fmt.Errorf("checkpoint: two parts hold a tensor named %q: %w", name, errs.ErrOption)
			}
			all[name] = t
		}
		each[i] = st
	}
	return all, each, nil
}

// Load restores parts from the file at path, which Save (or Write, or
// another safetensors writer) made, and returns its metadata: LoadWith
// with the zero LoadOptions. Every tensor of the parts must be in the
// file with the same shape and dtype, and every tensor of the file must
// belong to a part.
func Load(path string, parts ...Part) (map[string]string, error) {
	r, err := LoadWith(path, LoadOptions{}, parts...)
	return r.Meta, err
}

// LoadOptions change what LoadWith accepts. The zero value is Load's.
type LoadOptions struct {
	// NonStrict (PyTorch's strict=False) loads the tensors the file and
	// the parts share, and reports the others instead of refusing them:
	// Report.Missing and Report.Unexpected. A part gets SetState with the
	// tensors of its that the file has, or no call when it has none; of
	// this module's parts, Nodes restores the nodes found, while an
	// embedding's table and an optimiser's state are loaded whole or not
	// at all (a part of them missing is an ErrMismatch error).
	NonStrict bool
	// Convert loads a float tensor of the file into a part of the other
	// float dtype: float32 into float64 exactly, float64 into float32
	// rounded to nearest. Without it a dtype that differs is ErrMismatch.
	Convert bool
}

// A Report says what LoadWith found: the file's metadata and, under
// NonStrict, the parts' tensors the file lacks (Missing) and the file's
// tensors no part holds (Unexpected), each sorted.
type Report struct {
	Meta                map[string]string
	Missing, Unexpected []string
}

// LoadWith restores parts from the file at path as o says. Everything is
// checked before any part changes: a tensor of the parts missing from the
// file, one of the file no part holds (both allowed under NonStrict) and
// one of another shape or dtype (another float dtype allowed under
// Convert) are an error wrapping ErrMismatch that names each tensor with
// its shape and dtype on both sides; a malformed file, or data that does
// not match its checksum (see Write), is an error wrapping ErrFormat (see
// Read). On any of these the parts are exactly as they were.
//
// A tensor of 16 MB or more that needs no conversion is read straight
// into the memory its part's State returned (for a table in a file, its
// mapping), a few MB at a time, after every check, its checksum included,
// has passed; the Go heap holds no copy of it. Only an I/O error during
// that read leaves such a tensor part-loaded, and the error says so.
func LoadWith(path string, o LoadOptions, parts ...Part) (Report, error) {
	_, each, err := states(parts)
	if err != nil {
		return Report{}, err
	}
	f, h, err := open(path)
	if err != nil {
		return Report{}, err
	}
	defer f.Close()
	byName := make(map[string]entry, len(h.entries))
	for _, e := range h.entries {
		byName[e.name] = e
	}
	var r Report
	var wrong []string
	claimed := map[string]bool{}
	for _, st := range each {
		for name, t := range st {
			claimed[name] = true
			e, ok := byName[name]
			if !ok {
				r.Missing = append(r.Missing, name)
				continue
			}
			if !fits(e, t, o.Convert) {
				wrong = append(wrong, fmt.Sprintf("%s is %s of shape %v in the file, %v of shape %v in the model", name, e.format.name, e.shape, t.Dtype(), t.Shape()))
			}
		}
	}
	for _, e := range h.entries {
		if !claimed[e.name] {
			r.Unexpected = append(r.Unexpected, e.name)
		}
	}
	slices.Sort(r.Missing)
	slices.Sort(r.Unexpected)
	slices.Sort(wrong)
	if len(r.Missing) > 0 && !o.NonStrict {
		wrong = append(wrong, "the file has no "+strings.Join(quoted(r.Missing), ", "))
	}
	if len(r.Unexpected) > 0 && !o.NonStrict {
		wrong = append(wrong, "no part holds the file's "+strings.Join(quoted(r.Unexpected), ", ")+
			" (pass the parts that saved them, or load with NonStrict)")
	}
	if len(wrong) > 0 {
		return Report{}, mismatch(path, "%s", strings.Join(wrong, "; "))
	}
	// Everything fits. The small tensors are read (and checked) into new
	// memory, the large ones checked in a pass over their data, and only
	// then are the large ones read into their parts' memory.
	read := make([]map[string]*tensor.Dense, len(parts))
	var direct []directRead
	for i, st := range each {
		read[i] = make(map[string]*tensor.Dense, len(st))
		for name, t := range st {
			e, ok := byName[name]
			if !ok {
				continue
			}
			if dst, ok := directTarget(e, t); ok {
				if err := h.verify(f, e); err != nil {
					return Report{}, fmt.Errorf("checkpoint: %s: tensor %q: %w", path, name, err)
				}
				direct = append(direct, directRead{e: e, dst: dst})
				read[i][name] = dst
				continue
			}
			v, err := h.read(f, e)
			switch {
			case err != nil || v.Dtype() == t.Dtype():
			case t.Dtype() == tensor.Int && v.Dtype() == tensor.Int64:
				v = ints(v) // Write stores Int as I64
			case isFloat(v.Dtype()) && isFloat(t.Dtype()):
				v = convert(v, t.Dtype()) // fits allowed it: Convert was given
			}
			if err != nil {
				return Report{}, fmt.Errorf("checkpoint: %s: tensor %q: %w", path, name, err)
			}
			read[i][name] = v
		}
	}
	for _, d := range direct {
		if err := h.readInto(f, d.e, d.dst); err != nil {
			return Report{}, fmt.Errorf("checkpoint: %s: tensor %q is part-loaded: %w", path, d.e.name, err)
		}
	}
	for i, p := range parts {
		if len(read[i]) == 0 && len(each[i]) > 0 {
			continue // NonStrict: the file has none of this part's tensors
		}
		if err := p.SetState(read[i]); err != nil {
			return Report{}, err
		}
	}
	r.Meta = h.meta
	return r, nil
}

// directMin is the size from which Load reads a tensor straight into its
// part's memory.
const directMin = 16 << 20

// A directRead is a tensor Load reads straight into dst.
type directRead struct {
	e   entry
	dst *tensor.Dense
}

// directTarget returns t as the destination of a direct read of e: a
// row-major *tensor.Dense, not a view, of e's dtype and directMin bytes
// or more, on a little-endian machine.
func directTarget(e entry, t tensor.Tensor) (*tensor.Dense, bool) {
	d, ok := t.(*tensor.Dense)
	if !ok || e.end-e.begin < directMin || !fileio.LittleEndian || !operand.Writable(d) {
		return nil, false
	}
	f, ok := formatOf(d.Dtype())
	return d, ok && f.name == e.format.name && d.Dtype() != tensor.Int && d.Dtype() != tensor.Bool
}

// fits reports whether the file's tensor e can load into t: the same
// shape, and the dtype Read gives e, or with convert another float dtype.
func fits(e entry, t tensor.Tensor, convert bool) bool {
	if !operand.SameShape(e.shape, t.Shape()) {
		return false
	}
	want, ok := formatOf(t.Dtype())
	if ok && want.name == e.format.name {
		return true
	}
	return convert && isFloat(e.format.dt) && isFloat(t.Dtype())
}

func isFloat(dt tensor.Dtype) bool { return dt == tensor.Float32 || dt == tensor.Float64 }

// convert returns v, a float tensor, in dt, the other float dtype.
func convert(v *tensor.Dense, dt tensor.Dtype) *tensor.Dense {
	out := tensor.New(tensor.Of(dt), tensor.WithShape(v.Shape().Clone()...))
	if dt == tensor.Float32 {
		o := out.Float32s()
		for i, x := range v.Float64s() {
			o[i] = float32(x)
		}
	} else {
		o := out.Float64s()
		for i, x := range v.Float32s() {
			o[i] = float64(x)
		}
	}
	return out
}

// ints returns v, an Int64 tensor, as an Int tensor.
func ints(v *tensor.Dense) *tensor.Dense {
	out := tensor.New(tensor.Of(tensor.Int), tensor.WithShape(v.Shape().Clone()...))
	o := out.Ints()
	for i, x := range v.Int64s() {
		o[i] = int(x)
	}
	return out
}

// mismatch returns an error about path and the model wrapping ErrMismatch.
func mismatch(path, format string, args ...any) error {
	return fmt.Errorf("checkpoint: %s: %s: %w", path, fmt.Sprintf(format, args...), ErrMismatch)
}

func quoted(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

// Nodes returns a Part of dense learnables (weights, biases), each under
// its node's name. Load copies into each node's value in place, so a
// machine built on the graph keeps working with the restored values. Each
// node must have a value: a *tensor.Dense, or a float scalar.
func Nodes(nodes ...*gorgonia.Node) Part { return nodesPart(nodes) }

type nodesPart []*gorgonia.Node

func (p nodesPart) State() (map[string]tensor.Tensor, error) {
	out := make(map[string]tensor.Tensor, len(p))
	for i, n := range p {
		if n == nil {
			return nil, fmt.Errorf("checkpoint: node %d is nil: %w", i, errs.ErrShape)
		}
		if _, dup := out[n.Name()]; dup {
			return nil, fmt.Errorf("checkpoint: two nodes are named %q: %w", n.Name(), errs.ErrOption)
		}
		switch v := n.Value().(type) {
		case *tensor.Dense:
			out[n.Name()] = v
		case gorgonia.Scalar:
			out[n.Name()] = tensor.New(tensor.FromScalar(v.Data()))
		default:
			return nil, fmt.Errorf("checkpoint: node %q has no tensor value (%T): %w", n.Name(), n.Value(), errs.ErrShape)
		}
	}
	return out, nil
}

func (p nodesPart) SetState(tensors map[string]*tensor.Dense) error {
	for _, n := range p {
		t, ok := tensors[n.Name()]
		if !ok {
			continue // LoadOptions.NonStrict: not in the file
		}
		switch v := n.Value().(type) {
		case *tensor.Dense:
			if err := CopyInto(v, t); err != nil {
				return fmt.Errorf("checkpoint: node %q: %w", n.Name(), err)
			}
		case gorgonia.Scalar:
			var s gorgonia.Value
			switch x := t.Data().(type) {
			case float64:
				s = gorgonia.NewF64(x)
			case float32:
				s = gorgonia.NewF32(x)
			default:
				return fmt.Errorf("checkpoint: node %q: a scalar of %v: %w", n.Name(), t.Dtype(), errs.ErrDtype)
			}
			if err := gorgonia.Let(n, s); err != nil {
				return fmt.Errorf("checkpoint: node %q: %v: %w", n.Name(), err, errs.ErrGraph)
			}
		}
	}
	return nil
}

// CopyInto copies the values of src into dst, in place: both of one dtype
// and shape, dst row-major and not a view. Parts use it in SetState.
func CopyInto(dst, src *tensor.Dense) error {
	if dst == nil || src == nil {
		return fmt.Errorf("checkpoint: copy into or from nil: %w", errs.ErrShape)
	}
	if dst.Dtype() != src.Dtype() || !operand.SameShape(dst.Shape(), src.Shape()) {
		return fmt.Errorf("checkpoint: copying %v of shape %v into %v of shape %v: %w", src.Dtype(), src.Shape(), dst.Dtype(), dst.Shape(), errs.ErrShape)
	}
	if !operand.Writable(dst) {
		return fmt.Errorf("checkpoint: the destination of shape %v is a view or not row-major: %w", dst.Shape(), errs.ErrShape)
	}
	if dst == src || dst.Shape().TotalSize() > 0 && dst.Uintptr() == src.Uintptr() {
		return nil // Load read the values into dst itself
	}
	s, err := operand.Read("checkpoint", "tensor", src)
	if err != nil {
		return err
	}
	n := len(s.Header.Raw)
	if m := len(dst.Header.Raw); m < n {
		n = m
	}
	copy(dst.Header.Raw[:n], s.Header.Raw[:n])
	return nil
}
